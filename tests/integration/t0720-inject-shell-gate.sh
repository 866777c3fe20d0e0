#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Never type a message into a shell (issue 12). With inject=tmux a message
# is typed only into a pane whose foreground program is an agent on
# inject_commands: a pane titled beta that runs bash — the agent exited,
# or the title is on the wrong pane — gets nothing (a message body typed
# into bash would run as a command: here `touch pwned`), status and log say
# why and what to do, the message waits in inbox, and it is delivered once
# an agent runs there again. Every way a pane here ends up at a shell is
# its own test: bash from the start, the agent suspended (Ctrl-Z), the
# agent exiting back to its shell, a launcher script whose agent exits, a
# shell started under an agent's name, and a pane whose program exited
# (nothing runs). Receipts: t0740.
#
# The agent is tests/tools/fake-agent (see t0710): a compiled program, so
# tmux shows its own name; a copy named other-tool stands in for a program
# that is not on the list.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
AGENT=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/fake-agent
test -x "$AGENT" || test_skip_all "no $AGENT: build it with make"
broker_use_shared
FLEET_VHOST=t0720
new_vhost $FLEET_VHOST

tmux_private
mkdir -p bin

# every tmux command fleetfs runs goes through this wrapper (as in t0710),
# which counts the list-panes it does once per look at the panes: a test
# waits for fleetfs to have looked again before it asserts that nothing
# was typed
REAL_TMUX=$(command -v tmux)
cat >"$TEST_DIR/bin/tmux" <<EOF
#!/bin/sh
case " \$* " in *" list-panes "*) echo x >>"$TEST_DIR/tmux-looks" ;; esac
exec "$REAL_TMUX" "\$@"
EOF
chmod +x "$TEST_DIR/bin/tmux"
export PATH=$TEST_DIR/bin:$PATH
looks() { if [[ -f $TEST_DIR/tmux-looks ]]; then wc -l <"$TEST_DIR/tmux-looks"; else echo 0; fi; }
# looked_again N BASE: fleetfs listed the panes N more times than BASE
looked_again() { (( $(looks) >= $2 + $1 )); }

cp "$AGENT" bin/fake-agent
cp "$AGENT" bin/other-tool
# an interactive bash that leaves no history behind
SHELL_CMD="env HISTFILE=/dev/null PS1='shell-prompt> ' bash --norc --noprofile"
# a launcher as people write them: the agent (not exec'd), then a shell
cat >bin/launch-agent <<EOF
#!/usr/bin/env bash
"$TEST_DIR/bin/fake-agent" "\$1" "\$2"
exec $SHELL_CMD
EOF
# a shell that calls itself fake-agent (argv[0]); the kernel still says bash
cat >bin/disguised <<'EOF'
#!/usr/bin/env bash
export HISTFILE=/dev/null PS1='shell-prompt> '
exec -a fake-agent bash --norc --noprofile
EOF
chmod +x bin/launch-agent bin/disguised

state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent; }
last_id() { tail -n1 alpha/leads/alpha/sent | jq -r .msgId; }
inj() { sed -n 's/^injector: //p' beta/leads/beta/status; }
screen() { tmux capture-pane -p -J -S - -t "$1"; }
# what a user sees with the command doc/injection.md gives
fg_cmd() { tmux display-message -p -t "$1" '#{pane_current_command}'; }
shell_words() {
  echo "stalled: tmux pane $1 titled beta runs $2, not an agent: start the agent there, or list its command in inject_commands"
}
P() { cat "$TEST_DIR/pane$1"; }
# what the agent recorded, without the paste markers tmux put around it
unbracket() { sed 's/\^\[\[200~//; s/\^\[\[201~$//' "$1"; }

test_expect_success 'a pane titled beta runs bash; beta mounts with inject=tmux' '
    tmux -f /dev/null new-session -d -s lead -x 200 -y 50 "$SHELL_CMD" &&
    tmux display-message -p -t lead "#{pane_id}" >pane1 &&
    tmux select-pane -t "$(P 1)" -T beta &&
    wait_for 5 "test \"\$(fg_cmd \$(P 1))\" = bash" &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent &&
    wait_for 5 "inj | grep -q \"^ready: nothing to deliver (backend tmux)\""
