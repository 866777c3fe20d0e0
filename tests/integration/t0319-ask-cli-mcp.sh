#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Asking from the command line and from an agent's MCP tools (issue 36
# item 4): `fleetfs ask [MOUNTPOINT] PEER TEXT` prints the answer, its exit
# status says the fate (0 answered, 3 no such peer, 4 no answer in time,
# 5 refused, 6 unknown); fleet_ask through the official MCP SDK client
# returns the answer, bounded by its timeout; fleet_send's expiresIn is
# send.json's (the lead's and an agent's server).  What happened is read
# from beta's inbox and alpha's files and the broker, not from the tools.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
. "$FLEET_ROOT/tests/mcp.sh"

# code_of CMD...: its exit status (its stderr in ./err)
code_of() { "$@" >/dev/null 2>err; echo $?; }
id_of() { jq -r --arg b "$2" 'select(.body == $b) | .msgId' "$1"; }
question_at() {
    wait_for 15 "test -n \"\$(id_of $1/leads/$1/inbox \"$2\")\"" && id_of "$1/leads/$1/inbox" "$2"
}
# life MOUNT BODY: expiresAt - sentAt of that message in MOUNT's inbox, in seconds
life() {
    jq -r --arg b "$2" 'select(.body == $b) | ((.expiresAt | sub("\\.[0-9]+Z$"; "Z") | fromdate) - (.sentAt | sub("\\.[0-9]+Z$"; "Z") | fromdate))' "$1/leads/$1/inbox"
}

test_expect_success 'the official MCP SDK client is installed into build/' '
    mcp_sdk_install
'

test_expect_success 'alpha (agent w1) and beta mount' '
    mount_fleet alpha peers=beta inject=none agents=w1 &&
    mount_fleet beta peers=alpha inject=none
'

test_expect_success 'fleetfs ask: prints the answer, exit 0; the answer never shows in the inbox' '
    { { "$FLEETFS" ask "$TEST_DIR/alpha" beta "which branch?" >ans 2>err; echo $? >rc; } & } &&
    q=$(question_at beta "which branch?") &&
    echo "main, always" >beta/peers/alpha/reply/$q &&
    wait_for 15 "test -s rc" && test "$(cat rc)" = 0 &&
    echo "main, always" >want && test_cmp want ans &&
    ! grep -q "main, always" alpha/leads/alpha/inbox &&
    jq -e "select(.body == \"main, always\") | .consumed == \"acked\"" alpha/leads/alpha/history
'

test_expect_success 'fleetfs ask: no such peer is exit 3, nothing sent' '
    n=$(wc -l <alpha/leads/alpha/sent) &&
    test "$(code_of "$FLEETFS" ask "$TEST_DIR/alpha" gamma "hello?")" = 3 &&
    grep -q "no such peer or agent: gamma" err &&
    test "$(wc -l <alpha/leads/alpha/sent)" = "$n"
'

test_expect_success 'fleetfs ask: no answer within --timeout is exit 4; the question expired' '
    test "$(code_of "$FLEETFS" ask "$TEST_DIR/alpha" --timeout 2s beta "quick one?")" = 4 &&
    grep -q "no answer from beta within the question" err &&
    q=$(last_sent_id alpha) &&
    wait_for 20 "test \"\$(sent_state alpha $q)\" = expired" &&
    ! grep -q "quick one?" beta/leads/beta/inbox
'

test_expect_success 'fleetfs ask: refused (not sent) is exit 5: a lifetime over message_ttl, an empty question' '
    n=$(wc -l <alpha/leads/alpha/sent) &&
    test "$(code_of "$FLEETFS" ask "$TEST_DIR/alpha" --timeout 30d beta "too long")" = 5 &&
    grep -q "not sent: Invalid argument" err &&
    test "$(code_of "$FLEETFS" ask "$TEST_DIR/alpha" beta "")" = 5 &&
    test "$(wc -l <alpha/leads/alpha/sent)" = "$n" &&
    test "$(code_of "$FLEETFS" ask "$TEST_DIR/alpha" group:all "everyone?")" = 2
'

test_expect_success 'fleetfs ask: a question its receiver refuses is exit 5 at once (ECONNREFUSED), not a wait' '
    mount_fleet gamma peers=beta inject=none message_ttl=30d &&
    { { "$FLEETFS" ask "$TEST_DIR/gamma" --timeout 20d beta "a long question?" 2>errg; echo $? >rcg; } & } &&
    wait_for 30 "test -s rcg" && test "$(cat rcg)" = 5 &&
    grep -q "beta refused the question" errg &&
    q=$(last_sent_id gamma) && test "$(sent_state gamma $q)" = rejected &&
    jq -r "select(.msgId == \"$q\") | .detail" gamma/leads/gamma/sent | grep -q "^bad-lifetime" &&
    unmount_fleet gamma
'

test_expect_success 'fleetfs ask: a send whose confirm never comes is exit 6 (unknown)' '
    broker_freeze &&
    { { "$FLEETFS" ask "$TEST_DIR/alpha" beta "in the freeze?" 2>err6; echo $? >rc6; } & } &&
    wait_for 20 "test -s rc6" &&
    broker_thaw &&
    test "$(cat rc6)" = 6 && grep -q "may or may not have been sent" err6 &&
    wait_for 30 "grep -q \"^broker: connected\" alpha/status"
