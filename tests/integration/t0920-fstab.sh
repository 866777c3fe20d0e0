#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# mount(8) and /etc/fstab: `mount -T FSTAB DIR` and `mount -t fuse.fleetfs
# fleetfs DIR -o ...` through mount.fuse3, with the usual fstab options
# accepted or ignored, the broker URI from an environment file (the
# `set -a; . ENVFILE; exec mount` of fleetfs(1)), an unknown option still
# an error, umount stopping the daemon.
#
# mount(8) clears PATH and mount.fuse3 runs `fleetfs` through /bin/sh, so
# fleetfs must be in the shell's default path: the test installs into a
# DESTDIR and, in a private mount namespace of its own (nothing outside it
# sees), binds that DESTDIR's bin/ over /usr/local/bin. Every command on
# the mounts runs in that namespace (in_ns).
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: mount(8) and fstab options: the same start-up code runs under ASan in t0975" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0920
new_vhost $FLEET_VHOST

command -v mount.fuse3 >/dev/null || test_skip_all "no mount.fuse3 (package fuse3)"
command -v nsenter >/dev/null || test_skip_all "no nsenter (util-linux)"
unshare -m --propagation private true 2>/dev/null || test_skip_all "unshare -m is not permitted here"

D=$TEST_DIR/root
B=${FLEETFS_BUILD:-build}
export D B

in_ns() {
    nsenter -t "$(cat "$TEST_DIR/ns.pid")" -m -- "$@"
}

test_expect_success 'set-up: installed fleetfs on the default PATH of a private mount namespace' '
    make -s -C "$FLEET_ROOT" install B="$B" DESTDIR="$D" >install.out 2>&1 &&
    { unshare -m --propagation private sleep 100000 & } &&
    echo $! >ns.pid &&
    at_exit "in_ns sh -c \"grep -o \\\" $TEST_DIR/[^ ]*\\\" /proc/self/mounts | sort -r | xargs -r -n1 umount -l\"; kill $(cat ns.pid); true" &&
    wait_for 5 "test \"\$(readlink /proc/$(cat ns.pid)/ns/mnt)\" != \"\$(readlink /proc/self/ns/mnt)\"" &&
    in_ns mount --bind "$D/usr/local/bin" /usr/local/bin &&
    in_ns env -i /bin/sh -c "command -v fleetfs" >where &&
    test "$(cat where)" = /usr/local/bin/fleetfs &&
    in_ns cmp /usr/local/bin/fleetfs "$D/usr/local/bin/fleetfs" &&
    ! grep -q " /usr/local/bin " /proc/self/mounts
'

# keys, trust and the rest in a config file; the URI only in the env file
fleet_key fs1 && fleet_key fs2 && fleet_key fs3 || exit 1
for n in fs1 fs2 fs3; do
    printf "[fleetfs]\nvhost = %s\nkey = %s\ntrusted_keys = %s\nstate_dir = %s\n" \
        "$FLEET_VHOST" "$TEST_DIR/keys/$n.key" "$TEST_DIR/trust" "$TEST_DIR/state/$n" >"$n.conf"
    mkdir -p "$n"
done
install -m 0600 /dev/null broker.env
echo "FLEET_BROKER_URI=$(broker_uri $FLEET_VHOST)" >broker.env
cat >fstab <<EOT
# fleetfs, as in fleetfs(1)
fleetfs  $TEST_DIR/fs1  fuse.fleetfs  _netdev,nofail,coord_id=fs1,peers=fs2,config=$TEST_DIR/fs1.conf  0  0
fleetfs  $TEST_DIR/fs3  fuse.fleetfs  defaults,noauto,user,users,auto,rw,noatime,x-systemd.automount,x-systemd.requires=network-online.target,x-systemd.mount-timeout=30s,comment=fleet,coord_id=fs3,config=$TEST_DIR/fs3.conf  0  0
EOT

test_expect_success 'mount -T FSTAB: the fstab line, the URI from the env file' '
    cat fstab &&
    in_ns sh -c "set -a; . $TEST_DIR/broker.env; exec mount -T $TEST_DIR/fstab $TEST_DIR/fs1" 2>fs1.log &&
    in_ns findmnt -n -o FSTYPE,SOURCE "$TEST_DIR/fs1" >mnt &&
    cat mnt && test "$(cat mnt)" = "fuse.fleetfs fleetfs" &&
    in_ns grep -q "^coord_id: fs1$" "$TEST_DIR/fs1/status" &&
    in_ns grep -q "^broker: connected$" "$TEST_DIR/fs1/status" &&
    in_ns ls "$TEST_DIR/fs1/peers" | grep -qx fs2 &&
    ! grep -q "guest:guest" fs1.log
