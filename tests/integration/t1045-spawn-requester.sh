#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The requester's side of the control plane (SPEC section 11), through real
# mounts on one machine: hosts/ and hosts/<h>/status (presence, profiles
# from the heartbeat, agents), every error a write to hosts/<h>/spawn or
# stop gives (nothing published: the broker's own count of control.<h>),
# a request confirmed into control.<h> as the signed envelope it should be,
# and what hosts/<h>/spawns says: requested, an answer injected as gamma's
# signed `spawned` on lead.alpha.receipts (believed once, from the host
# asked only, about a request sent only), and failed by expiry when nobody
# answers. gamma is a host whose control queue exists (fleetfs declare) but
# that no fleetfs serves, so nothing but this test answers for it; epsilon
# is configured but has no control queue at all.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1045
new_vhost $FLEET_VHOST
URI=$(broker_uri $FLEET_VHOST)
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub

# count QUEUE: messages in QUEUE per rabbitmqctl ("" when there is none)
count() { broker_count "$1"; }
# spawns FILE FIELD: that field of every line
field() { jq -r ".$2" "$1"; }
# answer KEYHOST REQUESTID STATE [ARGS]: a signed spawned from KEYHOST to
# alpha, living a minute
answer() {
    local k=$1 rid=$2 st=$3
    shift 3
    "$RAWPUB" "$URI" lead.alpha.receipts --sign "$TEST_DIR/keys/$k.key" --from "$k" --to alpha \
        --expires-in 60 --answer "$rid" "$st" "$@" >/dev/null
}
# put FILE TEXT: one write of TEXT to FILE (a subshell: test_must_fail-able)
put() { bash -c 'printf %s "$2" >"$1"' _ "$1" "$2"; }

test_expect_success 'gamma has a control queue (fleetfs declare), alpha, beta and delta mount' '
    FLEET_BROKER_URI=$URI "$FLEETFS" declare gamma >declare.out &&
    fleet_key gamma &&
    test "$(count control.gamma)" = 0 &&
    printf "[profile worker]\nkind = claude\n[profile reviewer]\nkind = claude\n" >beta.conf &&
    mount_fleet alpha peers=beta:gamma:epsilon heartbeat=1s inject=none &&
    (timeout 30 inotifywait -e create alpha/hosts >hosts.ev 2>hosts.err &) &&
    wait_for 5 "grep -q \"Watches established\" hosts.err" &&
    mount_fleet beta config="$TEST_DIR/beta.conf" heartbeat=1s inject=auto agents=w2 &&
    mount_fleet delta peers=gamma heartbeat=1s inject=none spawn_ttl=1s spawn_grace=1s &&
    wait_for 20 "grep -q \"^profiles: reviewer worker$\" alpha/hosts/beta/status 2>/dev/null"
'

test_expect_success 'hosts/ lists this host, the configured ones and those heard (a new one wakes inotifywait); each has its four files' '
    wait_for 10 "ls alpha/hosts | grep -qx delta" &&
    wait_for 5 "grep -q \"CREATE,ISDIR delta\" hosts.ev" &&
    ls alpha/hosts >got && printf "alpha\nbeta\ndelta\nepsilon\ngamma\n" >want && test_cmp want got &&
    ls alpha/hosts/gamma >got && printf "spawn\nspawns\nstatus\nstop\n" >want && test_cmp want got &&
    ls alpha | grep -qx hosts &&
    test_must_fail ls alpha/hosts/nosuch 2>err && grep -q "No such file" err &&
    test ! -s alpha/hosts/gamma/spawns
'

test_expect_success 'hosts/<h>/status: live or not, last heartbeat, profiles, agents' '
    cat alpha/hosts/beta/status >st &&
    grep -q "^host: beta$" st && grep -q "^self: no$" st &&
    grep -q "^presence: live" st &&
    grep -q "^last_heartbeat: 20[0-9-]*T" st &&
    wait_for 10 "grep -q \"^agents: w2@beta$\" alpha/hosts/beta/status" &&
    cat alpha/hosts/alpha/status >st &&
    grep -q "^self: yes$" st && grep -q "^profiles: none$" st && grep -q "^agents: none$" st &&
    cat alpha/hosts/gamma/status >st &&
    grep -q "^presence: never$" st && grep -q "^last_heartbeat: never$" st &&
    grep -q "^profiles: unknown" st &&
    grep -q "^profiles: none$" alpha/hosts/delta/status
'

