#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A three-node RabbitMQ cluster, quorum mailboxes, every node's URI given
# to both mounts: a stream of 1000 messages alpha -> beta while the node
# alpha is connected to is kill -9'd (and brought back), then the node
# beta is connected to (and brought back). Exact reconciliation against
# beta's reader script and the broker: 0 lost, 0 duplicates, every
# successful write consumed once, fleet.dlq empty; both sides work after. Times from each kill
# to the mount being connected again are printed (issue 9).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
cluster_start_own 3 || { echo "# cluster did not start" >&2; exit 1; }
N=$(( $(scaled 1000) > 1000 ? 1000 : $(scaled 1000) ))

# node_of NAME: the cluster node (1..3) NAME's status says it is connected to
node_of() {
    local port i
    port=$(sed -n 's/^broker_uri: .*:\([0-9]*\)\/.*/\1/p' "$TEST_DIR/$1/status") || return 1
    for i in 1 2 3; do
        v=CLUSTER_PORT_$i
        [[ ${!v} == "$port" ]] && { echo $i; return 0; }
    done
    return 1
}
# kill_node_of NAME: kill -9 NAME's node, wait until NAME is connected
# elsewhere (printing how long it took), then bring the node back
kill_node_of() {
    local n t0
    n=$(node_of "$1") || return 1
    echo "$1 is on node $n: kill -9"
    t0=$(date +%s%N)
    cluster_kill "$n" || return 1
    wait_for 60 "n2=\$(node_of $1) && test \"\$n2\" != $n && grep -q \"^broker: connected$\" $1/status" || return 1
    echo "$1 connected to node $(node_of "$1") $(( ($(date +%s%N) - t0) / 1000000 )) ms after the kill" |
        tee -a "$TEST_DIR/times"
    cluster_start_node "$n"
}

test_expect_success 'alpha and beta mount with quorum mailboxes and all three URIs' '
    mount_fleet alpha peers=beta queue_type=quorum &&
    mount_fleet beta peers=alpha queue_type=quorum &&
    wait_for 20 "grep -q \"^broker: connected$\" alpha/status && grep -q \"^broker: connected$\" beta/status" &&
    cluster_ctl 1 list_queues -q name type >types &&
    grep -q "lead.beta.inbox.*quorum" types &&
    reader_start beta
'

ROUNDS=$(( FAULT_SCALE > 3 ? 3 : FAULT_SCALE ))   # 1; 3 in soak
for r in $(seq 1 $ROUNDS); do
    TAG=f1100r$r
    test_expect_success "round $r: $N messages; alpha's node killed at 1/3, beta's at 2/3 (each brought back)" '
        stream_start alpha beta '$N' '$TAG' &&
        wait_for 120 "test \$(stream_progress '$TAG') -ge $((N / 3))" &&
        kill_node_of alpha &&
        wait_for 180 "test \$(stream_progress '$TAG') -ge $((2 * N / 3))" &&
        kill_node_of beta &&
        stream_wait '$TAG' 300 &&
        wait_for 60 "grep -q \"^broker: connected$\" beta/status" &&
        wait_for 60 "test \$(cluster_running 1 | wc -l) = 3" &&
        after_fault alpha beta '$TAG' &&
        { wait_for 90 "settled '$TAG' beta" || true; }
    '
    [[ -f $TEST_DIR/times ]] && sed "s/^/# $TAG: /" "$TEST_DIR/times" && rm -f "$TEST_DIR/times"

    test_expect_success "round $r: reconciliation: every successful write consumed exactly once" '
        reconcile '$TAG' beta --min-ok $((N / 4)) --faults 2
    '
    [[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"
done

test_expect_success 'unmount cleanly' '
    reader_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
