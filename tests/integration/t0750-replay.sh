#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Replay that cannot be laundered (issue 20 section 2, issue 16 defect 7).
# A message from alpha is captured on the way (tests/tools/rawpub signs it
# with alpha's key, as a peer would, and keeps the bytes) and typed into
# beta's (fake) herdr pane once. Then a broker login replays it:
#   - flagged `redelivered` (taken with basic.get and given back by closing
#     that channel unacked) while beta's consumer channel stays the one that
#     acked it: refused as `replayed`, dead-lettered;
#   - after 1000 refusals of alpha-signed junk (which once pushed the
#     consumed msgId out of history) and with beta's own consumer channel
#     reset by the broker: never shown, never typed;
#   - after gamma, a trusted peer, flooded beta's receipt queue with 110000
#     signed receipts (which once flushed the shared seen set): refused.
# What counts is what the fake herdr was asked to type and the broker's own
# queue counts (fleet.dlq, lead.beta.inbox), not what fleetfs says.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_use_shared
FLEET_VHOST=t0750
new_vhost $FLEET_VHOST
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub
URI=$(broker_uri $FLEET_VHOST)
Q=lead.beta.inbox
# more receipts than the message seen set used to hold (100000); under a
# sanitizer build a smaller flood checks the same code for memory errors
FLOOD=110000
case ${FLEETFS_BUILD:-build} in *san*) FLOOD=5000 ;; esac

AGENT='{"pane_id":"w1:p2","workspace_id":"w1","tab_id":"w1:t1","agent":"claude","name":"beta","agent_status":"idle"}'
dlq() { broker_count fleet.dlq; }
inbox() { broker_count $Q; }
rejected() { sed -n "s/^rejected_$1: //p" beta/status | grep . || echo 0; }
typed() { grep -c "$1" "$HERDR_LOG" || true; }
pane_is() { herdr_set ".panes[0].agent_status=\"$1\""; }
# watch_inbox NAME: a reader following beta's inbox (tail -f) into NAME, as
# a script would. read_until NAME MARKER: alpha sends MARKER (typed, so one
# more prompt); once the reader has read it, it is stopped, and NAME holds
# every line the inbox showed since watch_inbox.
watch_inbox() {
    { tail -n0 -f beta/leads/beta/inbox >"$1" 2>/dev/null & echo $! >"$1.pid"; } &&
    at_exit "kill \$(cat '$TEST_DIR/$1.pid') 2>/dev/null"
}
read_until() {
    echo "$2" >alpha/peers/beta/send &&
    wait_for 20 "grep -q \"$2\" $1" &&
    kill "$(cat "$1.pid")"
}
consumed_log() { grep -c "inbox: $(cat m1) was already consumed" beta.log || true; }

# replay_flagged TEXT: with the agent working, alpha sends TEXT, which beta
# holds (prefetch=1: whatever comes next waits in the broker, ready); the
# captured m1.json is published again and, still waiting, taken with
# basic.get and given back unacked: the broker flags it `redelivered`
replay_flagged() {
    pane_is working &&
    echo "$1" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"$1\" beta/leads/beta/inbox" &&
    "$RAWPUB" "$URI" $Q --body-file m1.json >/dev/null &&
    wait_for 10 "test \"\$(inbox)\" = 2" &&
    "$RAWPUB" "$URI" $Q --get-requeue >got.json &&
    test "$(jq -r .msgId got.json)" = "$(cat m1)"
}

test_expect_success 'alpha and beta mount; beta types into a (fake) herdr pane, one message at a time' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"panes\":[$AGENT],\"after_prompt_status\":\"idle\"}" &&
    herdr_start &&
    fleet_key gamma &&
    mount_fleet beta peers=alpha:gamma inject=herdr prefetch=1 max_length=200000 &&
    mount_fleet alpha peers=beta inject=none max_length=200000 &&
    wait_for 5 "grep -q \"^injector: ready\" beta/leads/beta/status" &&
    n=$(dlq) && test "$n" = 0
'

test_expect_success 'a message from alpha, its bytes captured on the way, is typed once' '
    "$RAWPUB" "$URI" $Q --sign "$TEST_DIR/keys/alpha.key" --from alpha --to beta \
        --text "captured on the way" --print >m1.json &&
    jq -r .msgId m1.json >m1 &&
    wait_for 10 "test \$(prompts) = 1" &&
    wait_for 10 "test \"\$(inbox)\" = 0" &&
    grep "$(cat m1)" beta/leads/beta/history | jq -e ".consumed == \"injected\"" >/dev/null
