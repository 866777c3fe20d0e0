#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Typing arrivals into the lead's pane through herdr (a fake that follows
# HERDR-PROTOCOL.md): only when the agent is idle or done, never when it is
# blocked, at most once across crashes, and the sender learns the truth.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_use_shared
FLEET_VHOST=t0700
new_vhost $FLEET_VHOST

AGENT='{"pane_id":"w1:p2","workspace_id":"w1","tab_id":"w1:t1","agent":"claude","name":"beta","agent_status":"idle"}'
state_with() { herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"panes\":[$1],\"after_prompt_status\":\"working\"}"; }
state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent; }
last_id() { tail -n1 alpha/leads/alpha/sent | jq -r .msgId; }

test_expect_success 'beta mounts with herdr injection, alpha without' '
    state_with "$AGENT" && herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 5 "grep -q \"^injector: ready\" beta/leads/beta/status"
'

test_expect_success 'idle agent: typed once, with a header naming sender and msgId' '
    echo "please review the parser" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(prompts) = 1" &&
    jq -r .text "$HERDR_LOG" >typed &&
    { fleet_header alpha "$id" beta && echo "please review the parser"; } >want &&
    test_cmp want typed &&
    test "$(jq -r .target "$HERDR_LOG")" = w1:p2
'

test_expect_success 'the sender sees published -> injected -> confirmed; receipts stay out of inboxes' '
    id=$(last_id) &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed" &&
    test ! -s alpha/leads/alpha/inbox &&
    test ! -s beta/leads/beta/inbox &&
    grep "$id" beta/leads/beta/history | jq -e ".consumed == \"injected\"" >/dev/null &&
    grep -q "^injected: 1$" beta/status &&
    n=$(broker_count lead.beta.inbox) && test "$n" = 0
'

test_expect_success 'a working agent gets nothing until it is idle again' '
    herdr_set ".panes[0].agent_status=\"working\"" &&
    echo "second thought" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"^injector: waiting: agent beta (w1:p2) is working\" beta/leads/beta/status" &&
    n=$(herdr_calls) &&
    test_absent 10 "herdr_looked_again 3 $n" "test \$(prompts) != 1" &&
    herdr_set ".panes[0].agent_status=\"done\"" &&
    wait_for 5 "test \$(prompts) = 2" &&
    jq -r .text "$HERDR_LOG" | grep -q "second thought"
'

test_expect_success 'a blocked agent gets no keystroke at all, then the message once it is idle' '
    herdr_set ".panes[0].agent_status=\"blocked\"" &&
    echo "do not press enter on a modal" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"^injector: waiting: agent beta (w1:p2) is blocked\" beta/leads/beta/status" &&
    n=$(herdr_calls) &&
    test_absent 10 "herdr_looked_again 3 $n" "test \$(prompts) != 2 || test \$(refused) != 0" &&
    test $(wc -l <beta/leads/beta/inbox) = 1 &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    wait_for 5 "test \$(prompts) = 3" &&
    jq -r .text "$HERDR_LOG" | tail -n1 | grep -q "do not press enter"
'

test_expect_success 'no agent or pane named beta: nothing typed, status says how to fix it, then it recovers' '
    state_with "{\"pane_id\":\"w1:p7\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\",\"label\":\"other\",\"agent_status\":\"idle\"}" &&
    echo "anyone there?" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"^injector: stalled: no herdr agent named beta and no pane labelled beta\" beta/leads/beta/status" &&
    grep -q "stalled: no herdr agent named beta" beta/status &&
    n=$(herdr_calls) &&
    test_absent 10 "herdr_looked_again 2 $n" "test \$(prompts) != 3" &&
    state_with "$AGENT" &&
    wait_for 5 "test \$(prompts) = 4"
'

test_expect_success 'two panes labelled beta: stall, never guess; renaming one fixes it' '
    P1="{\"pane_id\":\"w1:p3\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\",\"label\":\"beta\",\"agent\":\"claude\",\"agent_status\":\"idle\"}" &&
    P2="{\"pane_id\":\"w1:p4\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\",\"label\":\"beta\",\"agent\":\"codex\",\"agent_status\":\"idle\"}" &&
    state_with "$P1,$P2" &&
    echo "which one of you?" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"^injector: stalled: 2 panes labelled beta; rename one or set -o inject_target\" beta/leads/beta/status" &&
    n=$(herdr_calls) &&
    test_absent 10 "herdr_looked_again 2 $n" "test \$(prompts) != 4" &&
    herdr_set ".panes[1].label=\"beta-old\"" &&
    wait_for 5 "test \$(prompts) = 5" &&
    test "$(tail -n1 "$HERDR_LOG" | jq -r .target)" = w1:p3
'

