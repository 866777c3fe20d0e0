#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The broker closes alpha's publish channel mid-stream (twice), as it does
# when it refuses a publish with a channel error (here a 406, the broker
# running an ack of a tag never given on that channel). The publishing
# thread reopens it without waiting for the broker (SPEC section 6: close-ok
# and channel.open sent, the open-ok and confirm mode read as frames, the
# sends meanwhile held in order); the publish unconfirmed when the channel
# closed fails ETIMEDOUT (its fate unknown) and is resent after the fault.
# Every successful write, and every ETIMEDOUT one resent, is consumed
# exactly once (as beta's reader script saw it), beta's mailbox ends empty
# and fleet.dlq empty, the publishing connection is the one it was (the
# broker's own list: the channel was reopened, the connection not made
# again), and after the fault both sides work.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_use_shared
FLEET_VHOST=f0410
new_vhost $FLEET_VHOST
N=$(stream_size 600)
TAG=f0410

test_expect_success 'alpha and beta mount; a script reads beta'"'"'s inbox and acks what it read' '
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha &&
    reader_start beta &&
    wait_for 10 "grep -q \"^broker: connected$\" alpha/status" &&
    broker_publish_conn alpha >conn.before && grep -q "<" conn.before
'

test_expect_success "$N messages; alpha's publish channel closed by the broker at 1/3 and 2/3" '
    stream_start alpha beta '$N' '$TAG' &&
    wait_for 120 "test \$(stream_progress '$TAG') -ge $((N / 3))" &&
    broker_close_publish_channel alpha &&
    wait_for 20 "test \$(grep -c \"channel 1 closed by the broker: 406\" alpha.log) = 1" &&
    wait_for 120 "test \$(stream_progress '$TAG') -ge $((2 * N / 3))" &&
    broker_close_publish_channel alpha &&
    wait_for 20 "test \$(grep -c \"channel 1 closed by the broker: 406\" alpha.log) = 2" &&
    stream_wait '$TAG' 300 &&
    after_fault alpha beta '$TAG' &&
    { wait_for 60 "settled '$TAG' beta" || true; }
'

test_expect_success 'the publishing connection stayed; nothing was dead-lettered' '
    broker_publish_conn alpha >conn.after && test_cmp conn.before conn.after &&
    dead_letters_are 0 alpha beta
'

test_expect_success 'reconciliation: every successful write consumed exactly once' '
    reconcile '$TAG' beta --min-ok $((N - 2)) --faults 2
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly' '
    reader_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
