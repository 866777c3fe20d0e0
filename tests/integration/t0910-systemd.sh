#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# systemd's notify protocol against a real NOTIFY_SOCKET datagram socket
# (tests/tools/notify-listen plays the service manager; the container has
# no systemd as init): READY=1 only once the tree is readable, STATUS= with
# the broker state as it changes (password redacted), WATCHDOG=1 at half of
# WATCHDOG_USEC and only while the FUSE loop answers, STOPPING=1 at the
# end; the abstract namespace; the shipped fleetfs@.service run as systemd
# runs it.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0910
new_vhost $FLEET_VHOST
LISTEN=$FLEET_ROOT/tests/tools/notify-listen

# listen NAME ADDR [CHECK-PATH]: a notify socket at ADDR, log in NAME.notify
# (with CHECK-PATH, the listener's "CHECK ok|failed" line comes some ms
# after READY=1: a test waits for it, not for READY=1 alone, before
# reading it; CI under ASan once read the file in between)
listen() {
    local name=$1 addr=$2 check=${3:-}
    rm -f "$TEST_DIR/$name.notify"
    if [[ -n $check ]]; then
        "$LISTEN" "$addr" "$TEST_DIR/$name.notify" --on-ready "$check" &
    else
        "$LISTEN" "$addr" "$TEST_DIR/$name.notify" &
    fi
    echo $! >"$TEST_DIR/.harness/listen.$name"
    at_exit "kill $! 2>/dev/null; true"
    wait_for 20 "grep -q listening '$TEST_DIR/$name.notify'"
}

# start_fleet NAME OPTS ENV...: fleetfs -f $FLAGS in the background like
# mount_fleet, with the given environment, not waiting for the mount
start_fleet() {
    local name=$1 opts=$2
    shift 2
    fleet_key "$name" || return 1
    mkdir -p "$TEST_DIR/$name" || return 1
    env "$@" "$FLEETFS" "$TEST_DIR/$name" -f ${FLAGS:-} -o "coord_id=$name,state_dir=$TEST_DIR/state/$name,vhost=$FLEET_VHOST,key=$TEST_DIR/keys/$name.key,trusted_keys=$TEST_DIR/trust$opts" \
        </dev/null >>"$TEST_DIR/$name.log" 2>&1 &
    echo $! >"$TEST_DIR/.harness/pid.$name"
    at_exit "unmount_fleet $name >/dev/null 2>&1"
}

# watchdog gaps in NAME.notify between seconds FROM and TO, one per line
gaps() {
    awk -v from="$2" -v to="$3" '$3 == "WATCHDOG=1" && $1 >= from && $1 <= to {
        if (prev != "") printf "%.3f\n", $1 - prev; prev = $1 }' "$TEST_DIR/$1.notify"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

test_expect_success 'READY=1 comes after the tree is readable, from the main process, then STATUS' '
    listen wd "$TEST_DIR/notify.sock" "$TEST_DIR/wd/status" &&
    start_fleet wd "" NOTIFY_SOCKET="$TEST_DIR/notify.sock" WATCHDOG_USEC=1000000 &&
    wait_for 15 "grep -q READY=1 wd.notify && grep -q \" CHECK \" wd.notify" &&
    cat wd.notify &&
    grep -A1 "READY=1" wd.notify | grep -q "CHECK ok [1-9]" &&
    test $(grep -c "READY=1" wd.notify) = 1 &&
    pid=$(cat .harness/pid.wd) &&
    test -z "$(grep " pid=" wd.notify | grep -v " pid=$pid ")" &&
    wait_for 10 "grep -q \"STATUS=broker: connected (amqp://guest:\*\*\*@127.0.0.1:$BROKER_PORT/\" wd.notify" &&
    ! grep -q "guest:guest" wd.notify
'

test_expect_success 'WATCHDOG=1 every WATCHDOG_USEC/2 while the loop answers' '
    wait_for 10 "test \$(grep -c WATCHDOG=1 wd.notify) -ge 8" &&
    r=$(awk "/READY=1/ { print \$1; exit }" wd.notify) &&
    gaps wd "$r" 1000 >g &&
    cat g &&
    n=$(wc -l <g) && test "$n" -ge 5 &&
    awk "{ s += \$1; if (\$1 > max) max = \$1 } END { m = s / NR; print \"mean\", m, \"max\", max;
         exit !(m > 0.4 && m < 0.65 && max < 0.9) }" g
'

test_expect_success 'a stop: STOPPING=1, then no more pings, exit 0' '
    unmount_fleet wd &&
    test_absent 10 "fleet_gone wd && grep -q STOPPING=1 wd.notify" \
        "sed -n \"/STOPPING=1/,\\\$p\" wd.notify | grep -q WATCHDOG" &&
    grep -q "unmounted" wd.log
'

