#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A message that reaches a mailbox after a broker restart but before its
# lead's fleetfs has reconnected (it waits in the queue, published-unread)
# is in that lead's inbox once it is back: CI once saw a resend to gamma
# go out between the broker's return and gamma's, and not reach gamma's
# inbox in 10 s (t0830 12; not explained: this order, made certain here by
# holding gamma back with a SIGSTOP while the broker restarts, passes).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: the reconnect and consume paths it drives run under ASan in t0300 and t0350" ;; esac
broker_start_own

test_expect_success 'alpha and gamma mount' '
    mount_fleet alpha peers=gamma send_timeout=2s inject=none &&
    mount_fleet gamma peers=alpha send_timeout=2s inject=none &&
    echo warm >alpha/peers/gamma/send &&
    wait_for 10 "grep -q warm gamma/leads/gamma/inbox"
'

test_expect_success 'gamma stopped, the broker restarted, alpha sends: published-unread' '
    pid=$(cat "$TEST_DIR/.harness/pid.gamma") &&
    at_exit "kill -CONT $pid 2>/dev/null; true" &&
    kill -STOP $pid &&
    broker_kill && broker_restart &&
    wait_for 30 "grep -q \"^broker: connected\" alpha/status" &&
    wait_for 10 "echo waiting >alpha/peers/gamma/send 2>/dev/null" &&
    tail -n1 alpha/leads/alpha/sent | jq -r .state >last.state &&
    cat last.state && test "$(cat last.state)" = published-unread &&
    test "$(broker_count lead.gamma.inbox)" -ge 1
'

test_expect_success 'gamma back: it reconnects and the waiting message is in its inbox' '
    kill -CONT $(cat "$TEST_DIR/.harness/pid.gamma") &&
    wait_for 30 "grep -q \"^consumer: ok\" gamma/status" &&
    wait_for 10 "grep -q waiting gamma/leads/gamma/inbox" &&
    test "$(grep -c waiting gamma/leads/gamma/inbox)" = 1
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet gamma
'

test_done
