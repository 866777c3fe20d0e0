#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A cancel that comes after its claim was given up (doc/claims.md, "Held
# by the broker, lost with the connection") concerns nobody: the claims
# connection and the other claims stay. Made deterministic with
# tests/tools/freezeproxy (as t1107): the link stops reading and a burst
# of notes blocks alpha's claims thread in a send; meanwhile x's lock is
# deleted on the broker (its basic.cancel reaches alpha's socket, unread)
# and alpha's rmdir of x is queued behind the notes; the link thawed, the
# release's channel.close reads the cancel before its close-ok. Before the
# fix the cancel, met afterwards on a channel no claim used, dropped the
# whole connection and alpha's other claim y with it (f1140 hit this on a
# cluster partition). What the broker holds is read by claimpeek.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1111
new_vhost $FLEET_VHOST
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
[[ $FLEETFS_BUILD == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek
URI=$(broker_uri $FLEET_VHOST)
thaw() { rm -f "$TEST_DIR/freeze"; }

test_expect_success 'alpha reaches the broker through the proxy and holds x and y' '
    { "$FLEET_ROOT/tests/tools/freezeproxy" proxy.port "$BROKER_PORT" "$TEST_DIR/freeze" & } &&
    at_exit "kill $! 2>/dev/null; true" &&
    wait_for 5 "test -s proxy.port" &&
    FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:$(cat proxy.port)/$FLEET_VHOST \
        FLEETFS_TEST_SNDBUF=4096 mount_fleet alpha inject=none &&
    wait_for 10 "grep -q \"claims: connected\" alpha.log" &&
    mkdir alpha/claims/x && mkdir alpha/claims/y &&
    "$PEEK" "$URI" x | grep -qx "consumers 1 tokens 1 max 1 holder alpha" &&
    "$PEEK" "$URI" y | grep -qx "consumers 1 tokens 1 max 1 holder alpha"
'

test_expect_success 'claims thread blocked in a send; x deleted on the broker; rmdir x queued; thawed: rmdir succeeds, y is still alpha'"'"'s, the connection stays' '
    at_exit thaw &&
    pad=$(head -c 1000 /dev/zero | tr "\\0" n) &&
    echo 0 >freeze &&
    for i in $(seq 100); do echo "$i $pad" >alpha/claims/y/note || return 1; done &&
    rmqctl delete_queue -p $FLEET_VHOST fleet.claim.x >/dev/null &&
    { { rmdir alpha/claims/x 2>rmdir.err; echo $? >rmdir.rc; } & } &&
    _nap 0.5 &&
    thaw &&
    wait_for 10 "test -s rmdir.rc" &&
    cat rmdir.err && test "$(cat rmdir.rc)" = 0 &&
    grep -q "claims: released x (token 1)" alpha.log &&
    "$PEEK" "$URI" y >p && cat p && grep -qx "consumers 1 tokens 1 max 1 holder alpha" p &&
    test -d alpha/claims/y &&
    test_must_fail grep "claims: connection to .* lost" alpha.log &&
    test_must_fail grep "lost claim y" alpha.log &&
    test "$(grep -c "claims: connected to" alpha.log)" = 1
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha
'

test_done
