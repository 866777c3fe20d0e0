#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# t0760 on LavinMQ, the seed fleet's broker, which does not keep the
# `redelivered` flag across its own restart (measured with 1.0.1): a mount
# restarted while LavinMQ was down keeps its unacked messages — shown
# again, not dead-lettered as replays. Runs on every run, whichever broker
# the suite uses: this file starts its own private LavinMQ (scripts/broker
# --kind lavinmq, built once into build/lavinmq from ../shared/lavinmq).
# Counted from the inbox beta shows and LavinMQ's own queue counts (its
# HTTP API, through broker_count).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
FLEET_BROKER_KIND=lavinmq broker_start_own || test_fail_all "no private LavinMQ (see above)"
test "$(broker_kind)" = lavinmq || test_fail_all "the broker started is not LavinMQ"
lavin_start() { broker_restart; }
# kill -9 of its process group: LavinMQ loses the flag on a graceful stop too
lavin_kill() { broker_kill; }
count() { broker_count "$1"; }

test_expect_success 'LavinMQ runs; beta holds three messages from alpha' '
    mount_fleet beta peers=alpha inject=none &&
    mount_fleet alpha peers=beta inject=none &&
    wait_for 10 "grep -q \"^broker: connected\" beta/status" &&
    grep -q "LavinMQ" beta/status &&
    for i in 1 2 3; do echo "unacked $i" >alpha/peers/beta/send || exit 1; done &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 3" &&
    msgids beta/leads/beta/inbox | sort >held &&
    wait_for 10 "test \"\$(count lead.beta.inbox)\" = 3" &&
    test "$(count fleet.dlq)" = 0
'

test_expect_success 'LavinMQ goes down; beta is restarted meanwhile; LavinMQ comes back' '
    lavin_kill &&
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=none &&
    lavin_start
'

test_expect_success 'beta shows the three again (redelivered), nothing is dead-lettered' '
    wait_for 30 "test \$(wc -l <beta/leads/beta/inbox) = 3" &&
    msgids beta/leads/beta/inbox | sort >shown &&
    test_cmp held shown &&
    test "$(jq -r .redelivered beta/leads/beta/inbox | sort -u)" = true &&
    test "$(count fleet.dlq)" = 0 &&
    test "$(count lead.beta.inbox)" = 3 &&
    ! grep -q "^rejected_replayed" beta/status
'

test_expect_success 'acked, they are consumed once; alpha learns it' '
    echo all >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(count lead.beta.inbox)\" = 0" &&
    test "$(jq -r .consumed beta/leads/beta/history | sort | uniq -c | tr -s " ")" = " 3 acked" &&
    wait_for 30 "test \"\$(jq -r .state alpha/leads/alpha/sent | sort -u)\" = acked" &&
    test "$(count fleet.dlq)" = 0
'

test_expect_success 'unmount cleanly; LavinMQ stops' '
    unmount_fleet alpha && unmount_fleet beta && lavin_kill
'

test_done
