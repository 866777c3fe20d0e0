#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shown, then expired (issue 43 item 3): a message beta's reader was shown
# before its expiresAt — through `cat inbox`, a `tail -f inbox` started
# before it came, or the MCP fleet_inbox tool — and that nobody acked or
# typed is still dropped at its expiresAt, but neither end is told it was
# "dropped unread": alpha's sent entry (the receiver's word, read from the
# file) and beta's history line say "shown, then expired"; history keeps
# the body; an ack of it afterwards fails ENOENT (not held). On 8dc6d57
# each said "dropped unread by beta". The control: a message nobody read
# is still "dropped unread by beta".
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
. "$FLEET_ROOT/tests/mcp.sh"

# field MSGID KEY: KEY of alpha's sent entry MSGID
field() { jq -r "select(.msgId == \"$1\") | .$2 // empty" alpha/leads/alpha/sent; }
# hist MSGID KEY: KEY of beta's history line about MSGID
hist() { jq -r "select(.msgId == \"$1\") | .$2 // empty" beta/leads/beta/history; }
# send4 BODY: alpha sends BODY to beta with a 4 s lifetime; prints its msgId
send4() {
    echo "{\"body\":\"$1\",\"expiresIn\":\"4s\"}" >alpha/peers/beta/send.json && last_sent_id alpha
}
# expired_as MSGID WORDS: alpha's sent says expired by beta's word, detail WORDS
expired_as() {
    test "$(field "$1" state)" = expired && test "$(field "$1" expiredBy)" = receiver &&
        field "$1" detail | grep -q "$2"
}
# shown_then_expired MSGID BODY: both ends say so, history keeps the body
shown_then_expired() {
    wait_for 20 "expired_as $1 \"^shown, then expired\"" &&
        ! field "$1" detail | grep -q "dropped unread" &&
        test "$(hist "$1" consumed)" = expired &&
        hist "$1" detail | grep -q "^shown, then expired" &&
        test "$(hist "$1" body)" = "$2"
}

test_expect_success 'the official MCP SDK client is installed into build/' '
    mcp_sdk_install
'

test_expect_success 'alpha and beta mount (no injector: only readers consume)' '
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=none
'

test_expect_success 'read through cat inbox, then expired: shown, then expired at both ends; a late ack ENOENT' '
    id=$(send4 "read by cat") &&
    wait_for 5 "grep -q $id beta/leads/beta/inbox" &&
    cat beta/leads/beta/inbox >seen && grep -q "read by cat" seen &&
    shown_then_expired $id "read by cat" &&
    test_must_fail bash -c "echo $id >beta/leads/beta/ack" 2>err &&
    grep -q "No such file or directory" err
'

test_expect_success 'read through a tail -f started before it came: shown, then expired' '
    { tail -n 0 -f beta/leads/beta/inbox >tailed 2>/dev/null & echo $! >tail.pid; } &&
    sleep 0.5 &&
    id=$(send4 "read by tail") &&
    wait_for 5 "grep -q \"read by tail\" tailed" &&
    shown_then_expired $id "read by tail" &&
    kill $(cat tail.pid)
'

test_expect_success 'read through fleet_inbox (MCP SDK client): shown, then expired' '
    id=$(send4 "read by mcp") &&
    wait_for 5 "test \"\$(sed -n \"s/^held: //p\" beta/leads/beta/status)\" = 1" &&
    call beta fleet_inbox "{}" >m1 &&
    jq -r .text m1 | grep -q "read by mcp" &&
    shown_then_expired $id "read by mcp"
'

test_expect_success 'the control: read by nobody, still dropped unread by beta' '
    id=$(send4 "read by nobody") &&
    wait_for 20 "expired_as $id \"dropped unread by beta\"" &&
    hist $id detail | grep -q "^dropped unread by beta"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