test_expect_success 'every bad spawn is EINVAL, nothing published, nothing listed' '
    for bad in " " "not json" "[1]" "{\"profile\":\"worker\"}" \
        "{\"profile\":\"worker\",\"name\":\"w1\",\"command\":\"/bin/sh\"}" \
        "{\"profile\":\"worker\",\"name\":\"W1\"}" \
        "{\"profile\":\"../x\",\"name\":\"w1\"}" \
        "{\"profile\":\"worker\",\"name\":\"w1\",\"brief\":7}" \
        "{\"profile\":\"worker\",\"name\":\"w1\",\"dir\":\"\"}" \
        "{\"profile\":\"worker\",\"name\":\"w1\",\"name\":\"w2\"}" \
        "{\"profile\":\"worker\",\"name\":\"a123456789012345678901234567890123\"}" \
        "{\"profile\":\"worker\",\"name\":\"w1\"} {}"; do
        test_must_fail put alpha/hosts/gamma/spawn "$bad" 2>err &&
        grep -q "Invalid argument" err || { echo "accepted: $bad"; exit 1; }
    done &&
    for bad in " " "w1" "w1@beta" "W1@gamma" "w1@gamma@gamma" "w1@gamma/x"; do
        test_must_fail put alpha/hosts/gamma/stop "$bad" 2>err &&
        grep -q "Invalid argument" err || { echo "accepted stop: $bad"; exit 1; }
    done &&
    test "$(count control.gamma)" = 0 &&
    test ! -s alpha/hosts/gamma/spawns &&
    grep -q "hosts/gamma/spawn: refused, nothing sent: unknown key .command." alpha.log
'

test_expect_success 'a host with no control queue: ENXIO, and spawns says it was not sent' '
    test_must_fail put alpha/hosts/epsilon/spawn "{\"profile\":\"worker\",\"name\":\"w1\"}" 2>err &&
    grep -q "No such device or address" err &&
    test "$(field alpha/hosts/epsilon/spawns state)" = failed &&
    field alpha/hosts/epsilon/spawns detail | grep -q "^not sent: no control queue"
'

test_expect_success 'a good spawn returns once control.gamma holds it: signed, from alpha, only the four fields' '
    printf "{\"profile\":\"worker\",\"name\":\"w1\",\"dir\":\"repo\",\"brief\":\"fix the build\\\\nthen report\"}" >alpha/hosts/gamma/spawn &&
    test "$(count control.gamma)" = 1 &&
    "$RAWPUB" "$URI" control.gamma --get-requeue >req &&
    jq -e "(keys | sort) == [\"brief\",\"dir\",\"expiresAt\",\"from\",\"msgId\",\"name\",\"profile\",\"sentAt\",\"sig\",\"to\",\"type\",\"v\"]" req >/dev/null &&
    jq -e ".type == \"spawn\" and .from == \"alpha\" and .to == \"gamma\" and .profile == \"worker\" and .name == \"w1\" and .dir == \"repo\" and .brief == \"fix the build\\nthen report\"" req >/dev/null &&
    rid=$(jq -r .msgId req) && echo "$rid" >rid1 &&
    test "$(jq -c "[.requestId, .request, .profile, .name, .state]" alpha/hosts/gamma/spawns)" = "[\"$rid\",\"spawn\",\"worker\",\"w1\",\"requested\"]"
'

test_expect_success 'gamma answers ready: spawns says so (inotify wakes a watcher), with the gid' '
    (timeout 10 inotifywait -e modify alpha/hosts/gamma/spawns >ev 2>ev.err &) &&
    wait_for 5 "grep -q \"Watches established\" ev.err" &&
    answer gamma "$(cat rid1)" ready --gid w1@gamma --detail "ready in tmux pane %3" &&
    wait_for 10 "test \"\$(field alpha/hosts/gamma/spawns state)\" = ready" &&
    wait_for 3 "grep -q MODIFY ev" &&
    test "$(field alpha/hosts/gamma/spawns gid)" = w1@gamma &&
    test "$(field alpha/hosts/gamma/spawns detail)" = "ready in tmux pane %3"
'

