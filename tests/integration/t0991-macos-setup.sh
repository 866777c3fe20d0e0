#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The macOS set-up (doc/macos.md), checked on Linux: there is no Mac here,
# so a fake uname says Darwin and a fake brew records what it is asked.
#   - scripts/install-deps asks brew for exactly the formulae not installed
#     yet, nothing on a second run, and says the macFUSE step (exit 1)
#     until macFUSE's fuse3.pc is there
#   - the Makefile's Darwin branch: the flags make -n shows, pkg-config
#     asked with macFUSE's pkgconfig directory
#   - make install puts the launchd agent (a plist plistlib parses, with
#     the keys launchd needs, naming the files install put there) and not
#     the systemd units; make uninstall boots it out and removes it all
#   - the agent's ProgramArguments, run as launchd would run them, mount
#     ~/fleet through a real mount on a real broker, carry a message, and
#     unmount on SIGTERM; a configuration error is not restarted
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: scripts, the Makefile and the plist; the daemon they start runs under ASan in t0990" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
command -v python3 >/dev/null || test_skip_all "no python3 (plistlib parses the plist)"
broker_use_shared
FLEET_VHOST=t0991
new_vhost $FLEET_VHOST
B=${FLEETFS_BUILD:-build}

mkdir -p fake
printf '#!/bin/sh\necho Darwin\n' >fake/uname
cat >fake/brew <<'EOS'
#!/bin/sh
echo "$*" >>"$FAKE_BREW_LOG"
case $1 in
  list) cat "$FAKE_BREW_HAVE" 2>/dev/null ;;
  install) shift; for p; do echo "$p" >>"$FAKE_BREW_HAVE"; done ;;
  --prefix) echo "$FAKE_BREW_PREFIX" ;;
