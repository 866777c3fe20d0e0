#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Typing arrivals into a real tmux pane (inject=tmux): the pane is found by
# its title (or -o inject_target), the text arrives as one bracketed paste
# and Enter, control bytes never reach the terminal, a pane in copy mode
# waits, a missing or ambiguous pane stalls loudly and recovers, and the
# sender sees injected (tmux knows no agent status, so never confirmed).
#
# The lead's pane runs tests/tools/fake-agent, a stand-in for an agent (on
# inject_commands: fleetfs never types into a shell, see t0720): the
# terminal in non-canonical mode with no signals and no echo (so every byte
# reaches the program as it arrives), bracketed paste requested like an
# agent's TUI does, and each byte shown visibly as `cat -v` does, both in
# the pane and in a file.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
broker_use_shared
FLEET_VHOST=t0710
new_vhost $FLEET_VHOST

tmux_private

# every tmux command fleetfs runs goes through this wrapper, which counts
# the list-panes it does once per look at the panes: a test waits for
# fleetfs to have looked again before it asserts that nothing was typed
REAL_TMUX=$(command -v tmux)
mkdir -p "$TEST_DIR/bin"
cat >"$TEST_DIR/bin/tmux" <<EOF
#!/bin/sh
case " \$* " in *" list-panes "*) echo x >>"$TEST_DIR/tmux-looks" ;; esac
case " \$* " in *" load-buffer "*) echo "\$*" >>"$TEST_DIR/tmux-loads" ;; esac
exec "$REAL_TMUX" "\$@"
EOF
chmod +x "$TEST_DIR/bin/tmux"
export PATH=$TEST_DIR/bin:$PATH
looks() { if [[ -f $TEST_DIR/tmux-looks ]]; then wc -l <"$TEST_DIR/tmux-looks"; else echo 0; fi; }
# looked_again N BASE: fleetfs listed the panes N more times than BASE
looked_again() { (( $(looks) >= $2 + $1 )); }

