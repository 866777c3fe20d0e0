#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `fleetfs mcp` and agents (SPEC sections 10 and 12), driven by the
# official MCP TypeScript SDK client: the lead's server sends to an agent
# by gid and to a group; a local agent's own server (`--as <gid>`) reads
# that agent's inbox, acks, replies and sends to a group as itself;
# fleet_list shows agents and groups; --as of an agent that is not local
# is refused at start. What arrived is counted from the receivers' inbox
# files, read by this script, never from what the server says.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0942
new_vhost $FLEET_VHOST
. "$FLEET_ROOT/tests/mcp.sh"

# lines of a JSON Lines file whose FIELD is VALUE
count() { jq -c --arg v "$3" "select(.$2 == \$v)" "$1" | grep -c . || true; }
W1=beta/agents/w1@beta

test_expect_success 'the SDK client; alpha (a lead) and beta (a lead and its agent w1)' '
    mcp_sdk_install &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=none agents=w1 &&
    test -e $W1/inbox &&
    wait_for 15 "test -d alpha/agents/w1@beta"
'

test_expect_success 'the lead sends to w1@beta by gid: one message in w1'"'"'s inbox, from alpha' '
    call alpha fleet_send "{\"to\":\"w1@beta\",\"body\":\"take the parser\"}" >r &&
    jq -e ".isError == false" r &&
    id=$(jq -r .text r | jq -r .msgId) && echo $id >q.id &&
    wait_for 10 "grep -q $id $W1/inbox" &&
    test "$(count $W1/inbox body "take the parser")" = 1 &&
    grep $id $W1/inbox | jq -e ".from == \"alpha\"" &&
    ! grep -q "take the parser" beta/leads/beta/inbox &&
    grep $id alpha/leads/alpha/sent | jq -e ".to == \"w1@beta\""
'

test_expect_success 'the lead sends to group:all: one copy for w1, one for beta'"'"'s lead' '
    call alpha fleet_send "{\"to\":\"group:all\",\"body\":\"freeze main\"}" >r &&
    jq -e ".isError == false" r &&
    wait_for 10 "grep -q \"freeze main\" $W1/inbox && grep -q \"freeze main\" beta/leads/beta/inbox" &&
    test "$(count $W1/inbox body "freeze main")" = 1 &&
    test "$(count beta/leads/beta/inbox body "freeze main")" = 1 &&
    grep "freeze main" $W1/inbox | jq -e ".to == \"group:all\"" &&
    test "$(count alpha/leads/alpha/sent to group:all)" = 1
'

