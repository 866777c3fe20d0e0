#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fleet_ask and a client that gives up (issue 43 item 5), through the
# official MCP SDK client: its call timeout (3 s here) makes it send
# notifications/cancelled (MCP 2025-06-18) and end the call. The server
# honours it: the next call, in the same session, is answered while the
# question is still alive (its sent entry not expired: on 8dc6d57 it
# waited out the question's 40 s and the session client gave up); the
# answer that comes later is not lost: it arrives in alpha's inbox as an
# ordinary reply, once. fleet_ask's default wait (no timeout argument) is
# below the SDK's default request timeout of 60 s: the question's
# lifetime, read at beta, is 50 s.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
. "$FLEET_ROOT/tests/mcp.sh"

id_of() { jq -r --arg b "$2" 'select(.body == $b) | .msgId' "$1"; }
field() { jq -r "select(.msgId == \"$1\") | .$2 // empty" alpha/leads/alpha/sent; }
life() {
    jq -r --arg b "$1" 'select(.body == $b) | ((.expiresAt | sub("\\.[0-9]+Z$"; "Z") | fromdate) - (.sentAt | sub("\\.[0-9]+Z$"; "Z") | fromdate))' beta/leads/beta/inbox
}

test_expect_success 'the official MCP SDK client is installed into build/' '
    mcp_sdk_install
'

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=none
'

test_expect_success 'a cancelled fleet_ask: the next call is answered at once; the later answer lands in the inbox' '
    MCP_CALL_TIMEOUT_MS=3000 sess_start alpha &&
    sess_call fleet_ask "{\"to\":\"beta\",\"body\":\"still there?\",\"timeout\":40}" >c1 &&
    jq -e ".rpcError" c1 &&
    q=$(id_of beta/leads/beta/inbox "still there?") && test -n "$q" &&
    sess_call fleet_list "{}" >c2 &&
    jq -e ".isError == false" c2 &&
    test "$(field $q state)" != expired &&
    sess_end &&
    echo "yes, here" >beta/peers/alpha/reply/$q &&
    wait_for 15 "grep -q \"yes, here\" alpha/leads/alpha/inbox" &&
    test "$(grep -c "yes, here" alpha/leads/alpha/inbox)" = 1 &&
    jq -e "select(.body == \"yes, here\") | .replyTo == \"$q\"" alpha/leads/alpha/inbox
'

test_expect_success 'fleet_ask without a timeout: the question lives 50 s, below the SDK default of 60 s' '
    { mcp alpha call fleet_ask "{\"to\":\"beta\",\"body\":\"default wait?\"}" >d1 & } &&
    wait_for 15 "test -n \"\$(id_of beta/leads/beta/inbox \"default wait?\")\"" &&
    test "$(life "default wait?")" = 50 &&
    q=$(id_of beta/leads/beta/inbox "default wait?") &&
    echo "fine" >beta/peers/alpha/reply/$q &&
    wait_for 20 "test -s d1" && jq -e ".structured.answer == \"fine\"" d1
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