'

test_expect_success 'nothing is typed into the shell; status and log say why; the message stays in inbox' '
    echo "touch $TEST_DIR/pwned" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"\$(shell_words \$(P 1) bash)\"" &&
    grep -qxF "injector: $(shell_words $(P 1) bash)" beta/status &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test -e pwned" &&
    screen "$(P 1)" >screen &&
    ! grep -F -e "$id" -e "fleet message" -e "touch" -e "command not found" screen &&
    grep -q "$id" beta/leads/beta/inbox &&
    test "$(state_of $id)" = published &&
    test "$(grep -c "inject: stalled: tmux pane $(P 1) titled beta runs bash, not an agent" beta.log)" = 1
'

test_expect_success 'the agent started in that pane gets the message, typed once' '
    id=$(last_id) &&
    tmux send-keys -t "$(P 1)" "$TEST_DIR/bin/fake-agent $TEST_DIR/typed $TEST_DIR/agent.pid" Enter &&
    wait_for 10 "grep -q \"msgId $id\" typed" &&
    unbracket typed | grep -qx "touch $TEST_DIR/pwned" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected" &&
    echo "a second one" >alpha/peers/beta/send &&
    test_absent 10 "unbracket typed | grep -qx \"a second one\"" \
        "test \$(grep -c \"msgId $id\" typed) != 1" &&
    test ! -e pwned &&
    wait_for 5 "test ! -s beta/leads/beta/inbox" &&
    wait_for 5 "inj | grep -q \"^ready\""
'

test_expect_success 'the agent suspended (Ctrl-Z): its shell is in front, nothing typed; fg delivers it' '
    kill -TSTP "$(cat agent.pid)" &&
    wait_for 5 "test \"\$(fg_cmd \$(P 1))\" = bash" &&
    echo "touch $TEST_DIR/pwned-suspended" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"\$(shell_words \$(P 1) bash)\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test -e pwned-suspended || grep -q \"msgId $id\" typed" &&
    grep -q "$id" beta/leads/beta/inbox &&
    tmux send-keys -t "$(P 1)" "fg" Enter &&
    wait_for 5 "test \"\$(fg_cmd \$(P 1))\" = fake-agent" &&
    wait_for 10 "grep -q \"msgId $id\" typed" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected" &&
    test ! -e pwned-suspended
'

test_expect_success 'the agent exits back to its shell: the next message is not typed' '
    kill "$(cat agent.pid)" &&
    wait_for 5 "test \"\$(fg_cmd \$(P 1))\" = bash" &&
    n=$(wc -l <typed) &&
    echo "touch $TEST_DIR/pwned2" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"\$(shell_words \$(P 1) bash)\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test -e pwned2 || test \$(wc -l <typed) != $n" &&
    screen "$(P 1)" >screen &&
    ! grep -F -e "$id" -e "pwned2" -e "command not found" screen &&
    grep -q "$id" beta/leads/beta/inbox &&
    test "$(state_of $id)" = published
'

test_expect_success 'a program not on inject_commands: stall, nothing typed; listing it delivers' '
    id=$(last_id) &&
    tmux send-keys -t "$(P 1)" "$TEST_DIR/bin/other-tool $TEST_DIR/typed-other" Enter &&
    wait_for 5 "test \"\$(fg_cmd \$(P 1))\" = other-tool" &&
    wait_for 5 "inj | grep -qxF \"stalled: tmux pane $(P 1) titled beta runs other-tool, which is not in inject_commands: start the agent there, or add other-tool to inject_commands if it is one\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test -s typed-other" &&
    grep -q "$id" beta/leads/beta/inbox &&
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent:other-tool &&
    wait_for 10 "grep -q \"msgId $id\" typed-other" &&
    unbracket typed-other | grep -qx "touch $TEST_DIR/pwned2" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected" &&
    test ! -e pwned2
'

