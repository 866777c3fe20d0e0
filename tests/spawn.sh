# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/spawn.sh — cross-host spawn checks shared by the spawn tests; source
# after lib.sh and fleet.sh, with tmux_private when the far host types through
# tmux. SPAWN_FROM (default alpha) is the requesting lead's mount; what counts
# is its hosts/<h>/spawns, tmux's own lists and the stand-in agent's record
# (tests/tools/fake-agent), never the far daemon's word.
#
#   spawn_state HOST NAME [REQ]   the state of SPAWN_FROM's last REQ (spawn, the
#                                 default, or stop) to HOST named NAME
#   spawn_detail HOST NAME [REQ]  that request's detail
#   spawn_marked                  how many tmux windows fleetfs marked as spawned
#   spawn_briefs TYPED            how many briefs from SPAWN_FROM the fake agent
#                                 recorded in TYPED
#   spawn_tmux_ready HOST PROFILE NAME BRIEF TYPED
#                                 request NAME on HOST; it must be requested at
#                                 once, then ready, its tmux window marked and
#                                 titled, listed in agents/, its brief typed once
#   spawn_tmux_stop HOST NAME     stop NAME@HOST: stopped, no marked window left,
#                                 no pane titled NAME, gone from agents/

spawn_state() {
  jq -r --arg n "$2" --arg r "${3:-spawn}" 'select(.name == $n and .request == $r) | .state' \
    "${SPAWN_FROM:-alpha}/hosts/$1/spawns" | tail -n1
}
spawn_detail() {
  jq -r --arg n "$2" --arg r "${3:-spawn}" 'select(.name == $n and .request == $r) | .detail' \
    "${SPAWN_FROM:-alpha}/hosts/$1/spawns" | tail -n1
}
spawn_marked() { tmux list-windows -a -F '#{@fleetfs_spawn}' | grep -c . || true; }
spawn_briefs() { grep -c "fleet brief from ${SPAWN_FROM:-alpha}" "$TEST_DIR/$1" 2>/dev/null || true; }

spawn_tmux_ready() {
  local host=$1 profile=$2 name=$3 brief=$4 typed=$5 from=${SPAWN_FROM:-alpha} marked
  marked=$(spawn_marked)
  jq -cn --arg p "$profile" --arg n "$name" --arg b "$brief" '{profile: $p, name: $n, brief: $b}' \
    >"$from/hosts/$host/spawn" &&
    test "$(spawn_state "$host" "$name")" = requested &&
    wait_for 30 "test \"\$(spawn_state $host $name)\" != requested" &&
    test "$(spawn_state "$host" "$name")" = ready &&
    test "$(jq -r --arg n "$name" 'select(.name == $n) | .gid' "$from/hosts/$host/spawns")" = "$name@$host" &&
    test "$(spawn_marked)" = $((marked + 1)) &&
    tmux list-panes -a -F "#{pane_title}" | grep -qx "$name" &&
    wait_for 15 "test -d $from/agents/$name@$host" &&
    wait_for 10 "grep -qF \"$brief\" $typed" &&
    test "$(spawn_briefs "$typed")" = 1
}

spawn_tmux_stop() {
  local host=$1 name=$2 from=${SPAWN_FROM:-alpha} marked
  marked=$(spawn_marked)
  echo "$name@$host" >"$from/hosts/$host/stop" &&
    wait_for 20 "test \"\$(spawn_state $host $name stop)\" = stopped" &&
    test "$(spawn_marked)" = $((marked - 1)) &&
    ! tmux list-panes -a -F "#{pane_title}" | grep -qx "$name" &&
    wait_for 15 "test ! -d $from/agents/$name@$host"
}