'

test_expect_success 'fleet_ask through the MCP SDK: the answer comes back, never in the inbox' '
    echo all >beta/leads/beta/ack &&
    { mcp alpha call fleet_ask "{\"to\":\"beta\",\"body\":\"mcp question?\",\"timeout\":60}" >m1 & } &&
    q=$(question_at beta "mcp question?") &&
    test "$(life beta "mcp question?")" = 60 &&
    echo "mcp answer" >beta/peers/alpha/reply/$q &&
    wait_for 30 "test -s m1" &&
    jq -e ".isError == false and .structured.answer == \"mcp answer\" and .structured.from == \"beta\"" m1 &&
    ! grep -q "mcp answer" alpha/leads/alpha/inbox
'

test_expect_success 'fleet_ask: no answer within timeout is an error saying it expired; timeout is bounded' '
    call alpha fleet_ask "{\"to\":\"beta\",\"body\":\"nobody home?\",\"timeout\":2}" >m2 &&
    jq -e ".isError == true" m2 && jq -r .text m2 | grep -q "no answer within 2 s: the question expired" &&
    call alpha fleet_ask "{\"to\":\"beta\",\"body\":\"x\",\"timeout\":601}" >m3 &&
    jq -e ".isError == true" m3 &&
    call alpha fleet_ask "{\"to\":\"group:all\",\"body\":\"x\"}" >m4 &&
    jq -e ".isError == true" m4
'

test_expect_success 'fleet_send expiresIn: the message lives that long; nonsense is refused, nothing sent' '
    call alpha fleet_send "{\"to\":\"beta\",\"body\":\"for ninety seconds\",\"expiresIn\":\"90s\"}" >s1 &&
    jq -e ".isError == false" s1 &&
    wait_for 10 "test -n \"\$(id_of beta/leads/beta/inbox \"for ninety seconds\")\"" &&
    test "$(life beta "for ninety seconds")" = 90 &&
    n=$(wc -l <alpha/leads/alpha/sent) &&
    call alpha fleet_send "{\"to\":\"beta\",\"body\":\"x\",\"expiresIn\":\"30d\"}" >s2 &&
    jq -e ".isError == true" s2 && jq -r .text s2 | grep -q "expiresIn was refused" &&
    call alpha fleet_send "{\"to\":\"beta\",\"body\":\"x\",\"expiresIn\":[1]}" >s3 &&
    jq -e ".isError == true" s3 &&
    test "$(wc -l <alpha/leads/alpha/sent)" = "$n"
'

test_expect_success 'fleet_send expiresIn for an agent (--as): through to/<target>.json, replyTo kept' '
    q=$(id_of beta/leads/beta/inbox "for ninety seconds") &&
    MCP_AS=w1@alpha mcp alpha call fleet_send "{\"to\":\"beta\",\"body\":\"from w1, two minutes\",\"expiresIn\":120}" >s4 &&
    jq -e ".isError == false" s4 &&
    wait_for 10 "test -n \"\$(id_of beta/leads/beta/inbox \"from w1, two minutes\")\"" &&
    test "$(life beta "from w1, two minutes")" = 120 &&
    jq -e "select(.body == \"from w1, two minutes\") | .from == \"w1@alpha\"" beta/leads/beta/inbox &&
    call beta fleet_send "{\"to\":\"w1@alpha\",\"body\":\"answering w1\",\"replyTo\":\"$(id_of beta/leads/beta/inbox "from w1, two minutes")\",\"expiresIn\":\"5m\"}" >s6 &&
    jq -e ".isError == false" s6 &&
    wait_for 10 "jq -e \"select(.body == \\\"answering w1\\\") | .replyTo\" alpha/agents/w1@alpha/inbox" &&
    test -n "$q"
'

test_expect_success 'fleet_ask for an agent (--as): w1 asks as itself through to/<to>.ask.json, gets the answer' '
    echo all >beta/leads/beta/ack && echo all >alpha/agents/w1@alpha/ack &&
    { MCP_AS=w1@alpha mcp alpha call fleet_ask "{\"to\":\"beta\",\"body\":\"w1 asks\",\"timeout\":60}" >s7 & } &&
    q=$(question_at beta "w1 asks") &&
    jq -e "select(.msgId == \"$q\") | .from == \"w1@alpha\"" beta/leads/beta/inbox &&
    echo "beta answers w1" >beta/leads/beta/reply/$q &&
    wait_for 30 "test -s s7" &&
    jq -e ".isError == false and .structured.answer == \"beta answers w1\"" s7 &&
    ! grep -q "beta answers w1" alpha/agents/w1@alpha/inbox &&
    jq -e "select(.body == \"beta answers w1\") | .consumed == \"acked\"" alpha/agents/w1@alpha/history &&
    MCP_AS=w1@alpha mcp alpha call fleet_ask "{\"to\":\"w1@alpha\",\"body\":\"me?\"}" >s8 &&
    jq -e ".isError == true" s8
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