'

test_expect_success 'the usual fstab options (defaults, noauto, user, x-systemd.*, ...) are no error' '
    in_ns sh -c "set -a; . $TEST_DIR/broker.env; exec mount -T $TEST_DIR/fstab $TEST_DIR/fs3" 2>fs3.log &&
    in_ns grep -q "^coord_id: fs3$" "$TEST_DIR/fs3/status" &&
    in_ns findmnt -n -o OPTIONS "$TEST_DIR/fs3" >opts && cat opts &&
    grep -q noatime opts && grep -q noexec opts &&
    ! grep -q "unknown option" fs3.log
'

test_expect_success 'mount -t fuse.fleetfs fleetfs DIR -o ...: the command line form' '
    in_ns sh -c "set -a; . $TEST_DIR/broker.env; exec mount -t fuse.fleetfs fleetfs $TEST_DIR/fs2 -o coord_id=fs2,peers=fs1,config=$TEST_DIR/fs2.conf" 2>fs2.log &&
    in_ns grep -q "^coord_id: fs2$" "$TEST_DIR/fs2/status" &&
    in_ns sh -c "echo \"hello through fstab\" >$TEST_DIR/fs1/peers/fs2/send" &&
    wait_for 5 "in_ns grep -q \"hello through fstab\" $TEST_DIR/fs2/leads/fs2/inbox"
'

# the mount table as fleetfs reads it (fleetfs/os/os_mounts.c): with no
# mount named, fleetfs ask (and fleetfs mcp) look for this user's
# fuse.fleetfs mounts there, and with three name them all, in mount order.
# The namespace began as a copy of the machine's table: other fleetfs
# mounts there are detached first, in this namespace only (private)
test_expect_success 'fleetfs ask with no mount named finds the three in the mount table' '
    in_ns findmnt -rn -t fuse.fleetfs -o TARGET | grep -v "^$TEST_DIR/" | while read -r m; do
        in_ns umount -l "$m" || exit 1
    done &&
    test_must_fail in_ns env -u FLEET "$FLEETFS" ask fs2 hi 2>pick.err &&
    cat pick.err &&
    grep -qxF "fleetfs ask: 3 fleetfs mounts of yours ($TEST_DIR/fs1, $TEST_DIR/fs3, $TEST_DIR/fs2); name one: fleetfs ask MOUNTPOINT" pick.err
'

test_expect_success 'a real unknown option still fails the mount, with the message' '
    mkdir -p bad &&
    test_must_fail in_ns sh -c "set -a; . $TEST_DIR/broker.env; exec mount -t fuse.fleetfs fleetfs $TEST_DIR/bad -o coord_id=bad,bogus=1,config=$TEST_DIR/fs1.conf" 2>bad.err &&
    cat bad.err && grep -q "unknown option .bogus." bad.err &&
    ! in_ns mountpoint -q "$TEST_DIR/bad"
'

test_expect_success 'umount stops each daemon' '
    # EBUSY while a request is in flight: retry, as unmount_fleet does
    for m in fs1 fs2 fs3; do
        wait_for 10 "in_ns umount $TEST_DIR/$m 2>/dev/null || ! in_ns mountpoint -q $TEST_DIR/$m" || exit 1
    done &&
    wait_for 10 "grep -q unmounted fs1.log && grep -q unmounted fs2.log && grep -q unmounted fs3.log" &&
    ! grep -E "ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:" fs1.log fs2.log fs3.log &&
    ! in_ns mountpoint -q "$TEST_DIR/fs1"
'

test_expect_success 'fleetfs SOURCE MOUNTPOINT directly; a third positional is an error' '
    test_must_fail "$FLEETFS" fleetfs a b -o coord_id=x 2>err &&
    grep -q "one mount point only" err &&
    "$FLEETFS" fleetfs --help >/dev/null &&
    test_must_fail "$FLEETFS" fleetfs "$TEST_DIR/bad" -f -o coord_id=x,nonsense 2>err &&
    grep -q "unknown option .nonsense." err &&
    test_must_fail "$FLEETFS" fleetfs "$TEST_DIR/bad" -f -o coord_id=x,x-systemd.automount,_netdev,nofail,defaults,bogus2 2>err &&
    grep -q "unknown option .bogus2." err && ! grep -q "x-systemd" err && ! grep -q "_netdev" err
'

test_done
