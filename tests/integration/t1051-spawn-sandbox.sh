#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A spawned agent in the sandbox (SPEC section 11; doc/security.md, "The
# spawn sandbox"): alpha, on its own network namespace, asks beta to start
# p1 with a profile whose sandbox is the default (bwrap). The agent is
# tests/tools/sandbox-probe, which tries each forbidden thing and records
# what it could do in its own directory; the test counts that record, what
# alpha received (signed as p1@beta, else alpha would refuse it), and the
# processes left after the stop. Also: sandbox = none said explicitly starts
# unconfined and is logged; a profile through herdr is refused.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: network namespaces; the daemon's side runs under ASan in t1040" ;; esac
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
command -v bwrap >/dev/null || test_skip_all "bwrap is not installed (scripts/install-deps: bubblewrap)"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/netns.sh"
. "$FLEET_ROOT/tests/spawn.sh"
. "$FLEET_ROOT/tests/mcp.sh"
netns_require
netns_setup || { echo "# netns_setup failed" >&2; exit 1; }
FLEET_VHOST=t1051
new_vhost $FLEET_VHOST
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
PROBE=$BIN/tools/sandbox-probe
M=$TEST_DIR/beta
REC=$TEST_DIR/work/p1/probe.record

tmux_private

# the profiles alpha hears beta offer, sorted, on one line
offered() { sed -n "s/^profiles: //p" alpha/hosts/beta/status | tr " " "\n" | sort | tr "\n" " "; }
# the probe's line for an action ("read PATH", "write PATH", "env", "run")
said() { grep -F "$1: " "$REC" | head -n1 | sed "s|^.*: ||"; }

