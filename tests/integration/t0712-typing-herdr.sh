#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Typing that lands through herdr (issue 47), with the fake herdr meeting
# herdr's own failure modes (tests/fake_herdr: its Enter lands 300 ms or
# more after agent.prompt answers) and the agent's prompt-submit hook
# (fleetfs hook) played by the test with the text the fake was asked to
# type, as the agent would hand it on submission. Counted: the fake's
# prompt log (what fleetfs asked herdr to type) and the sender's `sent`.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_use_shared
FLEET_VHOST=t0712
new_vhost $FLEET_VHOST

AGENT='{"pane_id":"w1:p2","workspace_id":"w1","tab_id":"w1:t1","agent":"claude","name":"beta","agent_status":"idle"}'
state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent | tail -n1; }
detail_of() { jq -r "select(.msgId == \"$1\") | .detail" alpha/leads/alpha/sent | tail -n1; }
last_id() { tail -n1 alpha/leads/alpha/sent | jq -r .msgId; }
# what fleetfs asked herdr to do: texts typed (agent.prompt), Enters sent alone
texts() { if [[ -f $HERDR_LOG ]]; then jq -c 'select(.method == "agent.prompt")' "$HERDR_LOG" | wc -l; else echo 0; fi; }
enters() { if [[ -f $HERDR_LOG ]]; then jq -c 'select(.method == "pane.send_input" and .keys == ["enter"] and (.text // "") == "")' "$HERDR_LOG" | wc -l; else echo 0; fi; }
# the text fleetfs asked herdr to type for msgId $1
typed_for() { jq -r --arg id "$1" 'select(.text | contains($id)) | .text' "$HERDR_LOG"; }
# submit PROMPT: the agent's hook, run as Claude Code runs it
submit() {
  jq -n --arg p "$1" --arg cwd "$TEST_DIR" \
    '{session_id: "s1", transcript_path: "/tmp/t.jsonl", cwd: $cwd, hook_event_name: "UserPromptSubmit", prompt: $p}' |
    "$FLEETFS" hook --log "$TEST_DIR/hook.log" >hook.out && test ! -s hook.out
}

test_expect_success 'herdr whose Enter lands 0.7 s after agent.prompt answered; beta types through it' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"panes\":[$AGENT],\"after_prompt_status\":\"working\",\"busy_ms\":500,\"enter_delay_ms\":700}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 5 "grep -q \"^injector: ready\" beta/leads/beta/status"
'

test_expect_success 'typed once; confirmed only once the turn started after the late Enter' '
    echo "late enter" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(texts) = 1" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(detail_of $id)" = "the agent left idle: its turn started" &&
    test "$(texts)" = 1 &&
    test "$(enters)" = 0
'

test_expect_success 'an Enter the agent swallowed: the text still waits, one more Enter (never the text), confirmed' '
    herdr_set ".enter_delay_ms = 0 | .swallow_enters = 1" &&
    echo "swallowed once" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(texts) = 2" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(enters)" = 1 &&
    test "$(texts)" = 2 &&
    grep "$id" beta/leads/beta/history | jq -r .detail | grep -qx "typed into agent beta (w1:p2); submitted with a second carriage return (the first was not taken)" &&
    test "$(detail_of $id)" = "the agent left idle: its turn started"
'

test_expect_success 'both Enters swallowed: injected with not submitted, never confirmed, never typed again' '
    herdr_set ".swallow_enters = 2" &&
    echo "never taken" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(texts) = 3" &&
    wait_for 15 "test \"\$(state_of $id)\" = injected" &&
    detail_of $id | grep -q "still waits in the input line after a second carriage return: not submitted" &&
    wait_for 10 "grep -q \"$id typed into .*did not leave idle within 5000 ms\" beta.log" &&
    test "$(state_of $id)" = injected &&
    test "$(enters)" = 2 &&
    test "$(texts)" = 3 &&
    herdr_set "del(.panes[0].input)"
'

test_expect_success 'the agent stays idle but its hook saw the prompt: confirmed from the hook, as typed' '
    herdr_set "del(.after_prompt_status) | .enter_delay_ms = 0" &&
    echo "hooked" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(texts) = 4" &&
    submit "$(typed_for $id)" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(detail_of $id)" = "the agent'\''s prompt hook saw it submitted, as typed"
'

test_expect_success 'a draft joined to the message: the hook wins over herdr'\''s plain word, detail joined' '
    herdr_set ".after_prompt_status = \"working\" | .busy_ms = 300" &&
    echo "with a draft" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(texts) = 5" &&
    submit "half a thought $(typed_for $id)" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    detail_of $id | grep -q "^joined: the agent.s prompt hook saw it submitted together with 15 bytes fleetfs did not type"
'

test_expect_success 'a hook that has reported before but not for this one: herdr'\''s word after 5 s, saying so' '
    echo "no hook this time" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(texts) = 6" &&
    wait_for 15 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(detail_of $id)" = "the agent left idle: its turn started (its prompt hook did not report)" &&
    test "$(texts)" = 6
'

test_expect_success 'a late or repeated hook report sends nothing more; one for a msgId never typed is refused' '
    id=$(last_id) &&
    submit "$(typed_for $id)" &&
    wait_for 5 "grep -q \"a prompt hook reported $id after the sender was told confirmed (the agent left idle); nothing more is sent\" beta.log" &&
    grep -q "refused the report of $id" hook.log &&
    test "$(detail_of $id)" = "the agent left idle: its turn started (its prompt hook did not report)" &&
    submit "[fleet message from alpha, msgId 0123456789abcdef0123456789abcdef - reply: echo '\''...'\'' > $TEST_DIR/beta/peers/alpha/reply/0123456789abcdef0123456789abcdef]" &&
    grep -q "refused the report of 0123456789abcdef0123456789abcdef" hook.log &&
    grep -q "a prompt hook reported 0123456789abcdef0123456789abcdef, which fleetfs did not type here" beta.log
'

test_expect_success 'an agent herdr still starts (launch_pending): held, says so, typed once it listens' '
    herdr_set ".panes[0].launch_pending = true" &&
    echo "after your start" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "grep -q \"^injector: waiting: agent beta (w1:p2) is still starting (herdr: launch pending)\" beta/leads/beta/status" &&
    n=$(herdr_calls) &&
    test_absent 10 "herdr_looked_again 3 $n" "test \$(texts) != 6" &&
    grep -q "$id" beta/leads/beta/inbox &&
    herdr_set ".panes[0].launch_pending = false" &&
    wait_for 10 "test \$(texts) = 7" &&
    typed_for $id | tail -n1 | grep -qx "after your start"
'

test_done