test_expect_success 'a second answer, an answer from the wrong host and one to nothing asked change nothing' '
    cp alpha/hosts/gamma/spawns before &&
    answer gamma "$(cat rid1)" failed --detail "late" &&
    echo "{\"profile\":\"worker\",\"name\":\"w3\"}" >alpha/hosts/gamma/spawn &&
    rid2=$(jq -r "select(.name == \"w3\") | .requestId" alpha/hosts/gamma/spawns) &&
    answer beta "$rid2" ready --gid w3@beta &&
    answer gamma 0123456789abcdef0123456789abcdef ready &&
    wait_for 10 "grep -q \"sent to gamma\" alpha.log" &&
    wait_for 10 "grep -q \"which this host did not send\" alpha.log" &&
    wait_for 10 "grep -q \"is ready already\" alpha.log" &&
    head -1 alpha/hosts/gamma/spawns >first && test_cmp before first &&
    test "$(jq -r "select(.name == \"w3\") | .state" alpha/hosts/gamma/spawns)" = requested &&
    test ! -s alpha/hosts/beta/spawns
'

test_expect_success 'an answer that is not signed by its host, or replayed, goes to fleet.dlq and changes nothing' '
    rid2=$(jq -r "select(.name == \"w3\") | .requestId" alpha/hosts/gamma/spawns) &&
    "$RAWPUB" "$URI" lead.alpha.receipts --sign "$TEST_DIR/keys/beta.key" --from gamma --to alpha \
        --expires-in 60 --answer "$rid2" ready >/dev/null &&
    "$RAWPUB" "$URI" lead.alpha.receipts --sign "$TEST_DIR/keys/gamma.key" --from gamma --to alpha \
        --expires-in 60 --answer "$rid2" ready --tamper >/dev/null &&
    wait_for 10 "test \$(grep -c \"control: rejected a ready answer from gamma\" alpha.log) = 2" &&
    test "$(jq -r "select(.name == \"w3\") | .state" alpha/hosts/gamma/spawns)" = requested &&
    "$RAWPUB" "$URI" lead.alpha.receipts --sign "$TEST_DIR/keys/gamma.key" --from gamma --to alpha \
        --expires-in 60 --answer "$rid2" refused --detail "profile worker is not offered here" --msgid 00000000000000000000000000000045 >/dev/null &&
    wait_for 10 "test \"\$(jq -r \"select(.name == \\\"w3\\\") | .state\" alpha/hosts/gamma/spawns)\" = refused" &&
    "$RAWPUB" "$URI" lead.alpha.receipts --sign "$TEST_DIR/keys/gamma.key" --from gamma --to alpha \
        --expires-in 60 --answer "$rid2" ready --msgid 00000000000000000000000000000045 >/dev/null &&
    wait_for 10 "grep -q \"replayed-receipt: answer msgId 00000000000000000000000000000045\" alpha.log" &&
    test "$(jq -r "select(.name == \"w3\") | .state" alpha/hosts/gamma/spawns)" = refused &&
    test "$(jq -r "select(.name == \"w3\") | .detail" alpha/hosts/gamma/spawns)" = "profile worker is not offered here"
'

test_expect_success 'stop: one signed request with the gid, listed as a stop' '
    n=$(count control.gamma) &&
    echo w1@gamma >alpha/hosts/gamma/stop &&
    test "$(count control.gamma)" = $((n + 1)) &&
    test "$(jq -c "select(.request == \"stop\") | [.gid, .name, .state]" alpha/hosts/gamma/spawns)" = "[\"w1@gamma\",\"w1\",\"requested\"]"
'

test_expect_success 'nobody answers: failed once spawn_ttl and spawn_grace have passed (delta: 1s and 1s)' '
    echo "{\"profile\":\"worker\",\"name\":\"w9\"}" >delta/hosts/gamma/spawn &&
    test "$(field delta/hosts/gamma/spawns state)" = requested &&
    wait_for 20 "test \"\$(field delta/hosts/gamma/spawns state)\" = failed" &&
    field delta/hosts/gamma/spawns detail | grep -q "no answer from the host"
'

test_expect_success 'the book outlives a remount: spawns reads the same' '
    cat alpha/hosts/gamma/spawns >before &&
    unmount_fleet alpha &&
    mount_fleet alpha peers=beta:gamma:epsilon heartbeat=1s inject=none &&
    test_cmp before alpha/hosts/gamma/spawns
'

test_expect_success 'an insecure mount cannot ask anything (EPERM): the control plane is never unsigned' '
    n=$(count control.gamma) &&
    mount_fleet zeta insecure peers=gamma inject=none &&
    test_must_fail put zeta/hosts/gamma/spawn "{\"profile\":\"worker\",\"name\":\"w1\"}" 2>err &&
    grep -q "Operation not permitted" err &&
    test "$(count control.gamma)" = "$n" &&
    unmount_fleet zeta
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet delta
'

test_done
