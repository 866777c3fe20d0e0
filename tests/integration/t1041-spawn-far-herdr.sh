#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The far host's side of the control plane through herdr (SPEC section 11,
# issue 17): delta starts agents in the fake herdr (tests/fake_herdr:
# pane.split / tab.create, agent.start, pane.close). The test is the
# requester, as in t1040: ctlsign + rawpub into control.delta, answers read
# from lead.alpha.receipts. Panes are counted in the fake's own state, what
# was typed in its prompt log, what was started in its start log.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_use_shared
FLEET_VHOST=t1041
new_vhost $FLEET_VHOST
URI=$(broker_uri $FLEET_VHOST)

ctl_tools

CTL_FAR=delta
request() { ctl_request "$1" alpha "${@:2}"; }
answer() { ctl_answer "$1"; }
state_of() { answer "$1" | jq -r .state | tail -n1; }
detail_of() { answer "$1" | jq -r .detail | tail -n1; }
hpanes() { jq '.panes | length' "$TEST_DIR/herdr.json"; }
briefs() { jq -r .text "$HERDR_LOG" 2>/dev/null | grep -c "fleet brief from alpha, request $(jq -r .msgId "$1.json")" || true; }

cat >delta.conf <<EOF
[profile worker]
kind = claude
args = --model opus
dir_root = $TEST_DIR/work
max = 2
ready_timeout = 5s
# herdr starts the agent itself: fleetfs cannot confine it (t1051)
sandbox = none

[profile stuck]
kind = codex
ready_timeout = 4s
sandbox = none

[profile confined]
kind = claude
EOF

test_expect_success 'delta offers worker (claude) and stuck (codex) through the fake herdr' '
    mkdir -p work/repo &&
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"panes\":[],\"busy_ms\":300,\"after_prompt_status\":\"working\",\"behaviour\":{\"start:codex\":\"never\"}}" &&
    herdr_start &&
    for h in alpha delta; do
        FLEET_BROKER_URI=$URI "$FLEETFS" declare $h >/dev/null && fleet_key $h || exit 1
    done &&
    mount_fleet delta inject=herdr spawn_from=alpha config=$TEST_DIR/delta.conf &&
    wait_for 10 "grep -q \"consuming control.delta\" delta.log" &&
    test $(hpanes) = 0
'

test_expect_success 'a spawn: split with the dir, agent.start with the profile, ready, brief typed once' '
    request h1 --profile worker --name h1 --dir repo --brief "review the parser" &&
    wait_for 15 "test -n \"\$(state_of h1)\"" &&
    answer h1 &&
    test "$(state_of h1)" = ready &&
    test $(hpanes) = 1 &&
    jq -e ".panes[0].name == \"h1\" and .panes[0].cwd == \"$TEST_DIR/work/repo\"" herdr.json &&
    jq -ce "select(.name == \"h1\") | .kind == \"claude\" and .args == [\"--model\",\"opus\"]" \
        "$HERDR_LOG.starts" &&
    wait_for 10 "test \$(briefs h1) = 1" &&
    jq -r .text "$HERDR_LOG" | grep -q "review the parser" &&
    test "$(jq -r .target "$HERDR_LOG" | head -n1)" = "$(jq -r ".panes[0].pane_id" herdr.json)" &&
    test -d delta/agents/h1@delta
'

test_expect_success 'a message to h1@delta is prompted into its pane after the brief' '
    "$RAWPUB" "$URI" "agent.h1@delta.inbox" --sign "$TEST_DIR/keys/alpha.key" --from alpha \
        --to h1@delta --text "and then the lexer" >/dev/null &&
    wait_for 10 "jq -r .text \"$HERDR_LOG\" | grep -q \"and then the lexer\"" &&
    test $(briefs h1) = 1
'

test_expect_success 'an agent herdr never sees ready: failed with the reason, its pane closed' '
    request h2 --profile stuck --name h2 &&
    wait_for 20 "test -n \"\$(state_of h2)\"" &&
    test "$(state_of h2)" = failed &&
    detail_of h2 | grep -q timeout &&
    grep -q "spawn: h2@delta for alpha (request $(jq -r .msgId h2.json)) failed" delta.log &&
    test $(hpanes) = 1 && test ! -d delta/agents/h2@delta
'

test_expect_success 'a profile left to the default sandbox through herdr: refused with the reason, nothing started' '
    n=$(grep -c . "$HERDR_LOG.starts") &&
    request c1 --profile confined --name c1 &&
    wait_for 15 "test -n \"\$(state_of c1)\"" &&
    test "$(state_of c1)" = refused &&
    detail_of c1 | grep -q "herdr starts the agent itself (agent.start), so this host cannot confine it" &&
    detail_of c1 | grep -q "set sandbox = none in \[profile confined\]" &&
    test $(hpanes) = 1 && test $(grep -c . "$HERDR_LOG.starts") = $n && test ! -d delta/agents/c1@delta
'

test_expect_success 'a replayed request is refused, nothing started again' '
    "$RAWPUB" "$URI" control.delta --body-file h1.json >/dev/null &&
    wait_for 10 "test \"\$(answer h1 | wc -l)\" = 2" &&
    answer h1 | tail -n1 | jq -e ".state == \"refused\"" &&
    test $(hpanes) = 1 && test $(grep -c . "$HERDR_LOG.starts") = 2
'

test_expect_success 'stop: pane.close, the agent retired' '
    request s1 --type stop --gid h1@delta &&
    wait_for 10 "test -n \"\$(state_of s1)\"" &&
    test "$(state_of s1)" = stopped &&
    test $(hpanes) = 0 &&
    wait_for 5 "test ! -d delta/agents/h1@delta"
'

test_expect_success 'stop when the recorded pane id now holds another agent: failed, that pane left open' '
    request h3 --profile worker --name h3 --dir repo &&
    wait_for 15 "test -n \"\$(state_of h3)\"" &&
    test "$(state_of h3)" = ready &&
    test $(hpanes) = 1 &&
    herdr_set ".panes[0].name = \"mine\"" &&
    request s3 --type stop --gid h3@delta &&
    wait_for 10 "test -n \"\$(state_of s3)\"" &&
    test "$(state_of s3)" = failed &&
    detail_of s3 | grep -q "not h3" &&
    test $(hpanes) = 1 &&
    jq -e ".panes[0].name == \"mine\"" herdr.json
'

test_done
