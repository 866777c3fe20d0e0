#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Agents as claim holders (doc/claims.md, "Agents as holders"): a local
# agent takes a claim through its own home (agents/<gid>/claims/NAME, and
# `fleetfs mcp --as <gid>`'s fleet_claim), the broker's record names the
# agent and its host; the rule of who releases what (the agent its own,
# the lead any of its host's, nobody else); and an agent whose claim is
# lost (the broker closes the claims connection) or released by the lead
# is told by one message from the lead in its inbox. What the broker holds
# is read by tests/tools/claimpeek; what the agent was told is counted in
# its inbox file, read by this script.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1106
new_vhost $FLEET_VHOST
. "$FLEET_ROOT/tests/mcp.sh"
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
[[ $FLEETFS_BUILD == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek
URI=$(broker_uri $FLEET_VHOST)
peek() { "$PEEK" "$URI" "$1"; }
W1=alpha/agents/w1@alpha
W2=alpha/agents/w2@alpha
# the pid of the claims connection of mount $1 (its connection_name, as
# rabbitmqctl prints client_properties)
claims_conn() {
  rmqctl list_connections -q pid client_properties | grep -E "fleetfs $1@[^ \"]* claims" | cut -f1
}
# messages in inbox $1 whose body mentions $2
told() { grep -c -- "$2" "$1" || true; }

test_expect_success 'alpha (a lead with agents w1 and w2) and beta; the agents have claims/ in their homes' '
    mcp_sdk_install &&
    mount_fleet alpha peers=beta inject=none agents=w1:w2 &&
    mount_fleet beta peers=alpha inject=none &&
    test -d $W1/claims && ls $W1 | grep -qx claims &&
    wait_for 10 "grep -q \"claims: connected\" beta.log"
'

test_expect_success 'w1 takes deploy through its home: the broker records agent w1@alpha of host alpha' '
    wait_for 10 "mkdir $W1/claims/deploy 2>/dev/null" &&
    peek deploy >p && grep -qx "consumers 1 tokens 1 max 1 holder alpha agent w1@alpha" p &&
    jq -e ".agent == \"w1@alpha\" and .holder == \"alpha\" and .mine == true and .token == 1" \
        $W1/claims/deploy/holder &&
    jq -e ".agent == \"w1@alpha\" and .mine == true" alpha/claims/deploy/holder &&
    jq -e ".agent == \"w1@alpha\" and .mine == false" $W2/claims/deploy/holder &&
    wait_for 10 "jq -e \".agent == \\\"w1@alpha\\\" and .mine == false\" beta/claims/deploy/holder"
'

test_expect_success 'the rule: w2 and beta can neither release nor note it (EPERM), nor take it (EEXIST); w1 notes it' '
    test_must_fail rmdir $W2/claims/deploy 2>err && grep -q "Operation not permitted" err &&
    test_must_fail bash -c "echo mine >$W2/claims/deploy/note" 2>err &&
    grep -q "Operation not permitted" err &&
    test_must_fail mkdir $W2/claims/deploy 2>err && grep -q "File exists" err &&
    test_must_fail rmdir beta/claims/deploy 2>err && grep -q "Operation not permitted" err &&
    echo "w1 deploys" >$W1/claims/deploy/note &&
    jq -e ".note == \"w1 deploys\"" alpha/claims/deploy/holder &&
    peek deploy | grep -qx "consumers 1 tokens 1 max 1 holder alpha agent w1@alpha"
'

test_expect_success 'the lead releases w1'"'"'s claim: freed on the broker, w1 told once by a message from the lead, w2 told nothing' '
    rmdir alpha/claims/deploy &&
    peek deploy | grep -q "^consumers 0 " &&
    wait_for 10 "test \$(told $W1/inbox \"claim deploy (token 1) is no longer yours\") = 1" &&
    grep "claim deploy (token 1)" $W1/inbox | jq -e ".from == \"alpha\"" &&
    grep "claim deploy" $W1/inbox | grep -q "the lead alpha released it" &&
    test_must_fail test -d $W1/claims/deploy &&
    test "$(told $W2/inbox "claim deploy")" = 0 &&
    test "$(told alpha/leads/alpha/inbox "claim deploy")" = 0
'

test_expect_success 'fleet_claim through fleetfs mcp --as w1@alpha: the record names the agent; fleet_claims says mine' '
    MCP_AS=w1@alpha call alpha fleet_claim "{\"name\":\"build\",\"note\":\"nightly\"}" >r &&
    jq -e ".isError == false" r &&
    jq -r .text r | jq -e ".agent == \"w1@alpha\" and .token == 1 and .mine == true" &&
    peek build | grep -qx "consumers 1 tokens 1 max 1 holder alpha agent w1@alpha" &&
    MCP_AS=w1@alpha call alpha fleet_claims "{}" >r &&
    jq -r .text r | jq -e "any(.claims[]; .name == \"build\" and .mine and .agent == \"w1@alpha\")" &&
    MCP_AS=w2@alpha call alpha fleet_release "{\"name\":\"build\"}" >r &&
    jq -e ".isError == true" r && jq -r .text r | grep -q "not yours" &&
    peek build | grep -q "^consumers 1 "
'

test_expect_success 'fleetfs claim --as w2@alpha takes ship for w2: the broker records the agent' '
    "$FLEETFS" claim "$TEST_DIR/alpha" ship --as w2@alpha >tok && echo 1 >want && test_cmp want tok &&
    peek ship | grep -qx "consumers 1 tokens 1 max 1 holder alpha agent w2@alpha" &&
    rc=0 && { "$FLEETFS" claim "$TEST_DIR/alpha" ship --as W2 2>err || rc=$?; } &&
    test "$rc" = 2 && grep -q "not an agent" err &&
    rmdir $W2/claims/ship && peek ship | grep -q "^consumers 0 "
'

test_expect_success 'the broker closes alpha'"'"'s claims connection: alpha logs the loss, w1 is told once in its inbox' '
    pid=$(claims_conn alpha) &&
    test -n "$pid" &&
    rmqctl close_connection "$pid" "t1106 closes it" &&
    wait_for 15 "grep -q \"claims: lost claim build (token 1, taken by w1@alpha)\" alpha.log" &&
    wait_for 10 "test \$(told $W1/inbox \"claim build (token 1) is no longer yours\") = 1" &&
    grep "claim build" $W1/inbox | grep -q "t1106 closes it" &&
    test_must_fail test -d $W1/claims/build &&
    test "$(told $W2/inbox "claim build")" = 0 &&
    MCP_AS=w1@alpha call alpha fleet_inbox "{}" >r &&
    jq -r .text r | jq -e "[.messages[] | select(.body | contains(\"claim build (token 1)\"))] | length == 1"
'

test_expect_success 'beta takes build after the loss: token 2, no agent' '
    wait_for 20 "mkdir beta/claims/build 2>/dev/null" &&
    peek build | grep -qx "consumers 1 tokens 1 max 2 holder beta" &&
    jq -e ".agent == null and .holder == \"beta\"" beta/claims/build/holder
'

test_done
