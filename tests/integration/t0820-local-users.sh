#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tree belongs to the mounting user.  Another local user gets EACCES:
# from the kernel without allow_other, from fleetfs's own mode checks with it.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0820
new_vhost $FLEET_VHOST

[[ $(id -u) -eq 0 ]] || test_skip_all "needs root to create a second local user"
OTHER=fleetfs-other
id "$OTHER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/sh "$OTHER" ||
    test_fail_all "useradd failed as root"
# the other user must be able to reach the mount points
chmod 755 "$TEST_DIR"
as_other() { runuser -u "$OTHER" -- "$@"; }

test_expect_success 'alpha mounts privately, open mounts with allow_other' '
    mount_fleet alpha peers=open &&
    mount_fleet open peers=alpha allow_other
'

test_expect_success 'without allow_other, another user cannot even look' '
    test_must_fail as_other cat alpha/status 2>err && grep -q "Permission denied" err &&
    test_must_fail as_other ls alpha/ 2>err && grep -q "Permission denied" err &&
    test_must_fail as_other sh -c "echo hi >alpha/peers/open/send" 2>err &&
    grep -q "Permission denied" err
'

test_expect_success 'with allow_other, the 0400/0200/0500 modes keep them out' '
    ls -l open/status | grep -q "^-r-------- " &&
    ls -ld open/peers | grep -q "^dr-x------ " &&
    test_must_fail as_other cat open/status 2>err && grep -q "Permission denied" err &&
    test_must_fail as_other ls open/peers 2>err && grep -q "Permission denied" err &&
    test_must_fail as_other cat open/leads/open/inbox 2>err && grep -q "Permission denied" err &&
    test_must_fail as_other sh -c "echo x >open/peers/alpha/send" 2>err &&
    grep -q "Permission denied" err &&
    test_must_fail as_other sh -c "echo all >open/leads/open/ack" 2>/dev/null
'

# The kernel keeps the attributes of directories and of the files one
# writes to for a second (tree.c), and would show them to anyone the mount
# lets in; with allow_other it keeps none, so each stat still asks fleetfs.
test_expect_success 'with allow_other, what the owner just listed is not shown to the other user' '
    ls -l open/peers open/leads/open >/dev/null &&
    test_must_fail as_other stat open/peers/alpha open/leads/open/ack 2>err &&
    test "$(grep -c "Permission denied" err)" = 2
'

test_expect_success 'nothing the other user tried was sent; the owner still works' '
    test ! -s alpha/leads/alpha/inbox &&
    test "$(jq -s length open/leads/open/sent)" = 0 &&
    echo "owner here" >open/peers/alpha/send &&
    wait_for 5 "grep -q \"owner here\" alpha/leads/alpha/inbox"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet open
'

test_done
