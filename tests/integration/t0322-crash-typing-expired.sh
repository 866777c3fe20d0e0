#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Crash while typing, back after expiry (issue 43 item 1). beta's fleetfs
# is killed (-9) while it types alpha's message into the (fake) herdr pane
# — once during a prompt that hangs (its journal says injecting), once
# right after the text was typed, before the ack (injected) — and is
# mounted again only after the message's expiresAt: the broker has dropped
# the requeued copy (fleet.dlq holds it; its dead letter home makes
# alpha's sent dead-lettered "expired in lead.beta.inbox" for a while),
# so it never comes back. The journal's word must still reach alpha:
# alpha's sent ends uncertain (resp. injected), beta's history says so,
# and nothing is typed again (the fake herdr's prompt log). On 8dc6d57
# alpha stayed dead-lettered and beta's history had no line.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_start_own

AGENT='{"pane_id":"w1:p2","workspace_id":"w1","tab_id":"w1:t1","agent":"claude","name":"beta","agent_status":"idle"}'
herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"panes\":[$AGENT],\"after_prompt_status\":\"idle\"}"
field() { jq -r "select(.msgId == \"$1\") | .$2 // empty" alpha/leads/alpha/sent; }
# past_expiry MSGID: alpha's clock is past that message's expiresAt
past_expiry() { test "$(date +%s%N)" -gt "$(date -d "$(field "$1" expiresAt)" +%s%N)"; }
# send6 BODY: alpha sends BODY to beta with a 6 s lifetime; prints its msgId
send6() {
    echo "{\"body\":\"$1\",\"expiresIn\":\"6s\"}" >alpha/peers/beta/send.json && tail -n1 alpha/leads/alpha/sent | jq -r .msgId
}
# gone_at_broker MSGID: beta's mailbox is empty and alpha heard the broker's word
gone_at_broker() {
    test "$(broker_count lead.beta.inbox)" = 0 && test "$(field "$1" state)" = dead-lettered
}

test_expect_success 'beta types through herdr, alpha does not' '
    herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 5 "grep -q \"^injector: ready\" beta/leads/beta/status"
'

test_expect_success 'killed during a hanging prompt, back after expiry: alpha ends uncertain, not typed again' '
    herdr_set ".behaviour.prompt=\"slow:60000\"" &&
    id=$(send6 "caught mid-typing") &&
    wait_for 10 "test \$(prompts) = 1" &&
    kill_fleet beta &&
    herdr_set "del(.behaviour)" &&
    wait_for 30 "past_expiry $id && gone_at_broker $id" &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 20 "test \"\$(field $id state)\" = uncertain" &&
    jq -e "select(.msgId == \"$id\") | .consumed == \"uncertain\"" beta/leads/beta/history &&
    test "$(prompts)" = 1
'

test_expect_success 'killed right after typing, before the ack, back after expiry: alpha ends injected' '
    unmount_fleet beta &&
    FLEETFS_TEST_DIE_AFTER_TYPING=1 mount_fleet beta peers=alpha inject=herdr &&
    id=$(send6 "typed just before the crash") &&
    wait_for 10 "fleet_gone beta" &&
    fusermount3 -uz beta && rm -f .harness/pid.beta &&
    test "$(prompts)" = 2 &&
    wait_for 30 "past_expiry $id && gone_at_broker $id" &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 20 "test \"\$(field $id state)\" = injected" &&
    jq -e "select(.msgId == \"$id\") | .consumed == \"injected\"" beta/leads/beta/history &&
    test "$(prompts)" = 2
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
