#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Claims on a three-node RabbitMQ cluster (doc/claims.md, "Both brokers,
# and a cluster"): what a node loss does to a claim, measured. A claim's
# two queues are classic queues on the node that first declared them.
# 1. The node the holder is connected to is killed (its queues on another):
#    the holder is told it lost the claim, another host takes it, the token
#    grows.
# 2. The node of the claim's queues is killed (the holder on another): the
#    holder is told (the broker cancels its consumer), nobody can take it
#    while that node is down (EIO, never a success), and once the node is
#    back the next take gets the next token (it outlived the node).
# The broker's side is read by tests/tools/claimpeek.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: the cluster's behaviour, not fleetfs's memory (t1100-t1102 run under ASan)" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
cluster_start_own 3 || { echo "# cluster did not start" >&2; exit 1; }
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
peek() { "$PEEK" "$1" "$2"; }
token_of() { peek "$1" "$2" | sed -n "s/.* max \([0-9]*\) .*/\1/p"; }

test_expect_success 'beta on node 1 (then 3), alpha on node 2 (then 3)' '
    FLEET_BROKER_URI="$CLUSTER_URI_1,$CLUSTER_URI_3" mount_fleet beta &&
    FLEET_BROKER_URI="$CLUSTER_URI_2,$CLUSTER_URI_3" mount_fleet alpha &&
    wait_for 20 "grep -q \"claims: connected to 127.0.0.1:$CLUSTER_PORT_1\" beta.log" &&
    wait_for 20 "grep -q \"claims: connected to 127.0.0.1:$CLUSTER_PORT_2\" alpha.log"
'

test_expect_success 'the holder'"'"'s node killed: alpha told it lost x, beta takes x with token 3' '
    mkdir beta/claims/x && rmdir beta/claims/x &&
    wait_for 10 "mkdir alpha/claims/x 2>/dev/null" &&
    test "$(token_of "$CLUSTER_URI_1" x)" = 2 &&
    t0=$(_test_now) &&
    cluster_kill 2 &&
    wait_for 30 "grep -q \"claims: lost claim x (token 2)\" alpha.log" &&
    t1=$(_test_now) &&
    wait_for 60 "mkdir beta/claims/x 2>/dev/null" &&
    t2=$(_test_now) &&
    peek "$CLUSTER_URI_1" x >p && grep -q "^consumers 1 tokens 1 max 3 holder beta$" p &&
    echo "# the node of the holder killed at 0: holder told at $(((t1 - t0) / 1000)) ms, another host held it at $(((t2 - t0) / 1000)) ms" >>measured &&
    rmdir beta/claims/x &&
    cluster_start_node 2 &&
    wait_for 60 "test \$(cluster_running 1 | wc -l) = 3"
'

test_expect_success 'the node of the claim'"'"'s queues killed: the holder told, no take succeeds meanwhile, the token outlives it' '
    wait_for 30 "grep -q \"claims: connected to 127.0.0.1:$CLUSTER_PORT_3\" alpha.log" &&
    mkdir beta/claims/y && rmdir beta/claims/y &&
    wait_for 10 "mkdir alpha/claims/y 2>/dev/null" &&
    test "$(token_of "$CLUSTER_URI_3" y)" = 2 &&
    t0=$(_test_now) &&
    cluster_kill 1 &&
    wait_for 30 "grep -q \"claims: lost claim y (token 2)\" alpha.log" &&
    t1=$(_test_now) &&
    test_must_fail test -d alpha/claims/y &&
    wait_for 60 "grep -q \"claims: connected to 127.0.0.1:$CLUSTER_PORT_3\" beta.log" &&
    test_must_fail mkdir beta/claims/y 2>err &&
    test_must_fail mkdir alpha/claims/y 2>>err &&
    echo "# queue node killed at 0: holder told at $(((t1 - t0) / 1000)) ms; mkdir meanwhile: $(sort -u err | tr "\n" " ")" >>measured &&
    cluster_start_node 1 &&
    wait_for 60 "test \$(cluster_running 3 | wc -l) = 3" &&
    wait_for 60 "mkdir alpha/claims/y 2>/dev/null" &&
    t2=$(_test_now) &&
    peek "$CLUSTER_URI_3" y >p && grep -q "^consumers 1 tokens 1 max 3 holder alpha$" p &&
    echo "# ... y taken again $(((t2 - t0) / 1000)) ms after the kill, token 3" >>measured
'

[[ -s measured ]] && cat measured
test_done