test_expect_success 'a launcher script waiting for its agent is looked through; once the agent exits its shell gets nothing' '
    tmux select-pane -t "$(P 1)" -T spare &&
    tmux split-window -d -P -F "#{pane_id}" -t "$(P 1)" "$TEST_DIR/bin/launch-agent $TEST_DIR/typed2 $TEST_DIR/agent2.pid" >pane2 &&
    tmux select-pane -t "$(P 2)" -T beta &&
    wait_for 5 "test -s agent2.pid" &&
    test "$(fg_cmd $(P 2))" = bash &&
    echo "through the launcher" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "unbracket typed2 | grep -qx \"through the launcher\"" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected" &&
    kill "$(cat agent2.pid)" &&
    wait_for 5 "screen \$(P 2) | grep -q \"^shell-prompt>\"" &&
    echo "touch $TEST_DIR/pwned3" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"\$(shell_words \$(P 2) bash)\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test -e pwned3 || grep -q pwned3 typed2" &&
    ! screen "$(P 2)" | grep -F -e "$id" -e pwned3 &&
    grep -q "$id" beta/leads/beta/inbox
'

test_expect_success 'a shell started under an agent name (exec -a fake-agent bash) is still a shell' '
    tmux select-pane -t "$(P 2)" -T spare2 &&
    tmux split-window -d -P -F "#{pane_id}" -t "$(P 1)" "$TEST_DIR/bin/disguised" >pane3 &&
    tmux select-pane -t "$(P 3)" -T beta &&
    wait_for 5 "test \"\$(fg_cmd \$(P 3))\" = fake-agent" &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"\$(shell_words \$(P 3) bash)\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test -e pwned3" &&
    ! screen "$(P 3)" | grep -F -e "$id" -e pwned3 &&
    grep -q "$id" beta/leads/beta/inbox
'

test_expect_success 'a pane whose agent exited and stays open (remain-on-exit) runs nothing: stall' '
    tmux select-pane -t "$(P 3)" -T spare3 &&
    tmux split-window -d -P -F "#{pane_id}" -t "$(P 1)" "$TEST_DIR/bin/fake-agent $TEST_DIR/typed4 $TEST_DIR/agent4.pid" >pane4 &&
    tmux set-option -p -t "$(P 4)" remain-on-exit on &&
    tmux select-pane -t "$(P 4)" -T beta &&
    id=$(last_id) &&
    wait_for 10 "unbracket typed4 | grep -qx \"touch $TEST_DIR/pwned3\"" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected" &&
    kill "$(cat agent4.pid)" &&
    wait_for 5 "test \"\$(tmux display-message -p -t \$(P 4) \"#{pane_dead}\")\" = 1" &&
    echo "into a dead pane" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"stalled: tmux pane $(P 4) titled beta runs nothing (its program exited; the pane stays open): start the agent there\"" &&
    grep -q "$id" beta/leads/beta/inbox &&
    test "$(state_of $id)" = published
'

test_expect_success 'inject_target naming a pane that runs a shell: nothing typed, status says so' '
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent:other-tool "inject_target=$(P 2)" &&
    echo "touch $TEST_DIR/pwned5" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"stalled: tmux pane $(P 2) (inject_target $(P 2)) runs bash, not an agent: start the agent there, or list its command in inject_commands\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test -e pwned5" &&
    ! screen "$(P 2)" | grep -F -e pwned5 -e "dead pane" &&
    grep -q "$id" beta/leads/beta/inbox
'

test_expect_success 'inject_commands cannot list a shell; the default list is in --help' '
    test_must_fail "$FLEETFS" m -f -o coord_id=x,inject_commands=claude:bash 2>err &&
    grep -qF "inject_commands: '"'"'bash'"'"' is a shell" err &&
    test_must_fail "$FLEETFS" m -f -o coord_id=x,inject_commands=claude:/bin/x 2>err &&
    grep -q "^fleetfs: inject_commands: expected program names" err &&
    "$FLEETFS" --help >help 2>&1 &&
    grep -q "inject_commands .*(default: claude:codex:aider:gemini" help
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
