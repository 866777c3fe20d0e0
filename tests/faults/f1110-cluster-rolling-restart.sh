#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A rolling restart of all three cluster nodes, one at a time (clean stop,
# start, wait until it is a member again), under a stream alpha -> beta
# with quorum mailboxes: 0 lost, 0 duplicates (beta's reader script's own
# count), fleet.dlq empty, both sides working after.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
cluster_start_own 3 || { echo "# cluster did not start" >&2; exit 1; }
N=$(( $(scaled 600) > 1000 ? 1000 : $(scaled 600) ))
TAG=f1110

test_expect_success 'alpha and beta mount with quorum mailboxes and all three URIs' '
    mount_fleet alpha peers=beta queue_type=quorum &&
    mount_fleet beta peers=alpha queue_type=quorum &&
    wait_for 20 "grep -q \"^broker: connected$\" alpha/status && grep -q \"^broker: connected$\" beta/status" &&
    reader_start beta
'

test_expect_success "$N messages while nodes 1, 2, 3 restart one after the other" '
    stream_start alpha beta '$N' '$TAG' &&
    step='$((N / 5))' &&
    for i in 1 2 3; do
        wait_for 120 "test \$(stream_progress '$TAG') -ge $((step * i))" &&
        cluster_stop_node $i && cluster_start_node $i &&
        wait_for 60 "test \$(cluster_running $i | wc -l) = 3" || exit 1
        echo "node $i restarted at write $(stream_progress '$TAG')"
    done &&
    stream_wait '$TAG' 300 &&
    wait_for 60 "grep -q \"^broker: connected$\" beta/status" &&
    after_fault alpha beta '$TAG' &&
    { wait_for 90 "settled '$TAG' beta" || true; }
'

test_expect_success 'reconciliation: every successful write consumed exactly once' '
    reconcile '$TAG' beta --min-ok $((N / 4)) --faults 3
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly' '
    reader_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