esac
EOS
cat >fake/launchctl <<'EOS'
#!/bin/sh
echo "$*" >>"$FAKE_LAUNCHCTL_LOG"
EOS
# pkg-config as the Makefile calls it, with the PKG_CONFIG_PATH it was given
cat >fake/pkg-config <<'EOS'
#!/bin/sh
echo "PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-} $*" >>"$FAKE_PKG_LOG"
exec /usr/bin/pkg-config "$@"
EOS
chmod +x fake/*
export FAKE_BREW_LOG=$TEST_DIR/brew.log FAKE_BREW_HAVE=$TEST_DIR/brew.have FAKE_BREW_PREFIX=$TEST_DIR/brewprefix
export FAKE_LAUNCHCTL_LOG=$TEST_DIR/launchctl.log FAKE_PKG_LOG=$TEST_DIR/pkg.log
DARWIN=$TEST_DIR/fake:$PATH
export DARWIN B

test_expect_success 'install-deps on macOS: brew install of the formulae not there yet, then the macFUSE step, exit 1' '
    printf "%s\n" jansson tmux >"$FAKE_BREW_HAVE" && : >"$FAKE_BREW_LOG" &&
    (PATH=$DARWIN MACFUSE_PKGCONFIG=$TEST_DIR/nomacfuse "$FLEET_ROOT/scripts/install-deps" >d1.out 2>d1.err; echo $? >d1.rc) &&
    cat d1.err && test "$(cat d1.rc)" = 1 && test_cmp /dev/null d1.out &&
    printf "%s\n" "list --formula -1" \
        "install pkgconf rabbitmq-c libsodium glib cmocka rabbitmq fswatch jq coreutils flock" >want &&
    test_cmp want "$FAKE_BREW_LOG" &&
    grep -q "^install-deps: one step is yours: macFUSE is not installed (no $TEST_DIR/nomacfuse/fuse3.pc)" d1.err &&
    grep -q "brew install --cask macfuse" d1.err &&
    grep -q "Privacy & Security" d1.err && grep -q "Recovery" d1.err &&
    grep -q -- "-o backend=fskit" d1.err
'

test_expect_success 'install-deps on macOS with macFUSE there: nothing installed again, exit 0, silent' '
    mkdir -p macfuse && printf "Name: fuse3\n" >macfuse/fuse3.pc && : >"$FAKE_BREW_LOG" &&
    PATH=$DARWIN MACFUSE_PKGCONFIG=$TEST_DIR/macfuse "$FLEET_ROOT/scripts/install-deps" >d2.out 2>d2.err &&
    test_cmp /dev/null d2.out && test_cmp /dev/null d2.err &&
    echo "list --formula -1" >want2 && test_cmp want2 "$FAKE_BREW_LOG"
'

test_expect_success 'install-deps on macOS: --plan, lavinmq on request, --deb refused, no Homebrew said' '
    PATH=$DARWIN "$FLEET_ROOT/scripts/install-deps" --plan >plan && grep -qx rabbitmq plan && grep -qx fswatch plan &&
    ! grep -qx lavinmq plan && ! grep -q libfuse plan &&
    PATH=$DARWIN FLEET_BROKER_KIND=lavinmq "$FLEET_ROOT/scripts/install-deps" --plan | grep -qx lavinmq &&
    (PATH=$DARWIN "$FLEET_ROOT/scripts/install-deps" --deb 2>deb.err; test $? = 2) && grep -q "for Debian" deb.err &&
    mkdir -p nobrew && cp fake/uname nobrew/ &&
    (PATH=$TEST_DIR/nobrew:/usr/bin:/bin "$FLEET_ROOT/scripts/install-deps" 2>nb.err; test $? = 1) &&
    grep -q "Homebrew is not installed" nb.err
'

test_expect_success 'the Makefile on Darwin: _DARWIN_C_SOURCE, Apple clang warning flag, macFUSE pkgconfig asked' '
    : >"$FAKE_PKG_LOG" &&
    PATH=$DARWIN make -s -n -C "$FLEET_ROOT" B="$TEST_DIR/b" "$TEST_DIR/b/obj/fleetfs/base/log.o" >mk.out 2>&1 &&
    cat mk.out && grep -q -- " -D_GNU_SOURCE -D_DARWIN_C_SOURCE " mk.out &&
    grep -q -- "-Wno-unknown-warning-option" mk.out &&
    grep -q "^PKG_CONFIG_PATH=/usr/local/lib/pkgconfig.* --cflags fuse3 librabbitmq jansson libsodium glib-2.0$" "$FAKE_PKG_LOG" &&
    : >"$FAKE_PKG_LOG" &&
    PATH=$DARWIN make -s -n -C "$FLEET_ROOT" B="$TEST_DIR/b" MACFUSE_PKGCONFIG=/opt/mf/pc "$TEST_DIR/b/obj/fleetfs/base/log.o" >/dev/null 2>&1 &&
    grep -q "^PKG_CONFIG_PATH=/opt/mf/pc.* --libs " "$FAKE_PKG_LOG" &&
    make -s -n -C "$FLEET_ROOT" B="$TEST_DIR/b" "$TEST_DIR/b/obj/fleetfs/base/log.o" >lx.out 2>&1 &&
    grep -q -- " -D_GNU_SOURCE " lx.out && ! grep -q -- "_DARWIN_C_SOURCE\|unknown-warning-option" lx.out
'

# make install as a Mac user runs it: PREFIX they can write, their HOME
H=$TEST_DIR/home P=$TEST_DIR/prefix
export H P
test_expect_success 'make install on Darwin: the launchd agent and its runner, no systemd units' '
    PATH=$DARWIN make -s -C "$FLEET_ROOT" -o "$B/fleetfs" install B="$B" PREFIX="$P" HOME="$H" >inst.out 2>&1 &&
    cat inst.out &&
    (cd "$TEST_DIR" && find prefix home -type f | grep -v "^prefix/share/" | sort) >files &&
    printf "%s\n" home/Library/LaunchAgents/local.fleetfs.plist prefix/bin/fleetfs prefix/bin/fleetfs-broker \
        prefix/lib/fleetfs/broker-lavinmq prefix/lib/fleetfs/fleetfs-agent | sort >want &&
    test_cmp want files && test -d "$H/Library/Logs" &&
    test -z "$(find "$P" "$H" -name "*.service")" &&
    cmp "$FLEETFS" "$P/bin/fleetfs" && test -x "$P/lib/fleetfs/fleetfs-agent" &&
    test "$(stat -c %a "$H/Library/LaunchAgents/local.fleetfs.plist")" = 644
'

test_expect_success 'the plist: valid, the keys launchd needs, ProgramArguments running what install put there' '
    { ! command -v xmllint >/dev/null || xmllint --noout "$H/Library/LaunchAgents/local.fleetfs.plist"; } &&
    python3 - "$H/Library/LaunchAgents/local.fleetfs.plist" "$P" "$H" >plist.out <<-\EOP &&
	import plistlib, sys, os
	d = plistlib.load(open(sys.argv[1], "rb"))
	p, h = sys.argv[2], sys.argv[3]
	assert d["Label"] == "local.fleetfs", d["Label"]
	a = d["ProgramArguments"]
	assert a == [p + "/lib/fleetfs/fleetfs-agent", p + "/bin/fleetfs", "~/fleet",
	             "~/.config/fleetfs/fleetfs.conf", "~/.config/fleetfs/broker.env"], a
	assert all(os.access(x, os.X_OK) for x in a[:2])
	assert d["RunAtLoad"] is True
	assert d["KeepAlive"] == {"SuccessfulExit": False}, d["KeepAlive"]
	assert d["StandardOutPath"] == d["StandardErrorPath"] == h + "/Library/Logs/fleetfs.log"
	assert "@" not in open(sys.argv[1]).read().replace("-//Apple", ""), "a placeholder left"
	print("\n".join(a))
	EOP
    cat plist.out
'

# ProgramArguments run as launchd runs them: HOME set, the working
# directory /, the log file as stdout and stderr
run_agent() {
    mapfile -t ARGS < <(python3 -c "import plistlib,sys; print(\"\n\".join(plistlib.load(open(sys.argv[1],\"rb\"))[\"ProgramArguments\"]))" \
        "$H/Library/LaunchAgents/local.fleetfs.plist")
    rm -f "$TEST_DIR/agent.pid" "$TEST_DIR/agent.rc"
    (
        (cd / && HOME=$H exec "${ARGS[@]}") >>"$H/Library/Logs/fleetfs.log" 2>&1 &
        echo $! >"$TEST_DIR/agent.pid"
        wait $!
        echo $? >"$TEST_DIR/agent.rc.tmp" && mv "$TEST_DIR/agent.rc.tmp" "$TEST_DIR/agent.rc"
    ) &
    wait_for 5 "test -s '$TEST_DIR/agent.pid'"
}
# agent_exit: wait until the agent has exited; its exit status in agent.rc
agent_exit() { wait_for 15 "test -s '$TEST_DIR/agent.rc'"; }
test_log_on_failure "$H/Library/Logs/fleetfs.log"

test_expect_success 'the agent without broker.env: says so, exit 0 (launchd does not restart it)' '
    run_agent && agent_exit && test "$(cat agent.rc)" = 0 &&
    grep -q "fleetfs-agent: no $H/.config/fleetfs/broker.env" "$H/Library/Logs/fleetfs.log" &&
    test ! -e "$H/fleet"
'

test_expect_success 'the agent mounts ~/fleet with broker.env and fleetfs.conf; a message goes through' '
    mkdir -p "$H/.config/fleetfs" && fleet_key ag0991 &&
    (umask 077 && echo "FLEET_BROKER_URI=$(broker_uri t0991)" >"$H/.config/fleetfs/broker.env") &&
    printf "[fleetfs]\ncoord_id = ag0991\npeers = ag0991\nvhost = t0991\nkey = %s\ntrusted_keys = %s\nstate_dir = %s\ninject = none\n" \
        "$TEST_DIR/keys/ag0991.key" "$TEST_DIR/trust" "$TEST_DIR/state/ag0991" >"$H/.config/fleetfs/fleetfs.conf" &&
    run_agent && at_exit "fusermount3 -u $H/fleet 2>/dev/null; kill $(cat agent.pid) 2>/dev/null" &&
    wait_for 15 "mountpoint -q $H/fleet && test -r $H/fleet/status" &&
    echo "through the launchd agent" >"$H/fleet/peers/ag0991/send" &&
    wait_for 10 "grep -q \"through the launchd agent\" $H/fleet/leads/ag0991/inbox" &&
    grep -qx "coord_id: ag0991" "$H/fleet/status"
'

test_expect_success 'SIGTERM (launchctl bootout) reaches fleetfs: unmounted, the agent exits 0' '
    pid=$(cat agent.pid) && kill -TERM "$pid" &&
    agent_exit && test "$(cat agent.rc)" = 0 && ! mountpoint -q "$H/fleet" &&
    test -z "$(pgrep -f -- "$H/fleet")"
'

test_expect_success 'a configuration error (fleetfs exits 2) is not restarted: the agent exits 0 and says why' '
    echo "no_such_option = 1" >>"$H/.config/fleetfs/fleetfs.conf" &&
    run_agent && agent_exit && test "$(cat agent.rc)" = 0 && grep -q "fleetfs exited 2 (a configuration error, above); not restarting" "$H/Library/Logs/fleetfs.log" &&
    ! mountpoint -q "$H/fleet"
'

test_expect_success 'make uninstall on Darwin: launchctl bootout, then every file install put there gone' '
    : >"$FAKE_LAUNCHCTL_LOG" &&
    PATH=$DARWIN make -s -C "$FLEET_ROOT" uninstall B="$B" PREFIX="$P" HOME="$H" >un.out 2>&1 &&
    echo "bootout gui/$(id -u)/local.fleetfs" >wantl && test_cmp wantl "$FAKE_LAUNCHCTL_LOG" &&
    test -z "$(find "$P" "$H/Library" -type f ! -name fleetfs.log)"
'

test_done
