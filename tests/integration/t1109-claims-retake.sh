#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A claim released and taken again at once by its holder, as a script that
# takes a lock around each step does (and tests/bench/claimtime, which the
# bench smoke run of make test runs): mkdir, rmdir, mkdir of the same name
# in a row must each succeed, and the broker must show one grant a round
# (tests/tools/claimpeek: the largest token), never fleetfs's own word.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1109
new_vhost $FLEET_VHOST
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
[[ $FLEETFS_BUILD == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek
URI=$(broker_uri $FLEET_VHOST)

test_expect_success 'alpha mounts' '
    mount_fleet alpha &&
    wait_for 10 "grep -q \"^broker: connected\" alpha/status" &&
    wait_for 10 "grep -q \"claims: connected\" alpha.log"
'

test_expect_success 'twenty rounds of mkdir then rmdir of one name, back to back: every one succeeds' '
    for i in $(seq 20); do
        mkdir alpha/claims/again 2>>err || { echo "round $i: mkdir: $(tail -n 1 err)"; exit 1; }
        rmdir alpha/claims/again 2>>err || { echo "round $i: rmdir: $(tail -n 1 err)"; exit 1; }
    done
'

test_expect_success 'the broker granted it twenty times (its largest token), and holds it no more' '
    "$PEEK" "$URI" again >peek &&
    cat peek &&
    grep -q "consumers 0" peek &&
    grep -q "max 20" peek
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha
'

test_done
