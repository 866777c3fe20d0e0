#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An interval that grows with the fleet (doc/scaling.md, step 3): with N
# leads heartbeating, a lead heartbeats every max(heartbeat, N/heartbeat_rate
# seconds), so that each host hears at most about heartbeat_rate heartbeats
# a second however large the fleet, and comes back to `heartbeat` when the
# fleet shrinks. Listeners judge staleness by the interval each heartbeat
# announces, so a slower lead is not called stale.
#
# Counted by the broker: a queue of the test's own is bound to delta's
# heartbeats only. A heartbeat expires in the queue after three intervals
# and is then dead-lettered to fleet.dlq (the queue has a mailbox's
# arguments), where it stays: the two counts together are every heartbeat
# delta published since the bind.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1005
new_vhost $FLEET_VHOST
HBPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/hbpub
[[ $FLEETFS_BUILD == /* ]] && HBPUB=$FLEETFS_BUILD/tools/hbpub
TRY=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/amqptry
[[ ${FLEETFS_BUILD:-} == /* ]] && TRY=$FLEETFS_BUILD/tools/amqptry
URI=$(broker_uri $FLEET_VHOST)
Q=t1005.delta.beats


test_expect_success 'delta alone (heartbeat=1s, heartbeat_rate=2) heartbeats every second' '
    mount_fleet delta inject=none heartbeat=1s heartbeat_rate=2 &&
    mount_fleet echo peers=delta inject=none heartbeat=1s heartbeat_rate=0 &&
    "$TRY" "$URI" declare-mailbox $Q &&
    "$TRY" "$URI" bind $Q fleet.roster "roster.#.delta" &&
    wait_for 5 "grep -q \"^presence: live\" echo/peers/delta/status" &&
    roster_rate_for alone 8 &&
    test $(cat alone) -ge 60 && test $(cat alone) -le 140 &&
    grep -q "heartbeat every 1000 ms" delta/status
'

test_expect_success 'seven more leads: delta goes every 5 s (9 leads with echo, at 2 a second), and says so' '
    mkdir -p hbkeys &&
    { "$HBPUB" "$URI" --flood 7 --key-dir hbkeys --trust trust --interval 1000 --seconds 60 >hb.out 2>&1 & } &&
    echo $! >hb.pid &&
    wait_for 15 "grep -q \"9 leads heartbeat (ourselves included): ours goes every 5000 ms now\" delta.log" &&
    grep -q "heartbeat every 5000 ms" delta/status &&
    roster_rate_for crowded 12 &&
    test $(cat crowded) -ge 5 && test $(cat crowded) -le 35
'

test_expect_success 'a listener with a 1 s interval of its own still sees delta live' '
    presence_of echo delta | grep -q "^live"
'

test_expect_success 'the seven go: delta heartbeats every second again' '
    kill $(cat hb.pid) &&
    wait_for 20 "grep \"leads heartbeat (ourselves included)\" delta.log >delta.beat && tail -n1 delta.beat | grep -q \"ours goes every 1000 ms now\"" &&
    roster_rate_for again 8 &&
    test $(cat again) -ge 60 &&
    presence_of echo delta | grep -q "^live"
'

test_expect_success 'a bad heartbeat_rate is refused with what it takes, nothing mounted' '
    mkdir -p m &&
    test_must_fail "$FLEETFS" m -f -o coord_id=x,insecure,heartbeat_rate=many 2>err &&
    cat err &&
    grep -q "heartbeat_rate" err && grep -q "0..100000" err &&
    ! mountpoint -q m
'

test_expect_success 'unmount cleanly' '
    unmount_fleet delta && unmount_fleet echo
'

test_done