AGENT=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/fake-agent
[[ ${FLEETFS_BUILD:-} == /* ]] && AGENT=$FLEETFS_BUILD/tools/fake-agent
test -x "$AGENT" || test_skip_all "no $AGENT: build it with make"

state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent; }
last_id() { tail -n1 alpha/leads/alpha/sent | jq -r .msgId; }
inj() { sed -n 's/^injector: //p' beta/leads/beta/status; }
# the recorded text without the paste markers tmux added around each paste
unbracket() { sed 's/\^\[\[200~//; s/\^\[\[201~$//' "$1"; }
# the lines recorded for the message with msgId $2 in file $1: the header
# and what follows up to the next header
msg_lines() { unbracket "$1" | awk -v id="$2" '/^\[fleet message from /{on = index($0, id) > 0} on'; }
lines_of() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }
P1() { cat "$TEST_DIR/pane1"; }
P2() { cat "$TEST_DIR/pane2"; }

test_expect_success 'a tmux pane titled beta runs the lead; alpha mounts without injection, beta with tmux' '
    tmux -f /dev/null new-session -d -s lead -x 200 -y 50 "$AGENT $TEST_DIR/typed" &&
    tmux display-message -p -t lead "#{pane_id}" >pane1 &&
    tmux select-pane -t "$(P1)" -T beta &&
    tmux list-panes -a -F "#{pane_id} #{pane_title}" >panes && grep -qx "$(P1) beta" panes &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent &&
    wait_for 5 "inj | grep -q \"^ready: nothing to deliver (backend tmux)\""
'

test_expect_success 'the message appears in the pane and on its terminal: header naming alpha and the msgId, then the body' '
    echo "please review the parser" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "grep -q \"please review the parser\" typed" &&
    { fleet_header alpha "$id" beta && echo "please review the parser"; } >want &&
    msg_lines typed "$id" >got && test_cmp want got &&
    tmux capture-pane -p -J -S - -t "$(P1)" >screen &&
    grep -F "$(fleet_header alpha "$id" beta)" screen &&
    grep -F "please review the parser" screen
'

test_expect_success 'it arrived as one bracketed paste (then Enter), not as loose keystrokes' '
    test "$(grep -c "^\^\[\[200~" typed)" = 1 &&
    test "$(grep -c "\^\[\[201~$" typed)" = 1 &&
    grep -q "^\^\[\[200~\[fleet message from alpha" typed &&
    grep -q "^please review the parser\^\[\[201~$" typed
'

test_expect_success 'the text reaches tmux on its stdin (load-buffer -), never through a file' '
    test -s "$TEST_DIR/tmux-loads" &&
    cat "$TEST_DIR/tmux-loads" &&
    ! grep -v -- " -$" "$TEST_DIR/tmux-loads" &&
    ! find "$TEST_DIR/state/beta" -name "*paste*" | grep -q .
'

test_expect_success 'a pane found by its title is warned about once, with the pane id to pin' '
    grep "because its title is beta" beta.log >warned &&
    test $(wc -l <warned) = 1 &&
    id=$(tmux display-message -p -t lead "#{pane_id}") &&
    grep -q "typing into tmux pane $id because its title is beta.*-o inject_target=$id" warned
'

test_expect_success 'alpha sees injected (tmux cannot tell a turn started: never confirmed); beta consumed it' '
    id=$(last_id) && echo $id >first.id &&
    wait_for 10 "test \"\$(state_of $id)\" = injected" &&
    grep "$id" alpha/leads/alpha/sent | jq -e ".detail | startswith(\"typed into tmux pane titled beta\")" &&
    grep "$id" beta/leads/beta/history | jq -e ".consumed == \"injected\"" &&
    test ! -s beta/leads/beta/inbox &&
    grep -q "^injected: 1$" beta/status
'

test_expect_success 'escape sequences, paste terminators, BEL, C1 and DEL never reach the terminal' '
    /usr/bin/printf "evil\\033[201~\\033]0;pwned\\007 bell\\007 del\\177 csi\\302\\233 c1\\302\\205 \\033[2J\\033Pdcs\\033\\\\ tab\\tnew\\nline end\\r\\n" >evil &&
    dd of=alpha/peers/beta/send bs=64k status=none <evil &&
    id=$(last_id) &&
    wait_for 10 "grep -q \"^line end\" typed" &&
    msg_lines typed "$id" >got && cat -A got &&
    ! grep -F "^[" got && ! grep -F "^G" got && ! grep -F "^?" got && ! grep -F "M-" got &&
    ! grep -q pwned got && ! grep -q "2J" got && ! grep -q "201~" got &&
    test "$(grep -c "\^\[\[201~$" typed)" = 2 &&
    sed -n 2p got | grep -q "^evil bell del csi" &&
    grep -q "tab	new" got && grep -qx "line end" got &&
    tmux capture-pane -p -J -S - -t "$(P1)" | grep -q "^evil bell del csi" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected"
'

# beta handles one message at a time and sends its receipts in order: the
# receipt for this later message came after any "confirmed" for the first
test_expect_success 'the first message stayed injected: never confirmed (tmux knows no agent status)' '
    test "$(state_of $(cat first.id))" = injected
'

test_expect_success 'a pane in copy mode gets nothing; leaving copy mode delivers it' '
    tmux copy-mode -t "$(P1)" &&
    n=$(lines_of typed) &&
    echo "while you scroll" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -q \"^waiting: tmux pane titled beta ($(P1)) is in copy mode\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test \$(lines_of typed) != $n" &&
    grep -q "$id" beta/leads/beta/inbox &&
    tmux send-keys -t "$(P1)" -X cancel &&
    wait_for 10 "grep -q \"while you scroll\" typed" &&
    msg_lines typed "$id" | grep -qx "while you scroll" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected"
'

test_expect_success 'no pane titled beta: nothing typed, status says how to fix it; titling the pane delivers it' '
    tmux select-pane -t "$(P1)" -T something-else &&
    n=$(lines_of typed) &&
    echo "anyone there?" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"stalled: no tmux pane titled beta; set its title (tmux select-pane -T beta) or -o inject_target\"" &&
    grep -q "^injector: stalled: no tmux pane titled beta" beta/status &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test \$(lines_of typed) != $n" &&
    grep -q "$id" beta/leads/beta/inbox &&
    test "$(state_of $id)" = published &&
    tmux select-pane -t "$(P1)" -T beta &&
    wait_for 10 "grep -q \"anyone there?\" typed" &&
    msg_lines typed "$id" | grep -qx "anyone there?" &&
    wait_for 5 "inj | grep -q \"^ready\""
'

test_expect_success 'two panes titled beta: stall, never guess; renaming one delivers to the other' '
    tmux split-window -d -P -F "#{pane_id}" -t "$(P1)" "$AGENT $TEST_DIR/typed2" >pane2 &&
    tmux select-pane -t "$(P2)" -T beta &&
    n=$(lines_of typed) &&
    echo "which one of you?" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 5 "inj | grep -qxF \"stalled: 2 tmux panes titled beta; rename one or set -o inject_target\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "test \$(lines_of typed) != $n || test \$(lines_of typed2) != 0" &&
    tmux select-pane -t "$(P2)" -T spare &&
    wait_for 10 "grep -q \"which one of you?\" typed" &&
    test "$(lines_of typed2)" = 0 &&
    wait_for 10 "test \"\$(state_of $id)\" = injected"
'

test_expect_success 'an inject_target naming no pane: nothing typed anywhere, status says so' '
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent inject_target=%999 &&
    echo "to nowhere yet" >alpha/peers/beta/send &&
    wait_for 5 "inj | grep -q \"^stalled: tmux target .%999. names no pane.*fix -o inject_target\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "grep -q \"to nowhere yet\" typed typed2" &&
    grep -q "to nowhere yet" beta/leads/beta/inbox
'

test_expect_success 'inject_target=%N types into that pane even though another is titled beta' '
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent "inject_target=$(P2)" &&
    echo "straight to the spare pane" >alpha/peers/beta/send &&
    id=$(last_id) &&
    wait_for 10 "grep -q \"straight to the spare pane\" typed2" &&
    msg_lines typed2 "$id" | grep -qx "straight to the spare pane" &&
    ! grep -q "spare pane" typed &&
    tmux capture-pane -p -J -S - -t "$(P2)" | grep -F "$(fleet_header alpha "$id" beta)" &&
    wait_for 10 "test \"\$(state_of $id)\" = injected" &&
    grep "$id" alpha/leads/alpha/sent | jq -e ".detail == \"typed into tmux pane $(P2) ($(P2))\""
'

test_expect_success 'an unwritable journal: nothing is typed, status says why, and it recovers' '
    unmount_fleet beta &&
    rm -f state/beta/inject.journal && mkdir state/beta/inject.journal &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent "inject_target=$(P2)" &&
    echo "only with a journal" >alpha/peers/beta/send &&
    wait_for 5 "inj | grep -q \"^stalled: cannot record deliveries in .*inject.journal\"" &&
    k=$(looks) &&
    test_absent 10 "looked_again 2 $k" "grep -q \"only with a journal\" typed typed2" &&
    grep -q "only with a journal" beta/leads/beta/inbox &&
    unmount_fleet beta && rmdir state/beta/inject.journal &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent "inject_target=$(P2)" &&
    wait_for 10 "grep -q \"only with a journal\" typed2"
'

# A stopped tmux server: every tmux client waits on it for ever. Each tmux
# command fleetfs runs is killed after 5 s, so the injector says why and
# the unmount returns while the server is still stopped (30 s: only a
# bound that tells a hang).
test_expect_success 'a stopped tmux server holds neither the injector nor the unmount' '
    tpid=$(tmux display-message -p "#{pid}") &&
    at_exit "kill -CONT $tpid 2>/dev/null; true" &&
    kill -STOP "$tpid" &&
    echo "to a stopped tmux" >alpha/peers/beta/send &&
    wait_for 30 "{ inj; cat beta.log; } | grep -q \"did not finish within 5 s\"" &&
    timeout 30 sh -c "until fusermount3 -u beta 2>/dev/null; do sleep 0.3; done" &&
    wait_for 30 "fleet_gone beta" &&
    kill -CONT "$tpid" &&
    ! grep -q "to a stopped tmux" typed
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
