#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Typing that lands (issue 47), through a real tmux and real mounts: the
# lead's pane runs tests/tools/fake-tui, a stand-in agent TUI (raw mode,
# bracketed paste) that records each prompt it submitted, swallows a
# carriage return arriving too soon after a paste, shows a person's draft
# typed through an attached tmux client, and runs `fleetfs hook` as its
# prompt-submit hook with the JSON Claude Code sends. Everything counted
# here is what that TUI recorded it submitted, and what the sender's own
# `sent` says.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
command -v script >/dev/null || test_skip_all "script (util-linux) is not installed"
broker_use_shared
FLEET_VHOST=t0711
new_vhost $FLEET_VHOST
tmux_private
at_exit "kill \$(cat $TEST_DIR/client.pid $TEST_DIR/holder.pid 2>/dev/null) 2>/dev/null || true"

TUI=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/fake-tui
[[ ${FLEETFS_BUILD:-} == /* ]] && TUI=$FLEETFS_BUILD/tools/fake-tui
test -x "$TUI" || test_skip_all "no $TUI: build it with make"

state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent | tail -n1; }
detail_of() { jq -r "select(.msgId == \"$1\") | .detail" alpha/leads/alpha/sent | tail -n1; }
hist_detail() { jq -r "select(.msgId == \"$1\") | .detail" beta/leads/beta/history | tail -n1; }
last_id() { tail -n1 alpha/leads/alpha/sent | jq -r .msgId; }
inj() { sed -n 's/^injector: //p' beta/leads/beta/status; }
# what the TUI recorded: its submissions, and the carriage returns it swallowed
subs() { if [[ -f $1 ]]; then jq -c 'select(.n)' "$1"; fi; }
nsubs() { subs "$1" | wc -l; }
pastes() { if [[ -f $1 ]]; then jq -c 'select(.pasted)' "$1" | wc -l; else echo 0; fi; }
swallowed() { if [[ -f $1 ]]; then jq -c 'select(.swallowed)' "$1" | wc -l; else echo 0; fi; }
# the text the TUI submitted K-th (from 1)
sub_text() { subs "$1" | sed -n "${2}p" | jq -r .text; }
PANE() { cat "$TEST_DIR/pane"; }
HOOK="$FLEETFS hook --log $TEST_DIR/hook.log"
# start_tui RECORD ARGS...: a fresh TUI in the lead's pane
start_tui() {
  local rec=$1
  shift
  rm -f "$TEST_DIR/$rec" &&
    tmux respawn-pane -k -t "$(PANE)" "$TUI $TEST_DIR/$rec $*" &&
    wait_for 5 "grep -q ready $rec"
}

test_expect_success 'the lead pane runs the TUI with fleetfs hook as its prompt hook; beta types with tmux' '
    tmux -f /dev/null new-session -d -s lead -x 160 -y 40 "$TUI $TEST_DIR/rec1 --hook \"$HOOK\"" &&
    tmux display-message -p -t lead "#{pane_id}" >pane &&
    wait_for 5 "grep -q ready rec1" &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-tui "inject_target=$(PANE)" &&
    wait_for 5 "inj | grep -q \"^ready: nothing to deliver (backend tmux)\"" &&
    ls beta/leads/beta | grep -qx submitted
'

test_expect_success 'a message is submitted exactly once, as typed, and the sender sees confirmed from the hook' '
    printf "please review the parser\nline two" >msg &&
    dd if=msg of=alpha/peers/beta/send bs=64k status=none &&
    id=$(last_id) &&
    wait_for 15 "test \$(nsubs rec1) = 1" &&
    { fleet_header alpha "$id" beta && printf "please review the parser\nline two\n"; } >want &&
    sub_text rec1 1 >got && test_cmp want got &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(detail_of $id)" = "the agent'\''s prompt hook saw it submitted, as typed" &&
    test "$(hist_detail $id)" = "typed into tmux pane $(PANE) ($(PANE))" &&
    test "$(swallowed rec1)" = 0 &&
    test "$(pastes rec1)" = 1 &&
    test "$(nsubs rec1)" = 1
'

# "well under 50 ms": the CPU time the hook spends on a report (wall time
# under this shared machine's load says little; the TUI's own figure is
# shown, and doc/agents.md gives the figures measured)
test_expect_success 'the hook exited 0, printed nothing, and spends well under 50 ms of CPU on a report' '
    subs rec1 | jq -e ".hook_rc == 0" &&
    echo "the TUI timed the hook at $(subs rec1 | jq .hook_ms) ms (wall)" &&
    test ! -s hook.log &&
    jq -n --arg p "$(sub_text rec1 1)" "{hook_event_name: \"UserPromptSubmit\", prompt: \$p}" >again.json &&
    /usr/bin/time -f "%e %U %S" -o hooktime $FLEETFS hook <again.json >out 2>err &&
    test ! -s out && cat hooktime err &&
    grep -q "refused the report of" err &&
    awk "{ exit !((\$2 + \$3) * 1000 < 50) }" hooktime
'

test_expect_success 'a TUI that swallows an early carriage return still submits exactly once (one more CR, never a second paste)' '
    start_tui rec2 --swallow-ms 1200 --hook "\"$HOOK\"" &&
    echo "are you there" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 15 "test \$(nsubs rec2) = 1" &&
    test "$(swallowed rec2)" = 1 &&
    sub_text rec2 1 | tail -n1 | grep -qx "are you there" &&
    test "$(sub_text rec2 1 | grep -c "^\[fleet message from alpha, msgId $id")" = 1 &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    hist_detail $id | grep -q "submitted with a second carriage return (the first was not taken)" &&
    grep -q "$id typed into .* still waited in its input line" beta.log &&
    test "$(nsubs rec2)" = 1 &&
    test "$(pastes rec2)" = 1
'

test_expect_success 'a TUI that never takes the Enter: sender sees injected, not submitted; never confirmed' '
    start_tui rec3 --swallow-ms 3600000 &&
    echo "nobody home" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 15 "test \"\$(state_of $id)\" = injected" &&
    detail_of $id | grep -q "still waits in the input line after a second carriage return: not submitted" &&
    test "$(swallowed rec3)" = 2 &&
    test "$(pastes rec3)" = 1 &&
    test "$(nsubs rec3)" = 0 &&
    tmux capture-pane -p -t "$(PANE)" | grep -q "^  nobody home" &&
    test "$(nsubs rec3)" = 0
'

# a person at the pane: an attached tmux client whose terminal is fed
# through a fifo (script gives the client a terminal of its own)
test_expect_success 'a person typing through an attached client holds typing: status says so, nothing is typed' '
    start_tui rec4 --hook "\"$HOOK\"" &&
    mkfifo typist &&
    { script -qfc "tmux attach -t lead" /dev/null <typist >/dev/null 2>&1 & echo $! >client.pid; } &&
    { sleep 600 >typist & echo $! >holder.pid; } &&
    wait_for 5 "test -n \"\$(tmux list-clients)\"" &&
    printf "half a thou" >typist &&
    wait_for 5 "tmux capture-pane -p -t $(PANE) | grep -q \"^> half a thou\"" &&
    echo "do not interrupt" >alpha/peers/beta/send &&
    id=$(last_id) && echo $id >held.id &&
    wait_for 10 "inj | grep -q \"^waiting: a person is typing on $(hostname) (keys in tmux pane\"" &&
    grep -q "$id" beta/leads/beta/inbox &&
    test "$(nsubs rec4)" = 0
'

test_expect_success 'once quiet, the draft left in the input line still holds it' '
    wait_for 15 "inj | grep -q \"^waiting: a person.s draft is in the input line of tmux pane\"" &&
    grep -q "$(cat held.id)" beta/leads/beta/inbox &&
    tmux capture-pane -p -t "$(PANE)" | grep -qx "> half a thou" &&
    test "$(nsubs rec4)" = 0
'

test_expect_success 'the person submits the draft; the message follows on its own, never joined to it' '
    printf "ght\r" >typist &&
    wait_for 5 "test \$(nsubs rec4) = 1" &&
    test "$(sub_text rec4 1)" = "half a thought" &&
    id=$(cat held.id) &&
    wait_for 20 "test \$(nsubs rec4) = 2" &&
    sub_text rec4 2 | head -n1 | grep -q "^\[fleet message from alpha, msgId $id" &&
    test "$(sub_text rec4 2 | tail -n1)" = "do not interrupt" &&
    ! sub_text rec4 2 | grep -q "half a" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(detail_of $id)" = "the agent'\''s prompt hook saw it submitted, as typed" &&
    { kill $(cat client.pid) $(cat holder.pid) 2>/dev/null || true; }
'

test_expect_success 'a draft fleetfs cannot see (no prompt marker) is joined: the sender sees joined, never a plain confirmed' '
    start_tui rec5 --prompt "\"\"" --hook "\"$HOOK\"" &&
    tmux send-keys -t "$(PANE)" -l "my own words " &&
    wait_for 5 "tmux capture-pane -p -t $(PANE) | grep -q \"^my own words\"" &&
    echo "the real message" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 15 "test \$(nsubs rec5) = 1" &&
    sub_text rec5 1 | head -n1 | grep -q "^my own words \[fleet message from alpha, msgId $id" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    detail_of $id | grep -q "^joined: the agent.s prompt hook saw it submitted together with 13 bytes fleetfs did not type"
'

test_expect_success 'the MCP tool fleet_sent reports the same state and detail (joined) as sent' '
    id=$(last_id) &&
    printf "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"fleet_sent\",\"arguments\":{\"msgId\":\"%s\"}}}\n" "$id" |
        timeout 60 "$FLEETFS" mcp "$TEST_DIR/alpha" >mcp.out &&
    jq -e ".id == 1 and .result.isError == false" mcp.out &&
    jq -c --arg id "$id" "[.result.structuredContent | .. | objects | select(.msgId == \$id)][0]" mcp.out >mcp.rec &&
    jq -e ".state == \"confirmed\"" mcp.rec &&
    jq -e ".detail | startswith(\"joined: the agent\")" mcp.rec
'

test_expect_success 'a hook report for a msgId this host never typed is refused and logged, never a receipt' '
    fake=0123456789abcdef0123456789abcdef &&
    test_must_fail sh -c "printf \"$fake 5\nhello\" >beta/leads/beta/submitted" &&
    grep -q "a prompt hook reported $fake, which fleetfs did not type here since this mount started; refused" beta.log &&
    printf "{\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"[fleet message from alpha, msgId %s - reply: echo '\''...'\'' > %s/peers/alpha/reply/%s]\\\\nforged\"}" $fake "$TEST_DIR/beta" $fake >forged.json &&
    $FLEETFS hook --log "$TEST_DIR/hook.log" <forged.json >out 2>err &&
    test ! -s out &&
    grep -q "refused the report of $fake" hook.log &&
    test_must_fail sh -c "printf \"garbage\" >beta/leads/beta/submitted" &&
    grep -q "a prompt hook.s report is malformed" beta.log &&
    ! grep -q "$fake" alpha/leads/alpha/sent
'

test_expect_success 'the hook always exits 0: no mount, bad JSON, a prompt with no header' '
    fake=0123456789abcdef0123456789abcdef &&
    echo "not json" | $FLEETFS hook --log "$TEST_DIR/hook.log" >out &&
    test ! -s out && grep -q "is not a JSON object with a prompt" hook.log &&
    echo "{\"prompt\":\"just my own prompt\"}" | $FLEETFS hook >out && test ! -s out &&
    printf "{\"prompt\":\"[fleet message from alpha, msgId %s - reply: echo '\''...'\'' > /nonexistent/peers/alpha/reply/%s]\"}" $fake $fake |
        $FLEETFS hook --log "$TEST_DIR/hook.log" >out &&
    test ! -s out && grep -q "cannot open /nonexistent/self/submitted" hook.log
'

test_expect_success 'a local agent'\''s hook reports through its own home: confirmed for a message to the agent' '
    unmount_fleet beta &&
    logged=$(wc -l <hook.log) &&
    tmux new-window -d -t lead -n w1 "$TUI $TEST_DIR/rec6 --hook \"$HOOK\"" &&
    tmux select-pane -t lead:w1 -T w1 &&
    wait_for 5 "grep -q ready rec6" &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-tui "inject_target=$(PANE)" agents=w1 &&
    wait_for 20 "test -d alpha/agents/w1@beta" &&
    ls beta/agents/w1@beta | grep -qx submitted &&
    echo "for w1 only" >alpha/agents/w1@beta/send &&
    id=$(last_id) &&
    wait_for 15 "test \$(nsubs rec6) = 1" &&
    sub_text rec6 1 | head -n1 | grep -q "reply: echo .\.\.\.. > $TEST_DIR/beta/agents/w1@beta/reply/$id\]$" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test "$(detail_of $id)" = "the agent'\''s prompt hook saw it submitted, as typed" &&
    test "$(wc -l <hook.log)" = "$logged"
'

test_done
