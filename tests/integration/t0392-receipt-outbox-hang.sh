#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A receipt destination whose publish hangs delays no other destination
# (issue 16, 2.6: the closing note's "one sending thread"). gamma's receipt
# queue stops answering: its queue process is suspended inside the broker,
# so a publish to it is taken and never confirmed (what a quorum queue
# without a leader, or a wedged queue, does). alpha mounts with a long
# send_timeout (60 s), so an attempt to gamma stays in flight for that long.
# alpha consumes gamma's message first, then beta's: beta's sent must reach
# acked while gamma's first attempt is still in flight (alpha has not yet
# logged that gamma does not take its receipts, and the receipt still
# waits). Before the fix the outbox was one thread: beta's receipts waited
# behind gamma's attempt until it timed out. Once the queue answers again,
# gamma's receipt arrives (gamma's own sent says acked) and nothing is in
# fleet.dlq.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0392
new_vhost $FLEET_VHOST

B=$((3 * ${FAULT_SCALE:-1})) # beta's messages; make soak: 30

test_expect_success 'gamma sends alpha two messages; alpha acks the first, gamma sees acked' '
    mount_fleet alpha peers=beta:gamma inject=none send_timeout=60s &&
    mount_fleet beta peers=alpha &&
    mount_fleet gamma peers=alpha &&
    echo "g1" >gamma/peers/alpha/send && last_sent_id gamma >g1.id &&
    echo "g2" >gamma/peers/alpha/send && last_sent_id gamma >g2.id &&
    wait_for 10 "test \$(wc -l <alpha/leads/alpha/inbox) = 2" &&
    cat g1.id >alpha/leads/alpha/ack &&
    wait_for 10 "test \"\$(sent_state gamma $(cat g1.id))\" = acked" &&
    unmount_fleet gamma
'

test_expect_success 'lead.gamma.receipts stops answering; alpha acks gamma'\''s second message' '
    queue_process suspend lead.gamma.receipts &&
    at_exit "queue_process resume lead.gamma.receipts" &&
    cat g2.id >alpha/leads/alpha/ack &&
    wait_for 10 "grep -q \"^receipts_waiting: 1$\" alpha/status"
'

test_expect_success 'beta'\''s receipts arrive while gamma'\''s attempt is still in flight' '
    for i in $(seq $B); do
        echo "b$i" >beta/peers/alpha/send && last_sent_id beta >>b.ids || return 1
    done &&
    wait_for 10 "test \$(wc -l <alpha/leads/alpha/inbox) = $B" &&
    echo all >alpha/leads/alpha/ack &&
    for id in $(cat b.ids); do
        wait_for 40 "test \"\$(sent_state beta $id)\" = acked" || return 1
    done &&
    ! grep "receipts: gamma does not take its receipts" alpha.log &&
    grep -q "^receipts_waiting: 1$" alpha/status
'

test_expect_success 'the queue answers again: gamma'\''s receipt arrives, nothing dead-lettered' '
    queue_process resume lead.gamma.receipts &&
    wait_for 70 "grep -q \"^receipts_waiting: 0$\" alpha/status" &&
    grep -q "^receipts_dropped: 0$" alpha/status &&
    mount_fleet gamma peers=alpha &&
    wait_for 10 "test \"\$(sent_state gamma $(cat g2.id))\" = acked" &&
    n=$(broker_count fleet.dlq) && test "$n" = 0
'

test_expect_success 'both sides work after: beta and gamma send, alpha reads and acks' '
    echo "b4" >beta/peers/alpha/send && id=$(last_sent_id beta) &&
    echo "g3" >gamma/peers/alpha/send && gid=$(last_sent_id gamma) &&
    wait_for 10 "test \$(wc -l <alpha/leads/alpha/inbox) = 2" &&
    echo all >alpha/leads/alpha/ack &&
    wait_for 10 "test \"\$(sent_state beta $id)\" = acked" &&
    wait_for 10 "test \"\$(sent_state gamma $gid)\" = acked"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
