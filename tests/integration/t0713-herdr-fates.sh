#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# herdr's refusals and its stall, as the fate rules say (issue 47 item 4):
# agent_blocked and agent_not_ready from agent.prompt mean nothing was typed
# (held, tried again, typed once later); agent_prompt_stalled means herdr
# wrote the text and saw no turn start: `uncertain`, never typed again. And
# the fake herdr's false stall on a cold start (herdr answers stalled to a
# prompt with "wait" although the text and Enter landed) never reaches the
# sender: fleetfs passes no "wait"; and only working or blocked (as
# herdr's own wait requires) counts as a started turn, never unknown. The server says it is herdr 0.9.0,
# protocol 22 (the numbers third parties report for the 0.9.0 release; the
# fake's behaviour is herdr's source as doc/injection.md section 12 reads it).
# Counted: the fake's prompt log (what fleetfs asked herdr to type) and the
# sender's `sent`.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_use_shared
FLEET_VHOST=t0713
new_vhost $FLEET_VHOST

AGENT='{"pane_id":"w1:p2","workspace_id":"w1","tab_id":"w1:t1","agent":"claude","name":"beta","agent_status":"idle"}'
state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent | tail -n1; }
detail_of() { jq -r "select(.msgId == \"$1\") | .detail" alpha/leads/alpha/sent | tail -n1; }
last_id() { tail -n1 alpha/leads/alpha/sent | jq -r .msgId; }
# texts herdr took (agent.prompt answered or stalled), and those it refused, for msgId $1
typed_n() { if [[ -f $HERDR_LOG ]]; then jq -r --arg id "$1" 'select(.method == "agent.prompt" and (.text | contains($id))) | .at' "$HERDR_LOG" | wc -l; else echo 0; fi; }
refused_n() { if [[ -f $HERDR_LOG.refused ]]; then jq -r --arg id "$1" 'select(.text | contains($id)) | .code' "$HERDR_LOG.refused" | wc -l; else echo 0; fi; }

test_expect_success 'herdr 0.9.0 (protocol 22) with a cold start; beta types through it' '
    herdr_state "{\"version\":\"0.9.0\",\"protocol\":22,\"panes\":[$AGENT],\"after_prompt_status\":\"working\",\"busy_ms\":300,\"enter_delay_ms\":300,\"cold_start\":true}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 5 "grep -q \"^injector: ready\" beta/leads/beta/status"
'

test_expect_success 'the cold start never reaches the sender: no wait passed, typed once, confirmed' '
    echo "cold" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(detail_of $id)" = "the agent left idle: its turn started" &&
    test "$(typed_n $id)" = 1 &&
    grep -q "inject: talking to herdr 0.9.0 protocol 22 at " beta.log &&
    ! jq -e "select(.method == \"agent.prompt\" and has(\"wait\"))" "$HERDR_LOG" >/dev/null
'

for code in agent_blocked agent_not_ready; do
test_expect_success "$code from agent.prompt: held, says why, typed once when herdr takes it" '
    herdr_set ".behaviour.prompt = \"error:'$code'\"" &&
    echo "held by '$code'" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "test \$(refused_n $id) -ge 2" &&
    grep -q "^injector: waiting: herdr refused to type into agent beta (w1:p2) ('$code': " beta/leads/beta/status &&
    grep -q "$id" beta/leads/beta/inbox &&
    test "$(typed_n $id)" = 0 &&
    state_of $id | grep -q "^published" &&
    herdr_set "del(.behaviour)" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(typed_n $id)" = 1
'
done

test_expect_success 'agent_prompt_stalled: uncertain, says so, never typed again' '
    herdr_set ".behaviour.prompt = \"stalled-always\"" &&
    echo "stalls" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "test \"\$(state_of $id)\" = uncertain" &&
    detail_of $id | grep -q "herdr answered agent_prompt_stalled" &&
    herdr_set "del(.behaviour)" &&
    test "$(typed_n $id)" = 1 &&
    test "$(state_of $id)" = uncertain &&
    grep "$id" beta/leads/beta/history | jq -r .consumed | grep -qx uncertain
'

test_expect_success 'the next message is typed and confirmed; the stalled one was still typed only once' '
    stalled=$(last_id) &&
    echo "next" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(typed_n $id)" = 1 &&
    test "$(typed_n $stalled)" = 1 &&
    test "$(state_of $stalled)" = uncertain
'

test_expect_success 'an agent that goes unknown after the prompt (not working, not blocked): injected, never confirmed' '
    herdr_set ".after_prompt_status = \"unknown\" | del(.busy_ms)" &&
    echo "into the void" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "grep -q \"$id typed into agent beta (w1:p2), but the agent did not leave idle within 5000 ms\" beta.log" &&
    test "$(state_of $id)" = injected &&
    test "$(typed_n $id)" = 1 &&
    herdr_set ".panes[0].agent_status = \"idle\""
'

test_done