test_expect_success 'an abstract NOTIFY_SOCKET (@name) works too; no WATCHDOG_USEC, no pings' '
    addr="@fleetfs-t0910-$$-$RANDOM" &&
    listen abs "$addr" "$TEST_DIR/abs/status" &&
    start_fleet abs "" NOTIFY_SOCKET="$addr" &&
    wait_for 15 "grep -q READY=1 abs.notify && grep -q \" CHECK \" abs.notify" &&
    grep -q "CHECK ok" abs.notify &&
    cat abs/status >/dev/null && sleep 0.5 &&
    unmount_fleet abs &&
    test_absent 10 "grep -q STOPPING=1 abs.notify" "grep -q WATCHDOG abs.notify"
'

test_expect_success 'WATCHDOG_PID naming another process: no pings' '
    listen other "$TEST_DIR/other.sock" &&
    start_fleet other "" NOTIFY_SOCKET="$TEST_DIR/other.sock" WATCHDOG_USEC=200000 WATCHDOG_PID=1 &&
    wait_for 15 "grep -q READY=1 other.notify" &&
    cat other/status >/dev/null && sleep 0.5 &&
    unmount_fleet other &&
    test_absent 10 "grep -q STOPPING=1 other.notify" "grep -q WATCHDOG other.notify"
'

# A broker reached through a socat relay this test controls: absent at
# start, there, frozen (SIGSTOP), gone.
test_expect_success 'STATUS follows the broker: unreachable (redacted), connected, lost' '
    command -v socat >/dev/null &&
    port=$(free_port) && echo $port >relay.port &&
    listen st "$TEST_DIR/st.sock" "$TEST_DIR/st/status" &&
    FLAGS=-s start_fleet st ",peers=nobody,send_timeout=4s,probe_timeout=4s" NOTIFY_SOCKET="$TEST_DIR/st.sock" \
        WATCHDOG_USEC=1000000 FLEET_BROKER_URI="amqp://guest:guest@127.0.0.1:$port/t0910" &&
    wait_for 15 "grep -q READY=1 st.notify && grep -q \" CHECK \" st.notify" &&
    grep -q "CHECK ok" st.notify &&
    wait_for 10 "grep -q \"STATUS=broker: unreachable: .*amqp://guest:\\*\\*\\*@127.0.0.1:$port/t0910\" st.notify" &&
    # fork: fleetfs opens two connections (consuming, publishing); the
    # relay and its children are one process group (relay.pid holds it)
    { setsid sh -c "echo \$\$ >relay.pid; exec socat TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:$BROKER_PORT" & } &&
    wait_for 5 "test -s relay.pid" &&
    at_exit "kill -CONT -- -$(cat relay.pid) 2>/dev/null; kill -- -$(cat relay.pid) 2>/dev/null; true" &&
    wait_for 15 "grep -q \"STATUS=broker: connected\" st.notify" &&
    ! grep -q "guest:guest" st.notify
'

# A send no longer holds a FUSE thread while it waits for the broker
# (issue 32: the publishing thread answers the write), so what keeps the
# one loop thread busy here is a status open waiting for its probe
# (probe_timeout 4 s); the cached probe it would take instead is at most
# PROBE_MAX_AGE_MS (1 s) old, hence the pause before the open.
test_expect_success 'a FUSE loop stuck in a request: no pings until it answers again' '
    # -s: one loop thread; a status open held up by the frozen relay keeps
    # it busy for probe_timeout (4 s)
    kill -STOP -- -$(cat relay.pid) &&
    t=$(awk "\$3 == \"WATCHDOG=1\" { t = \$1 } END { print t }" st.notify) &&
    sleep 1.5 &&
    { { cat st/peers/nobody/status >open.out 2>open.err; echo $? >open.rc; } & } &&
    wait_for 10 "test -s open.rc" &&
    test "$(cat open.rc)" = 0 && grep -q "^mailbox: unknown" open.out &&
    wait_for 5 "grep -q \"watchdog: the FUSE loop answers again\" st.log" &&
    wait_for 5 "test \$(gaps st $t 1000 | wc -l) -ge 1" &&
    gaps st "$t" 1000 >g &&
    cat g &&
    awk "{ if (\$1 > max) max = \$1 } END { print \"max\", max; exit !(max > 2.5) }" g &&
    grep -q "watchdog: the FUSE loop has not answered a request" st.log &&
    grep -q "watchdog: the FUSE loop answers again" st.log &&
    kill -CONT -- -$(cat relay.pid)
'

test_expect_success 'the relay gone: STATUS leaves connected, with the reason' '
    n=$(grep -n "STATUS=broker: connected" st.notify | tail -n1 | cut -d: -f1) &&
    kill -- -$(cat relay.pid) &&
    wait_for 20 "tail -n +$n st.notify | grep -qE \"STATUS=broker: (connecting|unreachable)\"" &&
    tail -n +$n st.notify | grep STATUS= &&
    unmount_fleet st && grep -q STOPPING=1 st.notify
