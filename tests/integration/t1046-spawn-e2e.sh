#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cross-host spawn end to end (SPEC section 11, issue 17): three hosts in
# their own network namespaces (tests/netns.sh). The lead on alpha writes
# hosts/<h>/spawn; beta starts the agent in tmux (tests/tools/fake-agent,
# which records what is typed into it), gamma through its own fake herdr.
# What counts: alpha's hosts/<h>/spawns and agents/, tmux's own lists of
# windows, the fake agent's record, the fake herdr's state and prompt log,
# and presence on alpha (the agent gone from agents/ after a stop).
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: network namespaces; t1045 (requester) and t1040/t1041 (far host) run under ASan" ;; esac
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/netns.sh"
. "$FLEET_ROOT/tests/spawn.sh"
netns_require
netns_setup || { echo "# netns_setup failed" >&2; exit 1; }
FLEET_VHOST=t1046
new_vhost $FLEET_VHOST
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
AGENT=$BIN/tools/fake-agent
FAKE_HERDR=$BIN/fake-herdr

tmux_private

hpanes() { jq '.panes | length' "$TEST_DIR/gamma.herdr.json"; }

test_expect_success 'alpha (the lead), beta (tmux, a worker profile) and gamma (herdr) on their own links' '
    netns_host alpha && netns_host beta && netns_host gamma &&
    for h in beta gamma; do
        FLEET_BROKER_URI=$(broker_uri $FLEET_VHOST) "$FLEETFS" declare $h >/dev/null || exit 1
    done &&
    mkdir -p work &&
    printf "[profile worker]\ncommand = %s %s\ndir_root = %s\nmax = 2\nready_timeout = 8s\nsandbox = none\n" \
        "$AGENT" "$TEST_DIR/typed.w1" "$TEST_DIR/work" >beta.conf &&
    printf "[profile reviewer]\nkind = claude\nready_timeout = 5s\nsandbox = none\n" >gamma.conf &&
    tmux -f /dev/null new-session -d -s far -x 200 -y 50 "sleep 100000" &&
    echo "{\"version\":\"0.8.2\",\"protocol\":20,\"panes\":[],\"busy_ms\":300,\"after_prompt_status\":\"working\"}" >gamma.herdr.json &&
    { "$FAKE_HERDR" --socket "$TEST_DIR/gamma.herdr.sock" --state "$TEST_DIR/gamma.herdr.json" \
        --log "$TEST_DIR/gamma.prompts" </dev/null >>gamma.fake-herdr.out 2>&1 & echo $! >.harness/pid.herdr.gamma; } &&
    at_exit "kill \$(cat $TEST_DIR/.harness/pid.herdr.gamma 2>/dev/null) 2>/dev/null" &&
    wait_for 5 "test -S gamma.herdr.sock" &&
    host_mount alpha peers=beta:gamma heartbeat=1s inject=none &&
    host_mount beta peers=alpha heartbeat=1s inject=tmux inject_commands=fake-agent spawn_from=alpha config="$TEST_DIR/beta.conf" &&
    HERDR_SOCKET_PATH=$TEST_DIR/gamma.herdr.sock host_mount gamma peers=alpha heartbeat=1s inject=herdr spawn_from=alpha config="$TEST_DIR/gamma.conf" &&
    wait_for 20 "grep -q \"^profiles: worker$\" alpha/hosts/beta/status && grep -q \"^profiles: reviewer$\" alpha/hosts/gamma/status"
'

test_expect_success 'tmux: beta starts w1, ready; listed on alpha; the brief typed once' '
    spawn_tmux_ready beta worker w1 "count the tests in t/" typed.w1 &&
    test $(spawn_marked) = 1 &&
    wait_for 10 "grep -q \"^agents: w1@beta$\" alpha/hosts/beta/status"
'

test_expect_success 'a message from alpha is typed into w1 after its brief' '
    echo "and the lint warnings" >alpha/agents/w1@beta/send &&
    wait_for 15 "grep -q \"and the lint warnings\" typed.w1" &&
    grep -q "fleet message from alpha" typed.w1 &&
    test $(spawn_briefs typed.w1) = 1
'

test_expect_success 'a refusal comes back with its reason: an unknown profile, a dir outside dir_root' '
    echo "{\"profile\":\"nosuch\",\"name\":\"w2\"}" >alpha/hosts/beta/spawn &&
    echo "{\"profile\":\"worker\",\"name\":\"w3\",\"dir\":\"/etc\"}" >alpha/hosts/beta/spawn &&
    wait_for 20 "test \"\$(spawn_state beta w2)\" = refused && test \"\$(spawn_state beta w3)\" = refused" &&
    spawn_detail beta w2 | grep -qi "profile" &&
    spawn_detail beta w3 | grep -q "dir" &&
    test $(spawn_marked) = 1 && test ! -d alpha/agents/w2@beta
'

test_expect_success 'stop: the pane closed, and presence on alpha says w1 left' '
    spawn_tmux_stop beta w1 &&
    test $(spawn_marked) = 0 &&
    wait_for 10 "grep -q \"^agents: none$\" alpha/hosts/beta/status"
'

test_expect_success 'herdr: gamma starts r1 (agent.start with its kind), the brief prompted once, a message, stop' '
    echo "{\"profile\":\"reviewer\",\"name\":\"r1\",\"brief\":\"review the parser\"}" >alpha/hosts/gamma/spawn &&
    wait_for 30 "test \"\$(spawn_state gamma r1)\" != requested" &&
    test "$(spawn_state gamma r1)" = ready &&
    test $(hpanes) = 1 &&
    jq -e ".panes[0].name == \"r1\"" gamma.herdr.json >/dev/null &&
    jq -ce "select(.name == \"r1\") | .kind == \"claude\"" gamma.prompts.starts >/dev/null &&
    wait_for 15 "test -d alpha/agents/r1@gamma" &&
    wait_for 10 "test \$(jq -r .text gamma.prompts | grep -c \"review the parser\") = 1" &&
    echo "and the lexer" >alpha/agents/r1@gamma/send &&
    wait_for 15 "jq -r .text gamma.prompts | grep -q \"and the lexer\"" &&
    test $(jq -r .text gamma.prompts | grep -c "review the parser") = 1 &&
    echo r1@gamma >alpha/hosts/gamma/stop &&
    wait_for 20 "test \"\$(spawn_state gamma r1 stop)\" = stopped" &&
    test $(hpanes) = 0 &&
    wait_for 15 "test ! -d alpha/agents/r1@gamma"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
