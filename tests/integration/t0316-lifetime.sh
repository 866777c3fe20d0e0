#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sender chooses a message's lifetime (issue 36 item 2): the mount
# default expires_in (at most message_ttl: a longer one refuses to mount),
# and per message in the same one write through send.json beside send
# ({"body", "expiresIn", "replyTo"}: peers/<x>/, agents/<gid>/, groups/<g>/).
# Counted from what the receiver's inbox shows (expiresAt - sentAt) and the
# broker's own queue counts; nonsense gets EINVAL and nothing is published.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

# life LINE: expiresAt - sentAt of an inbox line, in seconds
life() { jq -r '((.expiresAt | sub("\\.[0-9]+Z$"; "Z") | fromdate) - (.sentAt | sub("\\.[0-9]+Z$"; "Z") | fromdate))' <<<"$1"; }
# line_of LEAD BODY: LEAD's inbox line with that body
line_of() { jq -c --arg b "$2" 'select(.body == $b)' "$1/leads/$1/inbox"; }
# sends_refused JSON FILE: one write of JSON to FILE fails EINVAL
sends_refused() {
    test_must_fail bash -c 'printf "%s" "$1" >"$2"' _ "$1" "$2" 2>err &&
        grep -q "Invalid argument" err
}

test_expect_success 'expires_in longer than message_ttl: the mount is refused, saying why' '
    test_must_fail "$FLEETFS" m -f -o coord_id=x,message_ttl=1h,expires_in=2h 2>err &&
    grep -q "expires_in.*longer than message_ttl" err
'

test_expect_success 'alpha (expires_in=1h) and beta (agent w1) mount' '
    mount_fleet alpha peers=beta expires_in=1h message_ttl=1d inject=none &&
    mount_fleet beta peers=alpha message_ttl=1d inject=none agents=w1 &&
    wait_for 20 "test -d alpha/agents/w1@beta" &&
    ls alpha/peers/beta >pf && printf "ask\nask.json\nreply\nsend\nsend.json\nstatus\n" >want && test_cmp want pf
'

test_expect_success 'send: the mount default, 1 hour' '
    echo "the default" >alpha/peers/beta/send &&
    wait_for 5 "test -n \"\$(line_of beta \"the default\")\"" &&
    test "$(life "$(line_of beta "the default")")" = 3600
'

test_expect_success 'send.json: expiresIn per message (a duration, or seconds), replyTo' '
    echo "{\"body\":\"ninety seconds\",\"expiresIn\":\"90s\"}" >alpha/peers/beta/send.json &&
    echo "{\"body\":\"two minutes\",\"expiresIn\":120}" >alpha/peers/beta/send.json &&
    echo "{\"body\":\"as the mount says\"}" >alpha/peers/beta/send.json &&
    wait_for 5 "test -n \"\$(line_of beta \"as the mount says\")\"" &&
    test "$(life "$(line_of beta "ninety seconds")")" = 90 &&
    test "$(life "$(line_of beta "two minutes")")" = 120 &&
    test "$(life "$(line_of beta "as the mount says")")" = 3600 &&
    id=$(line_of beta "two minutes" | jq -r .msgId) &&
    echo "{\"body\":\"the answer\",\"replyTo\":\"$id\"}" >beta/peers/alpha/send.json &&
    wait_for 5 "test -n \"\$(line_of alpha \"the answer\")\"" &&
    test "$(line_of alpha "the answer" | jq -r .replyTo)" = "$id"
'

test_expect_success 'send.json to an agent: the same form' '
    echo "{\"body\":\"to w1\",\"expiresIn\":\"10m\"}" >alpha/agents/w1@beta/send.json &&
    wait_for 5 "jq -e \"select(.body == \\\"to w1\\\")\" beta/agents/w1@beta/inbox" &&
    test "$(life "$(jq -c "select(.body == \"to w1\")" beta/agents/w1@beta/inbox)")" = 600
'

test_expect_success 'a short lifetime is enforced: past it the message is never shown, the sender hears beta'"'"'s word' '
    echo "{\"body\":\"gone in three\",\"expiresIn\":\"3s\"}" >alpha/peers/beta/send.json &&
    id=$(last_sent_id alpha) &&
    wait_for 3 "test -n \"\$(line_of beta \"gone in three\")\"" &&
    wait_for 10 "test \"\$(sent_state alpha $id)\" = expired" &&
    jq -r "select(.msgId == \"$id\") | .expiredBy" alpha/leads/alpha/sent | grep -qx receiver &&
    test -z "$(line_of beta "gone in three")"
'

test_expect_success 'nonsense in send.json: EINVAL, nothing published' '
    jq -r .msgId beta/leads/beta/inbox >ids && cat ids >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    n=$(wc -l <alpha/leads/alpha/sent) &&
    for j in "not json" "[1,2]" "{}" "{\"body\":5}" "{\"body\":\"\"}" \
             "{\"body\":\"x\",\"expiresIn\":\"0s\"}" "{\"body\":\"x\",\"expiresIn\":\"2d\"}" \
             "{\"body\":\"x\",\"expiresIn\":\"soon\"}" "{\"body\":\"x\",\"expiresIn\":-5}" \
             "{\"body\":\"x\",\"expiresIn\":\"500ms\"}" \
             "{\"body\":\"x\",\"replyTo\":\"0123456789abcdef0123456789abcdef\"}" \
             "{\"body\":\"x\",\"replyTo\":\"nope\"}" "{\"body\":\"x\",\"to\":\"gamma\"}" \
             "{\"body\":\"a\\u0000b\"}" "{\"body\":\"x\",\"body\":\"y\"}"; do
        sends_refused "$j" alpha/peers/beta/send.json || { echo "not refused: $j"; exit 1; }
    done &&
    test "$(wc -l <alpha/leads/alpha/sent)" = "$n" &&
    sleep 1 && test "$(broker_count lead.beta.inbox)" = 0 &&
    grep -q "send.json to beta: refused, nothing was sent: unknown key \"to\"" alpha.log
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