'

# Each test counts from where the one before left off (dlq, prompts, how
# often the captured text was typed), so each fails on its own.
M1TEXT="captured on the way"

# LavinMQ refuses basic.get on a queue that has an exclusive consumer (403
# "in exclusive use"; RabbitMQ serves it), so there nobody can take the
# replay from beta's mailbox and give it back flagged: that is its answer
if [[ $(broker_kind) == lavinmq ]]; then
test_expect_success 'on LavinMQ a replay cannot be flagged: basic.get on the mailbox beta consumes is refused (403); the copy is refused as a replay, never typed' '
    d0=$(dlq) &&
    pane_is working &&
    echo "held one" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"held one\" beta/leads/beta/inbox" &&
    "$RAWPUB" "$URI" $Q --body-file m1.json >/dev/null &&
    wait_for 10 "test \"\$(inbox)\" = 2" &&
    test_must_fail "$RAWPUB" "$URI" $Q --get-requeue >got.json 2>err &&
    cat err &&
    grep -q "basic.get on $Q refused: 403 ACCESS_REFUSED.*exclusive use" err &&
    test ! -s got.json &&
    pane_is idle &&
    wait_for 10 "test \"\$(inbox)\" = 0" &&
    wait_for 10 "test \"\$(dlq)\" = $((d0 + 1))" &&
    test "$(typed "held one")" = 1 &&
    test "$(rejected replayed)" = 1
'
else
test_expect_success 'replayed with the redelivered flag, on the channel that acked it: refused, never typed' '
    d0=$(dlq) && p0=$(prompts) && t0=$(typed "$M1TEXT") &&
    watch_inbox seen3 &&
    replay_flagged "held one" &&
    pane_is idle &&
    wait_for 10 "test \"\$(inbox)\" = 0" &&
    wait_for 10 "test \$(prompts) = $((p0 + 1))" &&
    test "$(typed "held one")" = 1 &&
    test "$(typed "$M1TEXT")" = "$t0" &&
    test "$(dlq)" = $((d0 + 1)) &&
    test "$(rejected replayed)" = 1 &&
    read_until seen3 "after three" && grep -q "held one" seen3 && ! grep -q "$(cat m1)" seen3 &&
    grep -q "rejected $(cat m1) from alpha (replayed: consumed here, and acked on this very consumer channel" beta.log
'
fi

test_expect_success 'sent from the future: refused (bad-lifetime), never typed' '
    d0=$(dlq) &&
    "$RAWPUB" "$URI" $Q --sign "$TEST_DIR/keys/alpha.key" --from alpha --to beta \
        --text "from next hour" --sent-in 3600 >/dev/null &&
    wait_for 10 "test \"\$(dlq)\" = $((d0 + 1))" &&
    test "$(rejected bad-lifetime)" = 1 &&
    grep -q "bad-lifetime: sentAt .* is in the future" beta.log &&
    test "$(typed "from next hour")" = 0
'

# The refusal budget is 10 at once, then one every 6 s, per sender (the
# refusal just before used one): how many of the 1000 get a receipt
# depends on timing; some, and far fewer than 1000.
test_expect_success '1000 misaddressed messages signed by alpha: all refused, few receipts and history lines' '
    d0=$(dlq) &&
    "$RAWPUB" "$URI" $Q --sign "$TEST_DIR/keys/alpha.key" --from alpha --to gamma \
        --text "not for beta" --count 1000 2>/dev/null &&
    wait_for 120 "test \"\$(rejected wrong-recipient)\" = 1000" &&
    wait_for 10 "test \"\$(dlq)\" = $((d0 + 1000))" &&
    n=$(grep -c "not for beta" beta/leads/beta/history) &&
    echo "history lines about the 1000: $n" &&
    test "$n" -ge 1 && test "$n" -lt 100 &&
    grep -q "more than 10 refusals of alpha.s messages within 60 s: further ones get no receipt" beta.log
'

