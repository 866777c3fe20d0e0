#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Several entities typed into tmux (inject=tmux, SPEC 10): beta's lead and
# its agents w1 and w2 each run a stand-in agent (tests/tools/fake-agent,
# which records every byte it gets) in their own pane, titled like the
# entity. Each message reaches its own pane only, counted from what each
# pane's program recorded. A missing pane stalls that agent alone: the
# others go on, and the message is delivered once the pane is back.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
broker_use_shared
FLEET_VHOST=t1030
new_vhost $FLEET_VHOST

tmux_private

AGENT=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/fake-agent
[[ ${FLEETFS_BUILD:-} == /* ]] && AGENT=$FLEETFS_BUILD/tools/fake-agent
test -x "$AGENT" || test_skip_all "no $AGENT: build it with make"

# headers recorded by the program in entity E's pane
heard() { [[ -f $TEST_DIR/typed.$1 ]] && grep -o "fleet message from [^,]*, msgId [0-9a-f]*" "$TEST_DIR/typed.$1" || true; }
nheard() { heard "$1" | grep -c . || true; }
# a pane for entity E (title E) running the stand-in agent
pane_for() {
  tmux new-window -d -t lead -n "$1" "$AGENT $TEST_DIR/typed.$1" &&
    tmux select-pane -t "lead:$1" -T "$1"
}

test_expect_success 'three panes titled beta, w1 and w2; beta mounts with agents w1 and w2, inject=tmux' '
    tmux -f /dev/null new-session -d -s lead -n beta -x 200 -y 50 "$AGENT $TEST_DIR/typed.beta" &&
    tmux select-pane -t lead:beta -T beta &&
    pane_for w1 && pane_for w2 &&
    tmux list-panes -a -F "#{pane_title}" | sort >titles &&
    printf "beta\nw1\nw2\n" >want && test_cmp want titles &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=tmux inject_commands=fake-agent agents=w1:w2 &&
    wait_for 20 "test -d alpha/agents/w1@beta && test -d alpha/agents/w2@beta"
'

test_expect_success 'one message to each: each typed into its own pane, once' '
    echo "for the lead" >alpha/peers/beta/send &&
    echo "for w1" >alpha/agents/w1@beta/send &&
    echo "for w2" >alpha/agents/w2@beta/send &&
    for e in beta w1 w2; do
        wait_for 10 "grep -q \"for $e\" $TEST_DIR/typed.$e 2>/dev/null || grep -q \"for the lead\" $TEST_DIR/typed.$e 2>/dev/null" || exit 1
    done &&
    sleep 1 &&
    grep -q "for the lead" $TEST_DIR/typed.beta && ! grep -q "for w" $TEST_DIR/typed.beta &&
    grep -q "for w1" $TEST_DIR/typed.w1 && ! grep -q "for w2\|for the lead" $TEST_DIR/typed.w1 &&
    grep -q "for w2" $TEST_DIR/typed.w2 && ! grep -q "for w1\|for the lead" $TEST_DIR/typed.w2 &&
    test $(nheard beta) = 1 && test $(nheard w1) = 1 && test $(nheard w2) = 1 &&
    grep -q "reply: echo .\.\.\.. > $TEST_DIR/beta/agents/w1@beta/reply/" $TEST_DIR/typed.w1
'

test_expect_success 'w2'"'"'s pane gone: w2 stalls alone (its status says why), the lead and w1 still get theirs' '
    tmux kill-window -t lead:w2 &&
    echo "w2, are you there?" >alpha/agents/w2@beta/send &&
    wait_for 10 "grep -q \"^injector: stalled: .*w2\" beta/agents/w2@beta/status" &&
    grep -q "^held: 1$" beta/agents/w2@beta/status &&
    echo "lead, go on" >alpha/peers/beta/send &&
    echo "w1, go on" >alpha/agents/w1@beta/send &&
    wait_for 10 "grep -q \"lead, go on\" $TEST_DIR/typed.beta && grep -q \"w1, go on\" $TEST_DIR/typed.w1" &&
    test $(nheard w2) = 1 &&
    ! grep -q "stalled" <(sed -n "s/^injector: //p" beta/leads/beta/status)
'

test_expect_success 'the pane back: w2 gets the waiting message, once' '
    n=$(nheard w2) &&
    pane_for w2 &&
    wait_for 15 "grep -q \"are you there\" $TEST_DIR/typed.w2" &&
    sleep 1 && test $(nheard w2) = $((n + 1)) && test $(grep -c "are you there" $TEST_DIR/typed.w2) = 1 &&
    wait_for 10 "grep -q \"^held: 0$\" beta/agents/w2@beta/status"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