test_expect_success 'fleet_list shows the agent (remote for alpha, local for beta) and the groups' '
    call alpha fleet_list "{}" >r &&
    jq -e ".isError == false" r &&
    jq -r .text r >list.json &&
    jq -e "any(.agents[]; .gid == \"w1@beta\" and .host == \"beta\" and .local == false and
        (.presence | startswith(\"live\")) and (.agent_state | type) == \"string\" and
        .groups == [\"all\"])" list.json &&
    jq -e "any(.groups[]; .group == \"all\" and .to == \"group:all\")" list.json &&
    jq -e "any(.leads[]; .coord_id == \"beta\")" list.json &&
    MCP_AS=w1@beta call beta fleet_list "{}" >r &&
    jq -r .text r >blist.json &&
    jq -e ".me == \"w1@beta\"" blist.json &&
    jq -e "any(.agents[]; .gid == \"w1@beta\" and .local == true and .self == true and
        .presence == \"here\")" blist.json &&
    jq -e "any(.groups[]; .group == \"all\" and (.members | index(\"w1@beta\")))" blist.json
'

test_expect_success 'fleet_status of an agent by gid; of an unknown agent: ENOENT in words' '
    mcp alpha call fleet_status "{\"peer\":\"w1@beta\"}" fleet_status "{\"peer\":\"w9@beta\"}" >r &&
    sed -n 1p r | jq -e ".isError == false" &&
    sed -n 1p r | jq -r .text | grep "^host: beta" &&
    sed -n 2p r | jq -e ".isError == true" &&
    sed -n 2p r | jq -r .text | grep "no such agent .w9@beta. known here (ENOENT)"
'

test_expect_success '--as w1@beta: fleet_inbox is w1'"'"'s inbox, fleet_status its own' '
    id=$(cat q.id) &&
    MCP_AS=w1@beta mcp beta call fleet_inbox "{}" fleet_status "{}" >r &&
    sed -n 1p r | jq -e ".isError == false" &&
    sed -n 1p r | jq -r .text >inbox.json &&
    jq -e ".me == \"w1@beta\" and .count == 2" inbox.json &&
    jq -e "any(.messages[]; .msgId == \"$id\" and .from == \"alpha\")" inbox.json &&
    sed -n 2p r | jq -e ".isError == false" &&
    sed -n 2p r | jq -r .text | grep "agents/w1@beta/status" &&
    sed -n 2p r | jq -r .text | grep "^agent: w1@beta"
'

test_expect_success '--as w1@beta replies as itself: alpha gets it from w1@beta, replyTo set' '
    id=$(cat q.id) &&
    MCP_AS=w1@beta call beta fleet_send "{\"to\":\"alpha\",\"body\":\"parser is mine\",\"replyTo\":\"$id\"}" >r &&
    jq -e ".isError == false" r &&
    wait_for 10 "grep -q \"parser is mine\" alpha/leads/alpha/inbox" &&
    test "$(count alpha/leads/alpha/inbox body "parser is mine")" = 1 &&
    grep "parser is mine" alpha/leads/alpha/inbox | jq -e ".from == \"w1@beta\" and .replyTo == \"$id\"" &&
    grep "parser is mine" $W1/sent | jq -e ".to == \"alpha\"" &&
    ! grep -q "parser is mine" beta/leads/beta/sent
'

test_expect_success 'a reply to the wrong sender is refused before anything is sent' '
    id=$(cat q.id) &&
    before=$(grep -c . $W1/sent) &&
    MCP_AS=w1@beta call beta fleet_send "{\"to\":\"beta\",\"body\":\"misrouted\",\"replyTo\":\"$id\"}" >r &&
    jq -e ".isError == true" r &&
    jq -r .text r | grep "is from alpha, not from beta" &&
    test "$(grep -c . $W1/sent)" = $before
'

test_expect_success '--as w1@beta acks: the message leaves w1'"'"'s inbox; alpha'"'"'s sent says acked' '
    id=$(cat q.id) &&
    MCP_AS=w1@beta call beta fleet_ack "{\"msgIds\":[\"$id\"]}" >r &&
    jq -e ".isError == false" r &&
    ! grep -q $id $W1/inbox &&
    grep $id $W1/history | jq -e ".consumed == \"acked\"" &&
    wait_for 15 "grep $id alpha/leads/alpha/sent | jq -e \".state == \\\"acked\\\"\""
'

test_expect_success '--as w1@beta sends to group:all: alpha gets one copy from w1@beta' '
    MCP_AS=w1@beta call beta fleet_send "{\"to\":\"group:all\",\"body\":\"parser merged\"}" >r &&
    jq -e ".isError == false" r &&
    wait_for 10 "grep -q \"parser merged\" alpha/leads/alpha/inbox" &&
    test "$(count alpha/leads/alpha/inbox body "parser merged")" = 1 &&
    grep "parser merged" alpha/leads/alpha/inbox | jq -e ".from == \"w1@beta\" and .to == \"group:all\"" &&
    MCP_AS=w1@beta call beta fleet_sent "{}" >r &&
    jq -r .text r | jq -e "any(.messages[]; .to == \"group:all\")" &&
    test "$(count $W1/sent to group:all)" = 1
'

test_expect_success 'the lead answers w1@beta'"'"'s message through its own reply path' '
    rid=$(jq -r "select(.body == \"parser is mine\") | .msgId" alpha/leads/alpha/inbox) &&
    call alpha fleet_send "{\"to\":\"w1@beta\",\"body\":\"thanks\",\"replyTo\":\"$rid\"}" >r &&
    jq -e ".isError == false" r &&
    wait_for 10 "grep -q thanks $W1/inbox" &&
    test "$(count $W1/inbox body thanks)" = 1 &&
    grep thanks $W1/inbox | jq -e ".from == \"alpha\" and .replyTo == \"$rid\""
'

test_expect_success '--as w1@beta to an agent no host serves: ENXIO in words, nothing in sent' '
    before=$(grep -c . $W1/sent) &&
    MCP_AS=w1@beta call beta fleet_send "{\"to\":\"w9@alpha\",\"body\":\"anyone?\"}" >r &&
    jq -e ".isError == true" r &&
    jq -r .text r | grep "agent w9@alpha.s mailbox does not exist.*(ENXIO)" &&
    test "$(grep -c . $W1/sent)" = $before
'

test_expect_success '--as of an agent that is not local to the mount is refused at start' '
    test_must_fail "$FLEETFS" mcp "$TEST_DIR/alpha" --as w1@beta </dev/null >o 2>e &&
    grep "w1@beta is not a local agent of the mount" e &&
    test_must_fail "$FLEETFS" mcp "$TEST_DIR/beta" --as w2@beta </dev/null >o 2>e &&
    grep "w2@beta is not a local agent" e &&
    test_must_fail "$FLEETFS" mcp "$TEST_DIR/beta" --as W1 </dev/null >o 2>e &&
    grep "not an agent.s gid" e &&
    test ! -s o
'

# the server of w2 outlives w2: retired (rmdir) under it, a send says so,
# not "no such peer" of the address it was sent to
test_expect_success 'a retired --as agent'"'"'s send says it was retired, not "no such peer"; nothing sent' '
    mkdir beta/agents/w2@beta &&
    wait_for 10 "test -e beta/agents/w2@beta/inbox" &&
    MCP_AS=w2@beta sess_start beta &&
    sess_call fleet_send "{\"to\":\"alpha\",\"body\":\"w2 before\"}" >r1 &&
    jq -e ".isError == false" r1 &&
    wait_for 10 "grep -q \"w2 before\" alpha/leads/alpha/inbox" &&
    rmdir beta/agents/w2@beta &&
    sess_call fleet_send "{\"to\":\"alpha\",\"body\":\"w2 after\"}" >r2 &&
    jq -e ".isError == true" r2 &&
    jq -r .text r2 | grep "you, w2@beta, are no longer a local agent" &&
    ! jq -r .text r2 | grep "no such peer" &&
    sess_end &&
    echo "to w1 after w2" >alpha/agents/w1@beta/send &&
    test_absent 10 "grep -q \"to w1 after w2\" $W1/inbox" \
        "grep -q \"w2 after\" alpha/leads/alpha/inbox"
'

test_done