'

test_expect_success 'without -f: a warning that systemd will not hear the detached daemon' '
    listen bg "$TEST_DIR/bg.sock" "$TEST_DIR/bg/status" &&
    fleet_key bg && mkdir -p bg &&
    NOTIFY_SOCKET=$TEST_DIR/bg.sock "$FLEETFS" "$TEST_DIR/bg" -o "coord_id=bg,state_dir=$TEST_DIR/state/bg,vhost=$FLEET_VHOST,key=$TEST_DIR/keys/bg.key,trusted_keys=$TEST_DIR/trust" 2>bg.log &&
    at_exit "fusermount3 -u -z $TEST_DIR/bg 2>/dev/null; true" &&
    grep -q "NOTIFY_SOCKET is set but fleetfs detaches (no -f).*run it with -f" bg.log &&
    wait_for 10 "grep -q READY=1 bg.notify" &&
    # EBUSY while a request is in flight: retry, as unmount_fleet does
    wait_for 10 "fusermount3 -u bg 2>/dev/null || ! mountpoint -q bg" &&
    wait_for 10 "grep -q unmounted bg.log"
'

# The installed unit, run the way systemd runs fleetfs@unit1: %i expanded,
# the EnvironmentFile read, RuntimeDirectory/StateDirectory made, the
# absolute paths under a DESTDIR root, NOTIFY_SOCKET and WATCHDOG_USEC set
# (WatchdogSec=1s, as a drop-in would), SIGTERM to stop, ExecStopPost after.
D=$TEST_DIR/root
B=${FLEETFS_BUILD:-build}
export D B
reroot() {
    sed -E -e "s|%i|unit1|g" -e "s#(^|[ =,])/(etc|run|var|usr/local)/#\1$D/\2/#g"
}
unit_value() {
    sed -n "s/^$1=//p" "$D/usr/local/lib/systemd/system/fleetfs@.service" | reroot
}

test_expect_success 'the shipped fleetfs@.service as systemd runs it: READY=1, STATUS, SIGTERM' '
    make -s -C "$FLEET_ROOT" install B="$B" DESTDIR="$D" >install.out 2>&1 &&
    test "$(unit_value Type)" = notify &&
    test "$(unit_value NotifyAccess)" = main &&
    envfile=$(unit_value EnvironmentFile) &&
    test "$envfile" = "$D/etc/fleetfs/unit1.env" &&
    mkdir -p "$D/etc/fleetfs" &&
    install -m 0600 /dev/null "$envfile" &&
    echo "FLEET_BROKER_URI=$(broker_uri $FLEET_VHOST)" >"$envfile" &&
    fleet_key unit1 &&
    printf "[fleetfs]\npeers = wd\nkey = %s\ntrusted_keys = %s\n" \
        "$TEST_DIR/keys/unit1.key" "$TEST_DIR/trust" >"$D/etc/fleetfs/unit1.conf" &&
    mkdir -p -m 0700 "$D/run/$(unit_value RuntimeDirectory)" "$D/var/lib/$(unit_value StateDirectory)" &&
    mnt=$D/run/fleet/unit1 &&
    listen unit1 "$TEST_DIR/unit1.sock" "$mnt/status" &&
    execstart=$(unit_value ExecStart) &&
    echo "$execstart" &&
    { ( set -a && . "$envfile" && set +a &&
        exec env NOTIFY_SOCKET="$TEST_DIR/unit1.sock" WATCHDOG_USEC=1000000 $execstart ) \
        >>unit1.log 2>&1 & } &&
    pid=$! && echo $pid >.harness/pid.unit1 &&
    at_exit "kill $pid 2>/dev/null; fusermount3 -u -z $mnt 2>/dev/null; true" &&
    wait_for 15 "grep -q READY=1 unit1.notify && grep -q \" CHECK \" unit1.notify" &&
    grep -q "CHECK ok" unit1.notify &&
    grep -q "^coord_id: unit1$" "$mnt/status" &&
    wait_for 10 "grep -q \"STATUS=broker: connected\" unit1.notify" &&
    ls "$mnt/peers" | grep -qx wd &&
    wait_for 5 "grep -q WATCHDOG=1 unit1.notify" &&
    test -n "$(ls "$D/var/lib/fleetfs/unit1")" &&
    kill -TERM $pid && wait $pid &&
    grep -q STOPPING=1 unit1.notify &&
    ! mountpoint -q "$mnt" &&
    stoppost=$(unit_value ExecStopPost) &&
    { ${stoppost#-} 2>/dev/null || true; } && ! mountpoint -q "$mnt" &&
    ! grep -q "guest:guest" unit1.notify unit1.log
'

test_done
