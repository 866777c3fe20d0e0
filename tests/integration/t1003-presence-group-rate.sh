#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Group heartbeats at a bounded rate (issue 33; doc/presence.md "Group
# heartbeats", doc/scaling.md): with fleet_view=groups a host's heartbeat
# carries its group words only every group interval Ig = max(heartbeat,
# G/group_rate s), G the members of its groups it hears; its other
# heartbeats go under the plain key, which still reaches the leads that
# name it (a configured peer, a lead that addressed it). A member heard
# only through the group is judged against three group intervals: never
# stale while alive, stale within about 3 x Ig once dead. group_rate=0 is
# the old behaviour: every heartbeat to the group.
#
# Heartbeats every second here; group_rate=1 with four members makes Ig
# 4 s. Counted by the broker: a queue of the test's own, bound first the
# way a member's roster queue is bound to the group (roster.#.g=gr.#), then
# the way a configured peer's is bound to one lead (roster.#.m4). A
# heartbeat expires in it after three intervals and is dead-lettered to
# fleet.dlq, where it stays (the queue has a mailbox's arguments): the two
# counts together are every heartbeat routed to it since the first bind.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1003
new_vhost $FLEET_VHOST
TRY=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/amqptry
[[ ${FLEETFS_BUILD:-} == /* ]] && TRY=$FLEETFS_BUILD/tools/amqptry
URI=$(broker_uri $FLEET_VHOST)
Q=t1003.counted

HB=heartbeat=1s
V=fleet_view=groups
R=group_rate=1
# presence of ID as MOUNT shows it, read the way a user would without
# addressing it (a lookup of peers/ID by name would address an unlisted
# lead; hosts/ and roster never do)
host_presence() { sed -n 's/^presence: //p' "$1/hosts/$2/status"; }
roster_presence() { jq -r "select(.coord_id == \"$2\") | .presence" "$1/roster"; }
live() { host_presence "$1" "$2" | grep -q "^live (" && test "$(roster_presence "$1" "$2")" = live; }
stale() { host_presence "$1" "$2" | grep -q "^stale ("; }
took() { echo "$1: $(( $(now_ms) - $2 )) ms" | tee -a "$TEST_DIR/times"; }

test_expect_success 'four members of gr (heartbeat=1s, group_rate=1) and p1 (m4 its configured peer): all live; each member goes to the group every 4 s' '
    for m in m1 m2 m3 m4; do mount_fleet $m groups=gr inject=none $HB $V $R || return 1; done &&
    mount_fleet p1 peers=m4 inject=none $HB $V &&
    wait_for 15 "live m1 m2 && live m1 m3 && live m1 m4 && live m2 m1 && live m3 m1 && live m4 m1 && live p1 m4" &&
    for m in m1 m2 m3 m4; do
        wait_for 15 "grep -q \"^presence: connected (heartbeat every 1000 ms, to our groups every 4000 ms\" $m/status" || return 1
    done &&
    grep -q "4 members of our groups heard (ourselves included): our heartbeat goes to our groups every 4000 ms" m1.log
'

test_expect_success 'the broker counts: a member'"'"'s group binding gets the group heartbeats (4 members every 4 s), a configured peer'"'"'s binding every heartbeat of its lead' '
    "$TRY" "$URI" declare-mailbox $Q &&
    "$TRY" "$URI" bind $Q fleet.roster "roster.#.g=gr.#" &&
    roster_rate_for group 12 &&
    test $(cat group) -ge 50 && test $(cat group) -le 170 &&
    "$TRY" "$URI" unbind $Q fleet.roster "roster.#.g=gr.#" &&
    sleep 1 &&
    "$TRY" "$URI" bind $Q fleet.roster "roster.#.m4" &&
    roster_rate_for peer 8 &&
    test $(cat peer) -ge 60
'

test_expect_success 'alive members are never called stale over four group intervals' '
    : >seen &&
    for i in $(seq 16); do
        for m in m1 m2 m3; do
            for o in m1 m2 m3 m4; do
                test $m = $o && continue
                echo "$m $o $(host_presence $m $o | cut -d" " -f1) $(roster_presence $m $o)" >>seen
            done
        done
        sleep 1
    done &&
    test $(wc -l <seen) = 144 &&
    ! grep -v " live live$" seen &&
    ! grep -l "is stale" m1.log m2.log m3.log m4.log p1.log
'

test_expect_success 'kill -9 of m4: its configured peer p1 calls it stale within three intervals, while m1 still hears it live; the members within three group intervals; m2, which writes to it, within three intervals of the write' '
    t0=$(now_ms) &&
    kill_fleet m4 &&
    echo "are you there, m4?" >m2/peers/m4/send &&
    tw=$(now_ms) &&
    wait_for 5 "stale p1 m4" &&
    took "m4 killed -> stale at p1 (configured: 3 x 1 s)" $t0 &&
    live m1 m4 &&
    live m3 m4 &&
    wait_for 4.5 "stale m2 m4" &&
    took "m2 wrote to the killed m4 -> stale at m2 (addressed: asked, no answer)" $tw &&
    live m1 m4 &&
    wait_for 14 "stale m1 m4 && stale m3 m4" &&
    took "m4 killed -> stale at m1 and m3 (group only: 3 x 4 s after its last group heartbeat)" $t0 &&
    test $(( $(now_ms) - t0 )) -le 16000 &&
    wait_for 2 "grep -q \"m4 is stale: no heartbeat for [0-9]*s (3 of its group intervals, 4000 ms each)\" m1.log" &&
    grep -q "m4 is stale: no heartbeat for [0-9]*s (3 of its intervals, 1000 ms each)" p1.log
'

test_expect_success 'm5 joins gr: every member hears it within two intervals' '
    t0=$(now_ms) &&
    mount_fleet m5 groups=gr inject=none $HB $V $R &&
    wait_for 2 "test \"\$(roster_presence m1 m5)\" = live && test \"\$(roster_presence m2 m5)\" = live && test \"\$(roster_presence m3 m5)\" = live" &&
    took "m5 mounted -> live at m1, m2, m3" $t0 &&
    wait_for 12 "live m5 m1 && live m5 m2 && live m5 m3" &&
    took "m5 mounted -> m5 hears m1, m2, m3 (their group heartbeats)" $t0
'

test_expect_success 'group_rate=0: every heartbeat to the group, as before (z1, z2 in gz: 2 a second)' '
    mount_fleet z1 groups=gz inject=none $HB $V group_rate=0 &&
    mount_fleet z2 groups=gz inject=none $HB $V group_rate=0 &&
    wait_for 10 "live z1 z2 && live z2 z1" &&
    grep -q "^presence: connected (heartbeat every 1000 ms, to our groups every 1000 ms" z1/status &&
    "$TRY" "$URI" unbind $Q fleet.roster "roster.#.m4" &&
    sleep 1 &&
    "$TRY" "$URI" bind $Q fleet.roster "roster.#.g=gz.#" &&
    roster_rate_for rate0 8 &&
    test $(cat rate0) -ge 140
'

test_expect_success 'a bad group_rate is refused with what it takes, nothing mounted' '
    mkdir -p bad &&
    test_must_fail "$FLEETFS" bad -f -o coord_id=x,insecure,group_rate=fast 2>err &&
    cat err &&
    grep -q "group_rate" err && grep -q "0..100000" err &&
    ! mountpoint -q bad
'

test_expect_success 'unmount cleanly' '
    for m in m1 m2 m3 m5 p1 z1 z2; do unmount_fleet $m || return 1; done
'

test_done
