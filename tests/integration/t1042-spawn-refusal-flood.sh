#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A refusal flood cannot make the far host forget a request that is still
# valid (SPEC section 11's replay guard, state_dir/control.seen): any
# trusted host can have requests refused, and were the oldest refused msgId
# pushed out of the guard before its expiry, a captured copy would be
# judged again. beta remembers 3 refused requests here
# (FLEETFS_TEST_CONTROL_SEEN_CAP; 10000 in real life). gamma, trusted but
# not in spawn_from, is refused three times; a fourth request is dropped
# unanswered to fleet.dlq rather than judged; a replay of the first is still
# refused as a replay; once the first expires, requests are judged again.
# Requests are signed with tests/tools/ctlsign and put into control.beta
# with rawpub; answers are read from lead.gamma.receipts with amqp-get.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1042
new_vhost $FLEET_VHOST
URI=$(broker_uri $FLEET_VHOST)

tmux_private

ctl_tools

CTL_FAR=beta
request() { ctl_request "$@"; }
again() { "$RAWPUB" "$URI" control.beta --body-file "$1.json" >/dev/null; }
answers() { ctl_answer "$1" "${2:-gamma}"; }
detail_of() { answers "$@" | jq -r .detail | tail -n1; }
count_of() { answers "$@" | wc -l; }

cat >beta.conf <<EOF2
[profile worker]
command = $BIN/tools/fake-agent $TEST_DIR/typed.worker
max = 1
sandbox = none
EOF2

test_expect_success 'beta serves control requests; alpha may spawn, gamma is only trusted' '
    for h in alpha beta gamma; do
        FLEET_BROKER_URI=$URI "$FLEETFS" declare $h >/dev/null && fleet_key $h || exit 1
    done &&
    FLEETFS_TEST_CONTROL_SEEN_CAP=3 mount_fleet beta inject=tmux inject_commands=fake-agent \
        spawn_from=alpha config="$TEST_DIR/beta.conf" &&
    wait_for 10 "grep -q \"consuming control.beta\" beta.log"
'

test_expect_success 'three refusals are answered and fill the guard' '
    for i in 1 2 3; do request r$i gamma --profile worker --name r$i --ttl-ms 40000 || exit 1; done &&
    wait_for 15 "test \$(count_of r3) = 1" &&
    for i in 1 2 3; do detail_of r$i | grep -q "requester not in spawn_from" || exit 1; done
'

test_expect_success 'a fourth is dropped unanswered to fleet.dlq while the first is still valid' '
    dlq0=$(broker_count fleet.dlq) &&
    request r4 gamma --profile worker --name r4 &&
    wait_for 10 "grep -q \"spawn: dropped 1 control request(s), the last gamma.s spawn request $(jq -r .msgId r4.json), unanswered\" beta.log" &&
    wait_for 10 "test \"\$(broker_count fleet.dlq)\" = $((${dlq0:-0} + 1))" &&
    test $(count_of r4) = 0
'

test_expect_success 'the first refused request replayed is still refused as a replay' '
    again r1 &&
    wait_for 10 "test \$(count_of r1) = 2" &&
    detail_of r1 | grep -q "replayed: request $(jq -r .msgId r1.json) was received here before" &&
    grep -q "spawn: refused gamma.s spawn request $(jq -r .msgId r1.json) (r1): replayed" beta.log
'

test_expect_success 'meanwhile a request alpha may make is dropped too, not judged (no agent)' '
    dlq0=$(broker_count fleet.dlq) &&
    request s1 alpha --profile worker --name s1 &&
    wait_for 10 "test \"\$(broker_count fleet.dlq)\" = $((${dlq0:-0} + 1))" &&
    test $(count_of s1 alpha) = 0 &&
    test_must_fail grep -q "spawn: started s1@beta" beta.log &&
    test ! -e beta/agents/s1@beta
'

test_expect_success 'once the first has expired, requests are judged again' '
    wait_for 60 "request r5 gamma --profile worker --name r5 && sleep 1 && test \$(count_of r5) = 1" &&
    detail_of r5 | grep -q "requester not in spawn_from"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet beta
'

test_done
