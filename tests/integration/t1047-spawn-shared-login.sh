#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Spawn on a shared login (issue 30): alpha and beta mount with the same
# broker login, one that may configure (make run's default, guest), on a
# vhost where nothing was made beforehand: no `fleetfs declare` step. Each
# mount makes its own mailbox and, now, its own control queue and that
# queue's binding to fleet.control, so alpha's hosts/beta/spawn reaches
# beta: ready, the brief typed once, then stop (t1040's and t1046's
# checks). What counts: the broker's own list of bindings, alpha's
# hosts/beta/spawns, tmux's own list of windows, and what the stand-in
# agent (tests/tools/fake-agent) records as typed into it.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/spawn.sh"
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
broker_use_shared
FLEET_VHOST=t1047
new_vhost $FLEET_VHOST
AGENT=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/fake-agent
case ${FLEETFS_BUILD:-build} in /*) AGENT=$FLEETFS_BUILD/tools/fake-agent ;; esac

tmux_private

bindings() { rmqctl list_bindings -q -p $FLEET_VHOST source_name destination_name routing_key; }

test_expect_success 'alpha and beta on one login, nothing declared: beta binds its own control queue' '
    bindings >before &&
    ! grep -q "control" before &&
    mkdir -p work &&
    printf "[profile worker]\ncommand = %s %s\ndir_root = %s\nmax = 1\nready_timeout = 8s\nsandbox = none\n" \
        "$AGENT" "$TEST_DIR/typed.w1" "$TEST_DIR/work" >beta.conf &&
    tmux -f /dev/null new-session -d -s far -x 200 -y 50 "sleep 100000" &&
    mount_fleet alpha peers=beta:gamma heartbeat=1s inject=none &&
    mount_fleet beta peers=alpha heartbeat=1s inject=tmux inject_commands=fake-agent \
        spawn_from=alpha config="$TEST_DIR/beta.conf" &&
    wait_for 15 "bindings | grep -q \"^fleet\.control	control\.beta	beta\$\"" &&
    bindings | grep "^fleet\.control	control\.alpha	alpha$" &&
    ! grep "may not configure fleet.control" alpha.log beta.log &&
    wait_for 20 "grep -q \"^profiles: worker$\" alpha/hosts/beta/status"
'

# gamma is listed but never mounted, and nobody ran `fleetfs declare gamma`
test_expect_success 'a spawn to a host whose control queue nobody made: ENXIO, and which command makes it' '
    echo "{\"profile\":\"worker\",\"name\":\"g1\"}" >g1.json &&
    test_must_fail bash -c "cat g1.json >alpha/hosts/gamma/spawn" 2>err &&
    grep "No such device or address" err &&
    jq -r "select(.name == \"g1\") | .state" alpha/hosts/gamma/spawns | grep -x failed &&
    jq -r "select(.name == \"g1\") | .detail" alpha/hosts/gamma/spawns | grep "fleetfs declare gamma" &&
    grep "spawn: hosts/gamma/spawn: request .* not sent: .*fleetfs declare gamma" alpha.log
'

test_expect_success 'alpha spawns w1 on beta: ready, its pane marked, the brief typed once' '
    spawn_tmux_ready beta worker w1 "count the tests in t/" typed.w1 &&
    test $(spawn_marked) = 1
'

test_expect_success 'a message from alpha reaches w1 after its brief' '
    echo "and the lint warnings" >alpha/agents/w1@beta/send &&
    wait_for 15 "grep -q \"and the lint warnings\" typed.w1" &&
    test $(spawn_briefs typed.w1) = 1
'

test_expect_success 'stop: the pane closed, w1 gone from alpha'"'"'s agents' '
    spawn_tmux_stop beta w1 &&
    test $(spawn_marked) = 0
'

test_done