test_expect_success 'herdr down: messages wait; herdr back: delivered, nothing lost' '
    state_with "$AGENT" &&
    herdr_stop &&
    echo "while herdr restarts 1" >alpha/peers/beta/send &&
    echo "while herdr restarts 2" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"^injector: waiting: herdr is not running\" beta/leads/beta/status" &&
    test $(wc -l <beta/leads/beta/inbox) = 2 &&
    herdr_start &&
    wait_for 10 "test \$(prompts) = 6" &&
    wait_for 5 "grep -q \"^injector: waiting: agent beta (w1:p2) is working\" beta/leads/beta/status" &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    wait_for 10 "test \$(prompts) = 7" &&
    jq -r .text "$HERDR_LOG" | grep -c "while herdr restarts" >n && test "$(cat n)" = 2
'

test_expect_success 'escapes, paste terminators and control bytes never reach herdr' '
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    /usr/bin/printf "evil\\033[201~\\033]0;pwned\\007 bell\\007 del\\177 csi\\302\\233 c1\\302\\205 \\033[2J\\033Pdcs\\033\\\\ tab\\tnew\\nline\\r\\n" >evil &&
    dd of=alpha/peers/beta/send bs=64k status=none <evil &&
    id=$(last_id) &&
    wait_for 5 "grep $id \"$HERDR_LOG\" | jq -e .text >/dev/null 2>&1" &&
    test $(prompts) = 8 &&
    grep $id "$HERDR_LOG" | jq -r .text >typed &&
    ! LC_ALL=C grep -qP "[\\x00-\\x08\\x0b-\\x1f\\x7f]" typed &&
    ! grep -qP "[\\x{80}-\\x{9f}]" typed &&
    head -n1 typed | grep -q "^\[fleet message from alpha, msgId [0-9a-f]* - reply: echo .\.\.\.. > $TEST_DIR/beta/peers/alpha/reply/[0-9a-f]*\]$" &&
    sed -n 2p typed | grep -q "^evil bell del csi" &&
    grep -q "tab	new" typed && grep -q "^line$" typed &&
    ! grep -q pwned typed && ! grep -q "201~" typed && ! grep -q "2J" typed
'

test_expect_success 'crash after typing, before the ack: restarted beta does not type it again' '
    wait_for 5 "test ! -s beta/leads/beta/inbox" &&
    unmount_fleet beta &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    FLEETFS_TEST_DIE_AFTER_TYPING=1 mount_fleet beta peers=alpha inject=herdr &&
    echo "typed just before a crash" >alpha/peers/beta/send &&
    id=$(last_id) && echo $id >crash-a &&
    wait_for 10 "fleet_gone beta" &&
    test $(prompts) = 9 &&
    fusermount3 -uz beta && rm -f .harness/pid.beta &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 10 "grep -q $id beta/leads/beta/history" &&
    grep $id beta/leads/beta/history | jq -e ".consumed == \"injected\"" >/dev/null &&
    test_absent 10 "test \"\$(state_of $id)\" = injected" "test \$(prompts) != 9"
'

test_expect_success 'crash during a hanging prompt: not typed again, the sender sees uncertain' '
    herdr_set ".panes[0].agent_status=\"idle\" | .behaviour.prompt=\"slow:30000\"" &&
    echo "caught mid-typing" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "test \$(prompts) = 10" &&
    kill_fleet beta &&
    herdr_set "del(.behaviour) | .panes[0].agent_status=\"idle\"" &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 10 "test \"\$(state_of $id)\" = uncertain" &&
    grep $id beta/leads/beta/history | jq -e ".consumed == \"uncertain\"" >/dev/null &&
    test_absent 10 "test \"\$(state_of $id)\" = uncertain" "test \$(prompts) != 10"
'

test_expect_success 'acked through the ack file: the sender sees acked, nothing typed' '
    herdr_set ".panes[0].agent_status=\"working\"" &&
    echo "read it yourself" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "grep -q $id beta/leads/beta/inbox" &&
    echo $id >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(state_of $id)\" = acked" &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    echo "sent after the acked one" >alpha/peers/beta/send &&
    test_absent 10 "test \$(prompts) -ge 11" "grep -q \"read it yourself\" \"$HERDR_LOG\"" &&
    test $(prompts) = 11 && jq -r .text "$HERDR_LOG" | tail -n1 | grep -qx "sent after the acked one"
'

test_expect_success 'no reader before expiresAt: the sender sees the broker'"'"'s word (dead-lettered: expired, its dead letter came home)' '
    new_vhost t0700short &&
    FLEET_VHOST=t0700short mount_fleet shorty peers=nobody message_ttl=2s expire_grace=1s inject=none &&
    echo "anyone?" >shorty/peers/nobody/send &&
    id=$(tail -n1 shorty/leads/shorty/sent | jq -r .msgId) &&
    test "$(jq -r .state shorty/leads/shorty/sent)" = published-unread &&
    wait_for 10 "test \"\$(jq -r .state shorty/leads/shorty/sent)\" = dead-lettered" &&
    jq -r .detail shorty/leads/shorty/sent | grep -q "expired in lead.nobody.inbox" &&
    unmount_fleet shorty
