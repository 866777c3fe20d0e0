#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# t0760 on LavinMQ, the seed fleet's broker, which does not keep the
# `redelivered` flag across its own restart (measured with 1.0.1): a mount
# restarted while LavinMQ was down keeps its unacked messages — shown
# again, not dead-lettered as replays. Runs where a LavinMQ binary is found:
# $LAVINMQ_BIN, else /work/lavinmq/src/bin/lavinmq (../shared/LAVINMQ.md
# says how to build it); skipped otherwise. Counted from the inbox beta
# shows and LavinMQ's own queue counts (its HTTP API).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
LAVINMQ=${LAVINMQ_BIN:-/work/lavinmq/src/bin/lavinmq}
[[ -x $LAVINMQ ]] || test_skip_all --planned "no LavinMQ binary (no package in the registries: build it as shared/LAVINMQ.md says, then set LAVINMQ_BIN)"

LDIR=$TEST_DIR/lavinmq
mkdir -p "$LDIR/data"
port_free() { [[ -z $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
pick() {
    local p
    for _ in $(seq 1 200); do
        p=$((20000 + RANDOM % 20000))
        port_free $p && [[ $p != "${1:-}" ]] && { echo $p; return 0; }
    done
    return 1
}
LPORT=$(pick) && LHTTP=$(pick "$LPORT") || test_skip_all "no free port"
# the harness's broker env, pointing at LavinMQ (mount_fleet reads it)
cat >"$LDIR/env" <<EOF
export FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:$LPORT/%2f
export BROKER_PORT=$LPORT
EOF
_broker_select "$LDIR/env"

lavin_start() {
    setsid "$LAVINMQ" -D "$LDIR/data" -b 127.0.0.1 --amqp-bind=127.0.0.1 --http-bind=127.0.0.1 \
        -p "$LPORT" --http-port="$LHTTP" </dev/null >>"$LDIR/log" 2>&1 &
    echo $! >"$LDIR/pgid"
    wait_for 20 "! port_free $LPORT && ! port_free $LHTTP"
}
# kill -9 of its process group: LavinMQ loses the flag on a graceful stop too
lavin_kill() {
    kill -9 -- -"$(cat "$LDIR/pgid")" && wait_for 10 "port_free $LPORT"
}
at_exit "kill -9 -- -\$(cat '$LDIR/pgid' 2>/dev/null) 2>/dev/null"
# count QUEUE: messages ready + unacked, per LavinMQ (nothing for no such queue)
count() {
    curl -sf -u guest:guest "http://127.0.0.1:$LHTTP/api/queues/%2f/$1" | jq -r .messages
}

test_expect_success 'LavinMQ runs; beta holds three messages from alpha' '
    lavin_start &&
    mount_fleet beta peers=alpha inject=none &&
    mount_fleet alpha peers=beta inject=none &&
    wait_for 10 "grep -q \"^broker: connected\" beta/status" &&
    grep -q "LavinMQ" beta/status &&
    for i in 1 2 3; do echo "unacked $i" >alpha/peers/beta/send || exit 1; done &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 3" &&
    msgids beta/leads/beta/inbox | sort >held &&
    wait_for 10 "test \"\$(count lead.beta.inbox)\" = 3" &&
    test "$(count fleet.dlq)" = 0
'

test_expect_success 'LavinMQ goes down; beta is restarted meanwhile; LavinMQ comes back' '
    lavin_kill &&
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=none &&
    lavin_start
'

test_expect_success 'beta shows the three again (redelivered), nothing is dead-lettered' '
    wait_for 30 "test \$(wc -l <beta/leads/beta/inbox) = 3" &&
    msgids beta/leads/beta/inbox | sort >shown &&
    test_cmp held shown &&
    test "$(jq -r .redelivered beta/leads/beta/inbox | sort -u)" = true &&
    test "$(count fleet.dlq)" = 0 &&
    test "$(count lead.beta.inbox)" = 3 &&
    ! grep -q "^rejected_replayed" beta/status
'

test_expect_success 'acked, they are consumed once; alpha learns it' '
    echo all >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(count lead.beta.inbox)\" = 0" &&
    test "$(jq -r .consumed beta/leads/beta/history | sort | uniq -c | tr -s " ")" = " 3 acked" &&
    wait_for 30 "test \"\$(jq -r .state alpha/leads/alpha/sent | sort -u)\" = acked" &&
    test "$(count fleet.dlq)" = 0
'

test_expect_success 'unmount cleanly; LavinMQ stops' '
    unmount_fleet alpha && unmount_fleet beta && lavin_kill
'

test_done