lavinmq_skip t0750.6 'replayed with the flag after a forced reset of beta'"'"'s consumer channel: never shown, never typed' ||
test_expect_success 'replayed with the flag after a forced reset of beta'"'"'s consumer channel: never shown, never typed' '
    d0=$(dlq) && p0=$(prompts) && t0=$(typed "$M1TEXT") && c0=$(consumed_log) &&
    watch_inbox seen6 &&
    replay_flagged "held two" &&
    broker_close_consumer_channel $Q &&
    wait_for 20 "grep -q \"PRECONDITION_FAILED\\|unknown delivery tag\" beta.log" &&
    pane_is idle &&
    wait_for 20 "test \"\$(inbox)\" = 0" &&
    wait_for 10 "test \$(prompts) -ge $((p0 + 1))" &&
    test_eq "typed held two" "$(typed "held two")" 1 &&
    test_eq "typed m1" "$(typed "$M1TEXT")" "$t0" &&
    test_eq prompts $(prompts) $((p0 + 1)) &&
    test_eq "dead letters" "$(dlq)" "$d0" &&
    read_until seen6 "after six" &&
    { grep -q "held two" seen6 && ! grep -q "$(cat m1)" seen6 ||
      { echo "seen6 (the inbox as tail -f showed it):" && cat seen6 && false; }; } &&
    test "$(grep -c "$(cat m1)" beta/leads/beta/history)" -le 1 &&
    test_eq "m1 already consumed (log lines)" "$(consumed_log)" $((c0 + 1))
'

test_expect_success "gamma, trusted, floods beta's receipt queue with $FLOOD signed receipts about beta's message" '
    d0=$(dlq) &&
    echo "to gamma" >beta/peers/gamma/send &&
    tail -n1 beta/leads/beta/sent | jq -r .msgId >s1 &&
    "$RAWPUB" "$URI" lead.beta.receipts --sign "$TEST_DIR/keys/gamma.key" --from gamma --to beta \
        --text "" --receipt "$(cat s1)" injected --count $FLOOD 2>/dev/null &&
    wait_for 600 "test \"\$(broker_count lead.beta.receipts)\" = 0" &&
    test "$(jq -r "select(.msgId == \"$(cat s1)\") | .state" beta/leads/beta/sent)" = injected &&
    test "$(dlq)" = "$d0" &&
    n=$(grep -c "gamma says injected about $(cat s1): nothing to update" beta.log) &&
    echo "logged: $n of $FLOOD" && test "$n" -lt 1000
'

# The prompts are counted once "after six" (the marker the step before the
# flood sent) is typed: beta types one message at a time and waits up to 5 s
# for each to start a turn (the fake pane stays idle), so it can still be
# typed after a short flood (a clean-clone ASan run saw it typed in the
# middle of this step: the count below up by one, the replay refused)
# (on LavinMQ step 6 does not run, so there is no "after six" to wait for)
test_expect_success 'then the captured message, replayed: refused, never typed' '
    { test "$(broker_kind)" = lavinmq || wait_for 20 "test \$(typed \"after six\") -ge 1"; } &&
    d0=$(dlq) && p0=$(prompts) && t0=$(typed "$M1TEXT") && r0=$(rejected replayed) &&
    watch_inbox seen8 &&
    "$RAWPUB" "$URI" $Q --body-file m1.json >/dev/null &&
    wait_for 10 "test \"\$(inbox)\" = 0" &&
    wait_for 10 "test \"\$(dlq)\" = $((d0 + 1))" &&
    test "$(rejected replayed)" = $((r0 + 1)) &&
    test "$(typed "$M1TEXT")" = "$t0" &&
    test $(prompts) = "$p0" &&
    read_until seen8 "after eight" && ! grep -q "$(cat m1)" seen8
'

# counted by its own text: a prompt count taken here could include the
# marker the step before sent (read_until), typed a moment later (CI's ASan
# run saw prompts go up by that one while "still here" was not typed yet).
# "still here" queues behind "after eight", and each typed message holds
# the pane up to 5 s waiting for a turn that the fake pane never starts:
# CI saw "after eight" typed at the step's start and "still here" not yet
# 10 s later, so the wait is for "after eight" first, then its hold.
test_expect_success 'beta still works: a new message from alpha is typed' '
    echo "still here" >alpha/peers/beta/send &&
    wait_for 20 "test \$(typed \"after eight\") -ge 1" &&
    wait_for 20 "test \$(typed \"still here\") -ge 1" &&
    sleep 1 &&
    test "$(typed "still here")" = 1
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
