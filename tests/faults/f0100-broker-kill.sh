#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stream alpha -> beta (1000 messages, times FAULT_SCALE rounds) while the
# broker is kill -9'd and restarted twice mid-stream. Every write either
# succeeded and its message was consumed by beta exactly once, or failed
# with an errno of SPEC section 5 (and if it said "nothing published",
# nothing arrived). Counted from what beta's reader script read and acked
# (tests/faults/faults.sh), the broker's queue counts and fleet.dlq; after
# each round both sides work again.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_start_own
N=1000  # history keeps the newest 1000: one round fits it exactly

test_expect_success 'alpha and beta mount; a script reads beta'"'"'s inbox and acks what it read' '
    mount_fleet alpha peers=beta send_timeout=3s &&
    mount_fleet beta peers=alpha send_timeout=3s &&
    reader_start beta
'

for r in $(seq 1 "$FAULT_SCALE"); do
    TAG=f0100r$r
    test_expect_success "round $r: $N messages, the broker killed and restarted at 1/3 and 2/3" '
        stream_start alpha beta '$N' '$TAG' &&
        wait_for 120 "test \$(stream_progress '$TAG') -ge $((N / 3))" &&
        broker_kill && broker_restart &&
        wait_for 120 "test \$(stream_progress '$TAG') -ge $((2 * N / 3))" &&
        broker_kill && broker_restart &&
        stream_wait '$TAG' 300 &&
        wait_for 30 "grep -q \"^broker: connected$\" beta/status" &&
        after_fault alpha beta '$TAG' &&
        { wait_for 120 "settled '$TAG' beta" || true; } &&
        reconcile '$TAG' beta --min-ok $((N / 4)) --faults 2
    '
    [[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"
done

test_expect_success 'unmount cleanly' '
    reader_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