test_expect_success 'alpha and beta on their own links; beta offers a sandboxed probe profile and serves agent w9' '
    netns_host alpha && netns_host beta &&
    FLEET_BROKER_URI=$(broker_uri $FLEET_VHOST) "$FLEETFS" declare beta >/dev/null &&
    mcp_sdk_install &&
    mkdir -p work/p1 work/u1 xdg/fleetfs && echo "# the default config of the daemon user" >xdg/fleetfs/fleetfs.conf &&
    printf "#!/bin/sh\nMCP_AS=\$FLEETFS_AGENT exec node %s %s \"\$FLEET\" call fleet_send %s >mcp.out 2>&1\n" \
        "$MCP_SDK_DIR/mcp_client.mjs" "$FLEETFS" "'"'"'{\"to\":\"alpha\",\"body\":\"mcp-from-p1\"}'"'"'" >mcp-send &&
    printf "#!/bin/sh\nsetsid sleep 1234 </dev/null >/dev/null 2>&1 &\n" >leave-one &&
    chmod +x mcp-send leave-one && cat mcp-send &&
    {
        echo "[profile probe]"
        printf "command = %s probe.record" "$PROBE"
        printf " read:%s" "$TEST_DIR/hosts/beta/key" "$TEST_DIR/hosts/beta/trust/alpha.pub" \
            "$TEST_DIR/state/beta/control.seen" "$TEST_DIR/beta.conf" "$TEST_DIR/xdg/fleetfs/fleetfs.conf" \
            "$M/agents/w9@beta/inbox" "$M/leads/beta/inbox" "$M/agents/p1@beta/inbox"
        printf " write:%s" "$TEST_DIR/outside=x" "$TEST_DIR/work/p1/inside=x" \
            "$M/peers/alpha/send=as-the-lead" "$M/agents/w9@beta/to/alpha=as-w9" \
            "$M/agents/p1@beta/to/alpha=hello-from-p1"
        printf " env run:%s run:%s\n" "$TEST_DIR/mcp-send" "$TEST_DIR/leave-one"
        printf "dir_root = %s\nready_timeout = 40s\n" "$TEST_DIR/work"
        printf "[profile unconfined]\ncommand = %s probe.record env\ndir_root = %s\nsandbox = none\n" "$PROBE" "$TEST_DIR/work"
        printf "[profile nodir]\ncommand = %s probe.record env\n" "$PROBE"
        printf "[profile stuck]\ncommand = %s --never-quiet\ndir_root = %s\nready_timeout = 4s\n" "$BIN/tools/fake-agent" "$TEST_DIR/work"
    } >beta.conf &&
    printf "[profile bad]\ncommand = %s\nsandbox = firejail\n" "$PROBE" >bad.conf &&
    mkdir -p bad && test_must_fail "$FLEETFS" bad -f -o coord_id=bad,insecure,config=$TEST_DIR/bad.conf </dev/null 2>err &&
    grep -q "profile bad.*sandbox: expected bwrap (the default) or none" err && ! mountpoint -q bad &&
    cat beta.conf &&
    tmux -f /dev/null new-session -d -s far -x 200 -y 50 "sleep 100000" &&
    host_mount alpha peers=beta heartbeat=1s inject=none &&
    XDG_CONFIG_HOME=$TEST_DIR/xdg host_mount beta peers=alpha heartbeat=1s inject=tmux inject_commands=sandbox-probe:fake-agent spawn_from=alpha agents=w9 config="$TEST_DIR/beta.conf" &&
    grep -q "profile unconfined starts its agents unconfined (sandbox = none)" beta.log &&
    wait_for 20 "test \"\$(offered)\" = \"nodir probe stuck unconfined \""
'

test_expect_success 'alpha asks beta for p1 (profile probe): ready; the probe ran inside bwrap and finished its record' '
    echo "{\"profile\":\"probe\",\"name\":\"p1\",\"dir\":\"$TEST_DIR/work/p1\"}" >alpha/hosts/beta/spawn &&
    wait_for 60 "test \"\$(spawn_state beta p1)\" != requested" &&
    spawn_detail beta p1 && test "$(spawn_state beta p1)" = ready &&
    wait_for 20 "grep -qx done $REC" && cat $REC &&
    tmux list-panes -a -F "#{pane_title} #{pane_current_command}" | grep -qx "p1 bwrap"
'

test_expect_success 'the key and the config unreadable (/dev/null on a nodev mount: EACCES); trust, state, ~/.config/fleetfs, other homes: absent' '
    test -s hosts/beta/key && test -s beta.conf && test -s hosts/beta/trust/alpha.pub &&
    test -s state/beta/control.seen && test -e beta/agents/w9@beta/inbox &&
    test "$(said "read $TEST_DIR/hosts/beta/key")" = "error Permission denied" &&
    test "$(said "read $TEST_DIR/beta.conf")" = "error Permission denied" &&
    said "read $TEST_DIR/hosts/beta/trust/alpha.pub" | grep -q "No such file" &&
    said "read $TEST_DIR/state/beta/control.seen" | grep -q "No such file" &&
    said "read $TEST_DIR/xdg/fleetfs/fleetfs.conf" | grep -q "No such file" &&
    said "read $M/agents/w9@beta/inbox" | grep -q "No such file" &&
    said "read $M/leads/beta/inbox" | grep -q "No such file" &&
    said "read $M/agents/p1@beta/inbox" | grep -q "bytes$"
'

test_expect_success 'it writes in its dir only; it cannot send as the lead or as w9; no broker URI in its environment' '
    said "write $TEST_DIR/outside" | grep -q "Read-only file system" && test ! -e outside &&
    test "$(said "write $TEST_DIR/work/p1/inside")" = ok && test "$(cat work/p1/inside)" = x &&
    said "write $M/peers/alpha/send" | grep -q "No such file" &&
    said "write $M/agents/w9@beta/to/alpha" | grep -q "No such file" &&
    test "$(said env)" = none &&
    grep -q "FLEET_BROKER_URI=amqp" /proc/$(cat .harness/pid.beta)/environ
'

test_expect_success 'what it sent as itself, by its own home and by its own MCP server, reached alpha from p1@beta' '
    test "$(said "write $M/agents/p1@beta/to/alpha")" = ok &&
    test "$(grep -c "^run: exit 0$" $REC)" = 2 && cat work/p1/mcp.out &&
    wait_for 15 "test \$(grep -c \"from-p1\" alpha/leads/alpha/inbox) = 2" &&
    jq -r "select(.body | test(\"from-p1\")) | \"\(.from) \(.body)\"" alpha/leads/alpha/inbox >got &&
    printf "p1@beta hello-from-p1\np1@beta mcp-from-p1\n" >want && test_cmp want got &&
    ! grep -q "as-the-lead\|as-w9" alpha/leads/alpha/inbox
'

test_expect_success 'stop: the pane closed and every process the agent left died with it' '
    pgrep -f "^sleep 1234" >/dev/null &&
    echo "p1@beta" >alpha/hosts/beta/stop &&
    wait_for 20 "test \"\$(spawn_state beta p1 stop)\" = stopped" &&
    wait_for 10 "! pgrep -f \"^sleep 1234\" >/dev/null" &&
    ! tmux list-panes -a -F "#{pane_title}" | grep -qx p1
'

test_expect_success 'sandbox = none, said explicitly: started unconfined, logged; its environment is the pane'"'"'s' '
    echo "{\"profile\":\"unconfined\",\"name\":\"u1\",\"dir\":\"$TEST_DIR/work/u1\"}" >alpha/hosts/beta/spawn &&
    wait_for 40 "test \"\$(spawn_state beta u1)\" != requested" &&
    test "$(spawn_state beta u1)" = ready &&
    grep -q "u1@beta starts unconfined (profile unconfined: sandbox = none)" beta.log &&
    echo "u1@beta" >alpha/hosts/beta/stop &&
    wait_for 20 "test \"\$(spawn_state beta u1 stop)\" = stopped"
'

test_expect_success 'refused before any pane: a sandboxed profile with no dir; failed: one never ready, its early registration undone' '
    n=$(tmux list-windows -a | wc -l) &&
    echo "{\"profile\":\"nodir\",\"name\":\"n1\"}" >alpha/hosts/beta/spawn &&
    wait_for 30 "test \"\$(spawn_state beta n1)\" != requested" &&
    test "$(spawn_state beta n1)" = refused &&
    spawn_detail beta n1 | grep -q "writes only in its directory" &&
    test "$(tmux list-windows -a | wc -l)" = $n && test ! -d beta/agents/n1@beta &&
    echo "{\"profile\":\"stuck\",\"name\":\"s1\",\"dir\":\"$TEST_DIR/work/u1\"}" >alpha/hosts/beta/spawn &&
    wait_for 10 "grep -q \"s1@beta registered\" beta.log" &&
    wait_for 30 "test \"\$(spawn_state beta s1)\" != requested" &&
    test "$(spawn_state beta s1)" = failed &&
    grep -q "agents: s1@beta retired" beta.log &&
    test ! -d beta/agents/s1@beta && test "$(tmux list-windows -a | wc -l)" = $n
'

test_expect_success 'no bwrap on beta (FLEETFS_BWRAP names none): the sandboxed profile is refused, nothing started' '
    unmount_fleet beta &&
    FLEETFS_BWRAP=$TEST_DIR/no-bwrap host_mount beta peers=alpha heartbeat=1s inject=tmux inject_commands=sandbox-probe:fake-agent spawn_from=alpha config="$TEST_DIR/beta.conf" &&
    wait_for 20 "test \"\$(offered)\" = \"nodir probe stuck unconfined \"" &&
    n=$(tmux list-windows -a | wc -l) &&
    echo "{\"profile\":\"probe\",\"name\":\"p2\",\"dir\":\"$TEST_DIR/work/p1\"}" >alpha/hosts/beta/spawn &&
    wait_for 30 "test \"\$(spawn_state beta p2)\" != requested" &&
    test "$(spawn_state beta p2)" = refused &&
    spawn_detail beta p2 | grep -q "no sandbox on this host: bwrap is not installed" &&
    spawn_detail beta p2 | grep -q "the agent is not started unconfined" &&
    test "$(tmux list-windows -a | wc -l)" = $n && test ! -d beta/agents/p2@beta
'

test_done
