#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A host whose broker URIs all fail at start (issue 9): it still mounts and
# serves its tree (status says unreachable, sends fail with ECOMM), and it
# connects by itself when one of them comes up — then sending works and
# mail that waited for it arrives.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
port_free() { [[ -z $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
# below Linux's ephemeral ports (32768 and up): a port there that is free
# now can be the local end of anybody's outgoing connection when the
# broker is started on it later (seen: LavinMQ could not bind P2)
pick() { local p; for _ in $(seq 50); do p=$((31000 + RANDOM % 1700)); port_free $p && { echo $p; return; }; done; return 1; }
P1=$(pick) && P2=$(pick) && P3=$(pick) || { echo "# no free ports" >&2; exit 1; }
URIS="amqp://guest:guest@127.0.0.1:$P1/%2f,amqp://guest:guest@127.0.0.1:$P2/%2f,amqp://guest:guest@127.0.0.1:$P3/%2f"

test_expect_success 'no broker on any of three URIs: alpha still mounts and serves its tree' '
    FLEET_BROKER_URI=$URIS mount_fleet alpha peers=beta &&
    grep -qE "^broker: (unreachable|connecting)" alpha/status &&
    ls alpha/peers >peers && echo beta >want && test_cmp want peers &&
    test_must_fail bash -c "echo hi >alpha/peers/beta/send" 2>err &&
    grep -q "Communication error on send" err
'

test_expect_success 'a broker comes up on the second URI: alpha connects by itself' '
    t0=$SECONDS &&
    _broker_start "$TEST_DIR/broker" --port $P2 && _broker_select "$TEST_DIR/broker/env" &&
    wait_for 60 "grep -q \"^broker: connected$\" alpha/status" &&
    echo "connected $((SECONDS - t0)) s after the broker was started" &&
    grep -q "^broker_uri: .*:$P2/" alpha/status
'

test_expect_success 'sending works; beta, mounted later, gets it' '
    echo "now you can hear me" >alpha/peers/beta/send &&
    FLEET_BROKER_URI=$URIS mount_fleet beta peers=alpha &&
    wait_for 30 "grep -q \"now you can hear me\" beta/leads/beta/inbox"
'

test_expect_success 'after the fault: fleet.dlq empty, nothing rejected, both sides work' '
    fault_end f1130 alpha beta 
'
[[ -f $TEST_DIR/f1130.reconciled ]] && sed "s/^/# f1130: /" "$TEST_DIR/f1130.reconciled"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