'

test_expect_success 'sent survives a restart of the sender' '
    unmount_fleet alpha &&
    mount_fleet alpha peers=beta inject=none &&
    test "$(jq -r .state alpha/leads/alpha/sent | sort | uniq -c | awk "{print \$2}" | sort | tr "\n" " ")" = "acked confirmed injected uncertain " 
'

# Issue 12: never type into a shell. herdr knows which panes run an agent;
# a pane without one (a plain shell, or an agent that exited) is never a
# target, whatever its label, and herdr's own refusals count as not typed.
SHELLPANE='{"pane_id":"w1:p8","workspace_id":"w1","tab_id":"w1:t1","label":"beta","agent_status":"unknown"}'
GONEPANE='{"pane_id":"w1:p10","workspace_id":"w1","tab_id":"w1:t1","label":"beta","agent":"claude","agent_status":"unknown"}'
CODEXPANE='{"pane_id":"w1:p9","workspace_id":"w1","tab_id":"w1:t1","label":"beta","agent":"codex","agent_status":"idle"}'

test_expect_success 'an agent herdr still lists but whose process is gone (agent_status unknown): nothing typed, status says so' '
    state_with "$AGENT" && herdr_set ".panes[0].agent_status=\"unknown\"" &&
    n=$(prompts) && r=$(refused) &&
    echo "are you still there?" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "grep -qF \"injector: stalled: agent beta (w1:p2) runs no agent herdr knows (agent_status unknown\" beta/leads/beta/status" &&
    k=$(herdr_calls) &&
    test_absent 10 "herdr_looked_again 6 $k" "test \$(prompts) != $n || test \$(refused) != $r" &&
    grep -q $id beta/leads/beta/inbox &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    wait_for 5 "test \$(prompts) = $((n + 1))" &&
    tail -n1 "$HERDR_LOG" | jq -r .text | grep -qx "are you still there?"
'

test_expect_success 'agent_not_running from agent.prompt (the agent left between check and prompt): nothing typed, retried' '
    state_with "$AGENT" && herdr_set ".behaviour.prompt=\"error:agent_not_running\"" &&
    n=$(prompts) && r=$(refused) &&
    echo "just as it exits" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(refused) -ge $((r + 2))" &&
    tail -n1 "$HERDR_LOG.refused" | jq -e ".code == \"agent_not_running\"" >/dev/null &&
    grep -q "herdr refused to type into agent beta (w1:p2) (agent_not_running" beta.log &&
    test $(prompts) = $n &&
    grep -q $id beta/leads/beta/inbox && test "$(state_of $id)" = published &&
    herdr_set "del(.behaviour) | .panes[0].agent_status=\"idle\"" &&
    wait_for 5 "test \$(prompts) = $((n + 1))" &&
    wait_for 10 "test \"\$(state_of $id)\" = confirmed"
'

test_expect_success 'a pane labelled beta that runs a plain shell is never typed into; an agent started there gets it' '
    state_with "$SHELLPANE" &&
    n=$(prompts) && r=$(refused) &&
    echo "touch $TEST_DIR/pwned" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "grep -qF \"injector: stalled: pane labelled beta (w1:p8) runs no agent herdr knows (a shell, or its agent exited): start the agent there\" beta/leads/beta/status" &&
    k=$(herdr_calls) &&
    test_absent 10 "herdr_looked_again 6 $k" "test \$(prompts) != $n || test \$(refused) != $r" &&
    grep -q $id beta/leads/beta/inbox && test "$(state_of $id)" = published &&
    herdr_set ".panes[0].agent=\"claude\" | .panes[0].agent_status=\"idle\"" &&
    wait_for 5 "test \$(prompts) = $((n + 1))" &&
    test "$(tail -n1 "$HERDR_LOG" | jq -r .target)" = w1:p8
'

test_expect_success 'a label match never picks a shell or an exited agent: beside them, the one agent labelled beta gets it' '
    state_with "$SHELLPANE,$GONEPANE,$CODEXPANE" &&
    n=$(prompts) && r=$(refused) &&
    echo "to the agent, not the shell" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "test \$(prompts) = $((n + 1))" &&
    test "$(tail -n1 "$HERDR_LOG" | jq -r .target)" = w1:p9 &&
    tail -n +$((n + 1)) "$HERDR_LOG" | jq -r .target >targets &&
    test "$(cat targets)" = w1:p9 &&
    test_absent 10 "test \"\$(state_of $id)\" = confirmed" "test \$(prompts) != $((n + 1)) || test \$(refused) != $r"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
