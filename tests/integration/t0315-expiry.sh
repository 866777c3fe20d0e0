#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Expiry enforced wherever a message waits (issue 36), through real mounts,
# with message_ttl=6s on every mount (the same fleet-wide) and alpha's
# expire_grace 3s. Past its expiresAt a message is never typed (the fake
# herdr's prompt log), never shown (a fresh cat and a tail -f of the inbox
# started then), an ack of it fails, and its sender's sent says expired
# with the receiver's word ("expiredBy": "receiver", "dropped unread by
# ...", or "shown, then expired" for the one its reader read: t0321)
# within a few seconds — before alpha's own clock would conclude it
# (expiresAt + expire_grace). A receiver offline across the expiry never
# sees it (the broker drops it: the AMQP per-message expiration and the
# queue's TTL; fleet.dlq counts it) and the sender's sent says
# dead-lettered with the broker's word (its dead letter came home,
# t0317), which its own clock's expired after the grace never replaces
# (the own-clock "expiredBy": "sender" is test_mailbox's).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_start_own

# field LEAD MSGID KEY: KEY of LEAD's sent entry MSGID
field() { jq -r "select(.msgId == \"$2\") | .$3 // empty" "$1/leads/$1/sent"; }
# until_expired MSGID: seconds from now to its expiresAt (at least 0)
until_expired() {
    local exp
    exp=$(date -d "$(field alpha "$1" expiresAt)" +%s%N) &&
        echo $(( (exp - $(date +%s%N)) / 1000000000 > 0 ? (exp - $(date +%s%N)) / 1000000000 : 0 ))
}
# expired_by_receiver MSGID PEER [WORDS]: sent says expired with PEER's
# word: "dropped unread by PEER" (nobody read its inbox line), or WORDS
expired_by_receiver() {
    test "$(field alpha "$1" state)" = expired &&
        test "$(field alpha "$1" expiredBy)" = receiver &&
        field alpha "$1" detail | grep -q "${3:-dropped unread by $2}"
}
# held_at MOUNT N: MOUNT's lead holds N messages (its status; reading the
# inbox itself would show them)
held_at() { test "$(sed -n "s/^held: //p" "$1/leads/$1/status")" = "$2"; }

test_expect_success 'alpha sends; beta types into a fake herdr whose agent is busy; gamma has no injector' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"after_prompt_status\":\"working\",\"busy_ms\":100,\"panes\":[$(pane beta working)]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta:gamma inject=none message_ttl=6s expire_grace=3s &&
    mount_fleet beta peers=alpha inject=herdr message_ttl=6s &&
    mount_fleet gamma peers=alpha inject=none message_ttl=6s &&
    wait_for 10 "grep -q \"^injector: \" beta/leads/beta/status"
'

test_expect_success 'waiting in the injector'"'"'s queue past expiresAt: never typed, sender expired by beta'"'"'s word' '
    echo "typed too late" >alpha/peers/beta/send &&
    id=$(last_sent_id alpha) &&
    wait_for 5 "held_at beta 1" &&
    wait_for $(( $(until_expired $id) + 3 )) "expired_by_receiver $id beta" &&
    test "$(prompts)" = 0 &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    echo "typed in time" >alpha/peers/beta/send &&
    test_absent 20 "grep -q \"typed in time\" \"$HERDR_LOG\"" "grep -q \"typed too late\" \"$HERDR_LOG\"" &&
    ! grep -q $id beta/leads/beta/inbox &&
    test "$(field alpha $id state)" = expired
'

test_expect_success 'held past expiresAt with nobody reading: never shown (cat, tail -f), sender expired by gamma'"'"'s word' '
    echo "held too long" >alpha/peers/gamma/send &&
    id=$(last_sent_id alpha) &&
    wait_for 5 "held_at gamma 1" &&
    wait_for $(( $(until_expired $id) + 3 )) "expired_by_receiver $id gamma" &&
    { tail -f gamma/leads/gamma/inbox >tailed 2>/dev/null & echo $! >tail.pid; } &&
    ! grep -q "held too long" gamma/leads/gamma/inbox &&
    echo "shown in time" >alpha/peers/gamma/send &&
    test_absent 10 "grep -q \"shown in time\" tailed" "grep -q \"held too long\" tailed" &&
    kill $(cat tail.pid) &&
    jq -r .msgId gamma/leads/gamma/inbox >ids && cat ids >gamma/leads/gamma/ack &&
    wait_for 10 "test \"\$(broker_count lead.gamma.inbox)\" = 0"
'

test_expect_success 'read in time, acked too late: the ack fails (ENOENT), sender expired by gamma'"'"'s word' '
    echo "acked too late" >alpha/peers/gamma/send &&
    id=$(last_sent_id alpha) &&
    wait_for 5 "grep -q \"acked too late\" gamma/leads/gamma/inbox" &&
    read_id=$(jq -r "select(.body == \"acked too late\") | .msgId" gamma/leads/gamma/inbox) &&
    test "$read_id" = "$id" &&
    sleep $(( $(until_expired $id) + 1 )) &&
    test_must_fail bash -c "echo $read_id >gamma/leads/gamma/ack" 2>err &&
    grep -q "No such file or directory" err &&
    wait_for 5 "expired_by_receiver $id gamma \"shown, then expired\"" &&
    wait_for 10 "test \"\$(broker_count lead.gamma.inbox)\" = 0"
'

test_expect_success 'gamma offline across the expiry: never shown when it is back; the broker dead-lettered it and alpha has the broker'"'"'s word, not its own clock'"'"'s' '
    dl0=$(broker_count fleet.dlq) &&
    unmount_fleet gamma &&
    echo "while gamma is away" >alpha/peers/gamma/send &&
    id=$(last_sent_id alpha) &&
    wait_for $(( $(until_expired $id) + 10 )) "test \"\$(broker_count lead.gamma.inbox)\" = 0" &&
    wait_for 10 "test \"\$(broker_count fleet.dlq)\" = $((dl0 + 1))" &&
    mount_fleet gamma peers=alpha inject=none message_ttl=6s &&
    echo "after gamma is back" >alpha/peers/gamma/send &&
    test_absent 10 "grep -q \"after gamma is back\" gamma/leads/gamma/inbox" \
        "grep -q \"while gamma is away\" gamma/leads/gamma/inbox gamma/leads/gamma/history" &&
    wait_for 10 "test \"\$(field alpha $id state)\" = dead-lettered" &&
    field alpha $id detail | grep -q "expired in lead.gamma.inbox"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
