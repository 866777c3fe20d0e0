#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Nothing blocks without bound (issue 16, 2.4): a broker that stops reading
# what beta sends but still talks to it (heartbeats go on), which is what a
# resource alarm or a wedged proxy does and a SIGSTOP cannot (a stopped
# broker also stops its heartbeats, and rabbitmq-c gives up on those). Made
# with tests/tools/freezeproxy between beta and the broker. beta holds
# messages and sends a large one (one write of 900 KB); the proxy stops
# reading 20 KB into it, so the publish (not an RPC with its own timeout)
# is what meets the frozen link and blocks once the socket buffers are full
# (FLEETFS_TEST_SNDBUF keeps beta's small: loopback's autotuned ones would
# take the whole message). Expected: `echo all > ack` returns (the messages are
# consumed here; their broker acks follow, or the redeliveries are acked),
# status leaves "connected", and unmount returns, all while the proxy is
# still frozen; thawed, nothing is lost or dead-lettered (broker counts).
# The 30 s bounds only tell a hang from slowness (the broker itself gives up
# on the silent connection after about a minute, which ends the old hang).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

N=30
thaw() { rm -f "$TEST_DIR/freeze"; }

test_expect_success 'beta reaches the broker through the proxy; alpha sends, beta holds' '
    { "$FLEET_ROOT/tests/tools/freezeproxy" proxy.port "$BROKER_PORT" "$TEST_DIR/freeze" & } &&
    at_exit "kill $! 2>/dev/null; true" &&
    wait_for 5 "test -s proxy.port" &&
    mount_fleet alpha peers=beta &&
    FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:$(cat proxy.port)/%2f FLEETFS_TEST_SNDBUF=8192 \
        mount_fleet beta peers=alpha inject=none max_message=1000KiB &&
    wait_for 10 "grep -q \"^consumer: ok$\" beta/status" &&
    grep -q "^broker_uri: .*:$(cat proxy.port)/" beta/status &&
    for i in $(seq $N); do echo "held $i" >alpha/peers/beta/send || return 1; done &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = $N"
'

test_expect_success 'the broker stops reading: a large send blocks in send(), ack all still returns' '
    at_exit thaw &&
    head -c 900000 /dev/zero | tr "\\0" x >big &&
    echo 20000 >freeze &&
    { dd if=big of=beta/peers/alpha/send bs=1M 2>/dev/null & } &&
    sleep 4 &&
    timeout 30 sh -c "echo all >beta/leads/beta/ack" &&
    test ! -s beta/leads/beta/inbox
'

test_expect_success 'status leaves connected while the broker does not read' '
    wait_for 30 "! grep -q \"^broker: connected$\" beta/status"
'

test_expect_success 'unmount returns while the broker still does not read' '
    timeout 30 sh -c "until fusermount3 -u beta 2>/dev/null; do sleep 0.3; done" &&
    wait_for 60 "fleet_gone beta" &&
    ! mountpoint -q beta
'

test_expect_success 'thawed: nothing held is lost or shown again, nothing dead-lettered' '
    thaw &&
    mount_fleet beta peers=alpha inject=none &&
    wait_for 20 "grep -q \"^consumer: ok$\" beta/status" &&
    wait_for 20 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    test ! -s beta/leads/beta/inbox &&
    n=$(broker_count fleet.dlq) && test "$n" = 0
'

# A send handed over while the publishing thread is stuck in a send(2)
# keeps its send_timeout: the watchdog tells it ETIMEDOUT about a second
# late at most. Before, its deadline started only when the stuck thread
# took it, which was after the connection had been dropped, and the write
# failed ECOMM (not connected) instead, later than send_timeout.
test_expect_success 'gamma (through the proxy) is stuck in a large send: a small send handed over meanwhile fails ETIMEDOUT at send_timeout, not ECOMM' '
    at_exit thaw &&
    FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:$(cat proxy.port)/%2f FLEETFS_TEST_SNDBUF=8192 \
        mount_fleet gamma peers=alpha inject=none max_message=1000KiB send_timeout=1s &&
    wait_for 10 "grep -q \"^consumer: ok$\" gamma/status" &&
    echo 20000 >freeze &&
    { dd if=big of=gamma/peers/alpha/send bs=1M 2>/dev/null & } &&
    sleep 0.5 &&
    "$FLEET_ROOT/tests/tools/fdwrites" gamma/peers/alpha/send stuck 1 stuck.rc &&
    cat stuck.rc && test "$(cat stuck.rc)" = ETIMEDOUT &&
    thaw &&
    wait_for 30 "grep -q \"^broker: connected$\" gamma/status"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
