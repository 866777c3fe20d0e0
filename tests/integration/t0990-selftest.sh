#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/selftest, the check doc/macos.md gives a Mac user (and make
# selftest), run here through a real mount on a real broker: against a
# running broker as a user's setup has one (FLEET_BROKER_URI), with
# --local (a private broker of its own, stopped again), and against a
# broker that is not there, where it must say FAILED and exit 1. What the
# test counts itself: the exit status, the ok/FAILED lines, the broker's
# own count of the selftest's mailbox (made, and left empty by the ack),
# that nothing stays mounted and no fleetfs and no broker node of the
# selftest's stays running.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0990
new_vhost $FLEET_VHOST
B=${FLEETFS_BUILD:-build}
ST=$FLEET_ROOT/scripts/selftest
printf '[fleetfs]\nvhost = t0990\n' >"$TEST_DIR/t0990.conf"
URI=$(broker_uri t0990)
export B ST URI

# steps FILE: the step lines "ok NAME" / "FAILED NAME", in order
steps() { awk '$1 == "ok" || $1 == "FAILED" || $1 == "skip" { print $1, $2 }' "$1"; }

test_expect_success 'selftest against a running broker: every step ok, exit 0' '
    (FLEETFS=$FLEETFS FLEET_BROKER_URI=$URI "$ST" --id st0990 --dir "$TEST_DIR/st1" \
        --config "$TEST_DIR/t0990.conf" >st1.out 2>&1; echo $? >st1.rc) &&
    cat st1.out && test "$(cat st1.rc)" = 0 &&
    printf "%s\n" "ok mount" "ok send" "ok read" "ok watch" "ok status" "ok unmount" >want &&
    steps st1.out >got && test_cmp want got &&
    grep -q "^selftest: 6 ok, 0 failed" st1.out
'

test_expect_success 'the broker saw it: the selftest mailbox exists and the ack left it empty' '
    broker_queues >queues && cat queues &&
    grep -qx "lead.st0990.inbox[[:space:]]0" queues
'

test_expect_success 'after the selftest nothing is mounted and its fleetfs is gone' '
    ! mountpoint -q "$TEST_DIR/st1/mnt" &&
    ! grep -qF " $TEST_DIR/st1/mnt " /proc/mounts &&
    test -z "$(pgrep -f -- "$TEST_DIR/st1/mnt")"
'

test_expect_success 'make selftest runs it with the build under test' '
    (FLEET_BROKER_URI=$URI make -s -C "$FLEET_ROOT" -o "$B/fleetfs" selftest B="$B" \
        SELFTEST="--id st0990m --config $TEST_DIR/t0990.conf" >m.out 2>&1; echo $? >m.rc) &&
    cat m.out && test "$(cat m.rc)" = 0 &&
    grep -q "^selftest: fleetfs .*, lead st0990m" m.out &&
    grep -q "^selftest: 6 ok, 0 failed" m.out &&
    broker_queues >queues2 && grep -qx "lead.st0990m.inbox[[:space:]]0" queues2
'

# A broker that is not there: the mount comes up (fleetfs keeps trying),
# the send, the read, the watch and the status fail, and it says so.
test_expect_success 'no broker behind the URI: FAILED steps, exit 1, the directory kept' '
    (FLEETFS=$FLEETFS FLEET_BROKER_URI="amqp://guest:guest@127.0.0.1:1/%2f" "$ST" --id st0990x \
        --dir "$TEST_DIR/st2" --config "$TEST_DIR/t0990.conf" >st2.out 2>&1; echo $? >st2.rc) &&
    cat st2.out && test "$(cat st2.rc)" = 1 &&
    printf "%s\n" "ok mount" "FAILED send" "FAILED read" "FAILED watch" "FAILED status" "ok unmount" >want2 &&
    steps st2.out >got2 && test_cmp want2 got2 &&
    grep -q "^FAILED   status   broker: unreachable" st2.out &&
    grep -q "^selftest: 2 ok, 4 failed; kept $TEST_DIR/st2" st2.out &&
    test -s "$TEST_DIR/st2/fleetfs.log" && ! mountpoint -q "$TEST_DIR/st2/mnt"
'

test_expect_success 'bad usage exits 2' '
    test_expect_code_2() { "$@"; test $? = 2; } &&
    test_expect_code_2 "$ST" --bogus 2>u1 && grep -q "unknown argument: --bogus" u1 &&
    test_expect_code_2 "$ST" --id "Not Valid" 2>u2 && grep -q "not a valid coord_id" u2 &&
    (unset FLEET_BROKER_URI; HOME=$TEST_DIR/nohome XDG_CONFIG_HOME= test_expect_code_2 "$ST" --id st0990n --dir "$TEST_DIR/st4") 2>u3 &&
    grep -q "no broker: set FLEET_BROKER_URI" u3
'

# --local: a private broker as make run starts one (the kind make test's
# shard runs: FLEET_BROKER_KIND), stopped again at the end
test_expect_success 'selftest --local: its own private broker, every step ok, the broker stopped after' '
    (FLEETFS=$FLEETFS "$ST" --local --id st0990l --dir "$TEST_DIR/st3" >st3.out 2>&1; echo $? >st3.rc) &&
    cat st3.out && test "$(cat st3.rc)" = 0 &&
    printf "%s\n" "ok broker" "ok mount" "ok send" "ok read" "ok watch" "ok status" "ok unmount" >want3 &&
    steps st3.out >got3 && test_cmp want3 got3 &&
    grep -q "^ok       broker   a private ${FLEET_BROKER_KIND:-rabbitmq} node" st3.out &&
    pg=$(cat "$TEST_DIR/st3/broker/node.conf" >/dev/null && sed -n "s/^export BROKER_PGID=//p" "$TEST_DIR/st3/broker/env") &&
    test -n "$pg" && test -z "$(pgrep -g "$pg")" &&
    test_must_fail "$FLEET_ROOT/scripts/broker" status --dir "$TEST_DIR/st3/broker" >/dev/null
'

test_done
