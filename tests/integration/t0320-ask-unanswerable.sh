#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An ask nobody can answer ends at once (issue 43 item 4): beta does not
# trust alpha's key, so beta's mount rejects alpha's question unread and
# the broker dead-letters it home to alpha. `fleetfs ask --timeout 60s`
# ends as soon as that dead letter is home, long before the 60 s, with
# exit 5 and words saying beta refused the question and why (on 8dc6d57
# it waited the whole 60 s and exited 4, "expired"); alpha's sent entry
# says dead-lettered, "rejected by the reader of lead.beta.inbox" (read
# from the file, not the tool). fleet_ask through the official MCP SDK
# client the same: an error saying so, well within its timeout. An ask to
# an agent nobody runs is exit 3, nothing sent.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
. "$FLEET_ROOT/tests/mcp.sh"

# sent_of MOUNT MSGID KEY: KEY of that entry in MOUNT's lead sent
sent_of() { jq -r "select(.msgId == \"$2\") | .$3 // empty" "$1/leads/$1/sent"; }
# ask_bg OUT ARGS...: fleetfs ask in the background; OUT.rc its status when done
ask_bg() {
    local out=$1
    shift
    { { "$FLEETFS" ask "$@" >"$out" 2>"$out.err"; echo $? >"$out.rc"; } & }
}

test_expect_success 'the official MCP SDK client is installed into build/' '
    mcp_sdk_install
'

test_expect_success 'alpha and gamma mounted; beta trusts gamma, not alpha' '
    mount_fleet alpha peers=beta:gamma inject=none &&
    mount_fleet gamma peers=beta inject=none &&
    fleet_key beta && mkdir -p trust.beta && cp "$TEST_DIR/trust/gamma.pub" "$TEST_DIR/trust/beta.pub" trust.beta/ &&
    mount_fleet beta peers=alpha:gamma inject=none key="$TEST_DIR/keys/beta.key" \
        trusted_keys="$TEST_DIR/trust.beta" &&
    wait_for 10 "grep -qx \"dead_letters: ok\" alpha/status"
'

test_expect_success 'fleetfs ask to a receiver that rejects it unread: exit 5 at once, the dead letter named' '
    ask_bg a1 "$TEST_DIR/alpha" --timeout 60s beta "do you trust me?" &&
    wait_for 30 "test -s a1.rc" &&
    test "$(cat a1.rc)" = 5 && test ! -s a1 &&
    grep -q "beta refused the question" a1.err &&
    grep -q "rejected by the reader of lead.beta.inbox" a1.err &&
    q=$(last_sent_id alpha) &&
    test "$(sent_of alpha $q state)" = dead-lettered &&
    sent_of alpha $q detail | grep -q "^rejected by the reader of lead.beta.inbox" &&
    grep -q "unknown-key" beta.log && ! grep -q "do you trust me" beta/leads/beta/inbox
'

test_expect_success 'the same ask from gamma (trusted) is answered: the refusal was alpha'"'"'s key' '
    ask_bg g1 "$TEST_DIR/gamma" --timeout 60s beta "and me?" &&
    wait_for 15 "jq -e \"select(.body == \\\"and me?\\\")\" beta/leads/beta/inbox" &&
    q=$(jq -r "select(.body == \"and me?\") | .msgId" beta/leads/beta/inbox) &&
    echo "yes" >beta/peers/gamma/reply/$q &&
    wait_for 15 "test -s g1.rc" && test "$(cat g1.rc)" = 0 && echo yes >want && test_cmp want g1
'

test_expect_success 'fleet_ask the same: an error naming the dead letter, well before its timeout' '
    call alpha fleet_ask "{\"to\":\"beta\",\"body\":\"mcp, trust me?\",\"timeout\":50}" >m1 &&
    jq -e ".isError == true" m1 &&
    jq -r .text m1 | grep -q "beta refused the question" &&
    jq -r .text m1 | grep -q "rejected by the reader of lead.beta.inbox" &&
    q=$(last_sent_id alpha) && test "$(sent_of alpha $q state)" = dead-lettered
'

test_expect_success 'an ask to an agent nobody runs: exit 3, nothing sent' '
    n=$(wc -l <alpha/leads/alpha/sent) &&
    { "$FLEETFS" ask "$TEST_DIR/alpha" w9@beta "anyone?" 2>e3; test $? = 3; } &&
    grep -q "no such peer or agent: w9@beta" e3 &&
    test "$(wc -l <alpha/leads/alpha/sent)" = "$n"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
