#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An unmount the kernel's FUSE connection outlives: a mount namespace made
# while alpha is mounted (here unshare -m, as t0985 and t0900 do; a bwrap
# sandbox or ip netns exec does the same) holds a copy of the mount, and
# with private mounts (no propagation; this machine's) fusermount3 -u here
# does not reach that copy. The daemon exits all the same, as after any
# unmount, and the copy left in the namespace answers ENOTCONN rather than
# a daemon serving on unseen. Before fleetfs/start/gone.c the daemon did
# not exit until that namespace ended (unmount_fleet: "did not exit
# (fusermount3: ok)", its FUSE workers idle in read(2) of /dev/fuse, the
# loop waiting for them): the rare unmount failures of make test, where
# another file's namespace was made during this one's mount.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
unshare -m --propagation private true 2>/dev/null || test_skip_all "unshare -m is not permitted here"
command -v nsenter >/dev/null || test_skip_all "nsenter (util-linux) is not installed"
broker_start_own

in_ns() { nsenter -t "$(cat ns.pid)" -m -- "$@"; }

test_expect_success 'alpha mounted; a mount namespace made then sees it' '
    mount_fleet alpha heartbeat=1s inject=none &&
    { unshare -m --propagation private sleep 100000 & } &&
    echo $! >ns.pid &&
    at_exit "kill $(cat ns.pid) 2>/dev/null; true" &&
    wait_for 5 "test \"\$(readlink /proc/$(cat ns.pid)/ns/mnt)\" != \"\$(readlink /proc/self/ns/mnt)\"" &&
    in_ns grep -qx "coord_id: alpha" "$TEST_DIR/alpha/status"
'

test_expect_success 'fusermount3 -u here: the daemon exits; the copy in the namespace is disconnected' '
    unmount_fleet alpha &&
    ! mountpoint -q alpha &&
    ! in_ns cat "$TEST_DIR/alpha/status" 2>err &&
    cat err &&
    grep -q "Transport endpoint is not connected" err &&
    grep -q "no longer mounted here" alpha.log
'

test_expect_success 'alpha mounts again at the same point and serves' '
    mount_fleet alpha heartbeat=1s inject=none &&
    grep -qx "coord_id: alpha" alpha/status &&
    unmount_fleet alpha
'

test_done
