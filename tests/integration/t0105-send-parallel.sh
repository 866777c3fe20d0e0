#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writers who share one send file publish side by side (issue 19, bench row
# 1c). Four writers each open groups/all/send once (no O_TRUNC, as a
# program that keeps its fd does) and write one message at the same time.
# A queue of the test's own, bound to the broadcast key, has its process
# suspended inside the broker, so every publish to it is taken and not
# confirmed until the test resumes it: while the four writes wait, the
# broker itself counts the unconfirmed publishes on alpha's channel. Before
# the fix the kernel let one write to a FUSE file in at a time (the inode
# lock across the whole request), so the broker never saw more than one.
# A broadcast has no probe before its publish, which would itself wait on
# a suspended queue. After the resume every write returns success and the
# queue holds the four messages.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0105
new_vhost $FLEET_VHOST
TRY=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/amqptry
[[ ${FLEETFS_BUILD:-} == /* ]] && TRY=$FLEETFS_BUILD/tools/amqptry
URI=$(broker_uri $FLEET_VHOST)

# the broker's count of unconfirmed publishes on this vhost's channels
unconfirmed() {
    rmqctl list_channels -q vhost messages_unconfirmed |
        awk -v vh="$FLEET_VHOST" '$1 == vh { n += $2 } END { print n + 0 }'
}

# writer N: one open, one write(2), close; its exit status is the write's
write_one() {
    python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, sys.argv[2].encode())
os.close(fd)' alpha/groups/all/send "parallel $1"
}

test_expect_success 'alpha mounts; a queue of our own takes broadcasts to all and stops answering' '
    mount_fleet alpha peers=beta send_timeout=60s &&
    wait_for 10 "test -e alpha/groups/all/send" &&
    "$TRY" "$URI" declare-queue t0105.slow &&
    "$TRY" "$URI" bind t0105.slow fleet.msg broadcast.all &&
    queue_process suspend t0105.slow &&
    at_exit "queue_process resume t0105.slow"
'

test_expect_success 'four writers on one send: the broker has four publishes unconfirmed at once' '
    for i in 1 2 3 4; do
        (write_one $i; echo $? >w$i.rc) &
    done &&
    wait_for 20 "test \$(unconfirmed) -ge 4" &&
    test ! -e w1.rc && test ! -e w4.rc
'

test_expect_success 'the queue answers again: all four writes succeed, four messages in the queue' '
    queue_process resume t0105.slow &&
    wait_for 20 "test -e w1.rc && test -e w2.rc && test -e w3.rc && test -e w4.rc" &&
    cat w1.rc w2.rc w3.rc w4.rc >rcs && printf "0\n0\n0\n0\n" >want && test_cmp want rcs &&
    wait_for 10 "test \"\$(broker_count t0105.slow)\" = 4" &&
    test "$(jq -r .state alpha/leads/alpha/sent | sort | uniq -c | awk "{print \$1, \$2}")" = "4 published"
'

test_done
