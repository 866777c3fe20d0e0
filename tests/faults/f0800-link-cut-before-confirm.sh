#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The link is cut between a publish and its confirm (issue 8 defect 7):
# alpha (its own network namespace) publishes while the broker is frozen,
# so the message is in the broker's socket; alpha's link is then cut
# silently and the broker thawed: the broker takes the message but its
# confirm never reaches alpha. alpha notices the lost connection (AMQP
# heartbeats) before send_timeout: the write must fail with ETIMEDOUT (the
# unknown-state errno, not ECOMM), sent must say unconfirmed, and once the
# link is back and beta consumed it, the receipt moves it on to acked.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/netns.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
netns_require
netns_setup || { echo "# netns_setup failed" >&2; exit 1; }
at_exit "kill -CONT -- -\$(cat $TEST_DIR/broker/pgid) 2>/dev/null || true"

state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent; }

test_expect_success 'alpha and beta, each in its own namespace; send_timeout 60 s' '
    netns_host alpha && netns_host beta &&
    host_mount alpha peers=beta send_timeout=60s &&
    host_mount beta peers=alpha &&
    echo warm-up >alpha/peers/beta/send &&
    wait_for 5 "grep -q warm-up beta/leads/beta/inbox" && echo all >beta/leads/beta/ack
'

# The warm-up's probe of beta's mailbox is older than 1 s by now, so the
# send asks again and, the broker frozen, goes out without the answer after
# PROBE_PUBLISH_WAIT_MS (1 s): the link is cut 2 s after the write began,
# once the message has left (cut at 1 s, it could still be waiting, and the
# broker never had it).
test_expect_success 'publish into a frozen broker, cut the link, thaw: the write fails with ETIMEDOUT' '
    broker_freeze &&
    { (if echo "cut before the confirm" >alpha/peers/beta/send 2>write.err; then echo ok; else echo failed; fi >write.rc) & } &&
    sleep 2 &&
    link_cut alpha &&
    broker_thaw &&
    wait_for 90 "test -s write.rc" &&
    cat write.rc write.err &&
    test "$(cat write.rc)" = failed &&
    grep -q "Connection timed out" write.err
'

test_expect_success 'sent says unconfirmed' '
    tail -n1 alpha/leads/alpha/sent | jq -r .msgId >id &&
    test "$(state_of $(cat id))" = unconfirmed
'

test_expect_success 'link back: beta has it; once beta acks it the receipt moves it on to acked' '
    link_restore alpha &&
    wait_for 60 "grep -q \"^broker: connected$\" alpha/status" &&
    wait_for 20 "grep -q $(cat id) beta/leads/beta/inbox" &&
    cat id >beta/leads/beta/ack &&
    wait_for 20 "test \"\$(state_of $(cat id))\" = acked"
'

test_expect_success 'after the fault: fleet.dlq empty, nothing rejected, both sides work' '
    fault_end f0800 alpha beta 
'
[[ -f $TEST_DIR/f0800.reconciled ]] && sed "s/^/# f0800: /" "$TEST_DIR/f0800.reconciled"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
