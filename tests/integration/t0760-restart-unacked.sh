#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A mount restarted while the broker was down keeps its unacked messages,
# even when the broker loses their `redelivered` flag (issue 20 section 2).
# beta holds three messages; the broker stops; beta is stopped and the
# broker comes back; the messages are moved within beta's mailbox
# (tests/tools/rawpub --move: each taken and published again, as a shovel
# does, and as LavinMQ does to the flag across its own restart), so they
# arrive unflagged; beta starts again. They are ours coming back: shown
# again, nothing dead-lettered as a replay. Counted from the inbox beta
# shows and the broker's own queue counts. t0765 runs the same on LavinMQ.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub

test_expect_success 'beta holds three messages from alpha' '
    mount_fleet beta peers=alpha inject=none &&
    mount_fleet alpha peers=beta inject=none &&
    for i in 1 2 3; do echo "unacked $i" >alpha/peers/beta/send || exit 1; done &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 3" &&
    msgids beta/leads/beta/inbox | sort >held &&
    n=$(broker_count lead.beta.inbox) && test "$n" = 3 &&
    n=$(broker_count fleet.dlq) && test "$n" = 0
'

test_expect_success 'the broker stops; beta is restarted meanwhile; the flag is lost on the way back' '
    broker_stop &&
    unmount_fleet beta &&
    broker_restart &&
    "$RAWPUB" "$(broker_uri)" lead.beta.inbox --move >moved &&
    test "$(cat moved)" = "moved 3" &&
    mount_fleet beta peers=alpha inject=none
'

test_expect_success 'beta shows the three again (redelivered), nothing is dead-lettered' '
    wait_for 20 "test \$(wc -l <beta/leads/beta/inbox) = 3" &&
    msgids beta/leads/beta/inbox | sort >shown &&
    test_cmp held shown &&
    test "$(jq -r .redelivered beta/leads/beta/inbox | sort -u)" = true &&
    n=$(broker_count fleet.dlq) && test "$n" = 0 &&
    n=$(broker_count lead.beta.inbox) && test "$n" = 3 &&
    ! grep -q "^rejected_replayed" beta/status
'

test_expect_success 'acked, they are consumed once; alpha learns it' '
    echo all >beta/leads/beta/ack &&
    wait_for 10 "n=\$(broker_count lead.beta.inbox) && test \"\$n\" = 0" &&
    test ! -s beta/leads/beta/inbox &&
    test "$(jq -r .consumed beta/leads/beta/history | sort | uniq -c | tr -s " ")" = " 3 acked" &&
    wait_for 20 "test \"\$(jq -r .state alpha/leads/alpha/sent | sort -u)\" = acked" &&
    n=$(broker_count fleet.dlq) && test "$n" = 0
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
