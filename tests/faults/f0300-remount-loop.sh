#!/usr/bin/env bash
# Unmount and remount beta at once, 10 times (times FAULT_SCALE), while
# alpha sends: every remount succeeds (the previous consumer lets go, or
# the new one waits for it: issue 8 defect 1), and every successful write
# is consumed exactly once.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_use_shared
FLEET_VHOST=f0300
new_vhost $FLEET_VHOST
N=$(stream_size 400)
LOOPS=$(scaled 10)
# paced so that the stream outlasts the remounts (about 0.4 s each)
PACE=$(awk -v l=$LOOPS -v n=$N 'BEGIN { printf "%.3f", l * 0.8 / n }')
TAG=f0300

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha &&
    drain_start beta
'

test_expect_success "$LOOPS times: fusermount3 -u beta, then mount it again at once, while alpha sends" '
    STREAM_PACE=$PACE stream_start alpha beta '$N' '$TAG' &&
    for i in $(seq 1 '$LOOPS'); do
        unmount_fleet beta && mount_fleet beta peers=alpha || { echo "remount $i failed"; exit 1; }
    done &&
    p=$(stream_progress '$TAG') && echo "remounts done at write $p of '$N'" &&
    test $p -lt '$N' &&
    stream_wait '$TAG' 300
'

test_expect_success 'reconciliation: every successful write consumed exactly once' '
    wait_for 60 "drained beta" &&
    reconcile '$TAG' beta/leads/beta/history beta/leads/beta/inbox
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly' '
    drain_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
