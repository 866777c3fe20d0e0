#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Waking up on change: inotifywait on inbox, sent and the status files,
# poll() on an open inbox, tail -f.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0400
new_vhost $FLEET_VHOST
POLLWAIT=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/pollwait


test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha
'

# How fast a watcher wakes is make bench's row 3, not asserted here: the
# tests run on a shared machine (the time is printed for the log).
test_expect_success 'inotifywait -e modify on inbox wakes on arrival' '
    (timeout 10 inotifywait -e modify beta/leads/beta/inbox >ev 2>ev.err &) &&
    wait_for 5 "grep -q \"Watches established\" ev.err" &&
    start=$(date +%s%N) &&
    echo "wake up" >alpha/peers/beta/send &&
    wait_for 8 "grep -q MODIFY ev" &&
    echo "# woke $(( ($(date +%s%N) - start) / 1000000 )) ms after the send began" &&
    grep -q "wake up" beta/leads/beta/inbox
'

test_expect_success 'the daemon ignores its own truncate: the inbox is unchanged by it' '
    test $(wc -l <beta/leads/beta/inbox) = 1 &&
    test "$(stat -c %s beta/leads/beta/inbox)" = "$(wc -c <beta/leads/beta/inbox)"
'

test_expect_success 'a user cannot truncate the inbox' '
    test_must_fail truncate -s 0 beta/leads/beta/inbox 2>/dev/null &&
    test $(wc -l <beta/leads/beta/inbox) = 1
'

test_expect_success 'inotifywait on sent wakes when the sender records a message' '
    (timeout 10 inotifywait -e modify alpha/leads/alpha/sent >ev2 2>ev2.err &) &&
    wait_for 5 "grep -q \"Watches established\" ev2.err" &&
    echo "another" >alpha/peers/beta/send &&
    wait_for 3 "grep -q MODIFY ev2"
'

test_expect_success 'inotifywait on a peer status wakes when the peer stops reading (first for its leaving heartbeat)' '
    (timeout 15 inotifywait -e modify alpha/peers/beta/status >ev3 2>ev3.err &) &&
    wait_for 5 "grep -q \"Watches established\" ev3.err" &&
    unmount_fleet beta &&
    wait_for 6 "grep -q MODIFY ev3" &&
    wait_for 3 "grep -q \"^consumers: 0$\" alpha/peers/beta/status" &&
    grep -q "^presence: left" alpha/peers/beta/status
'

test_expect_success 'inotifywait on leads/<me>/status wakes on arrival (held grows)' '
    mount_fleet beta peers=alpha &&
    wait_for 5 "grep -q \"^held: 2$\" beta/leads/beta/status" &&
    (timeout 10 inotifywait -e modify beta/leads/beta/status >ev4 2>ev4.err &) &&
    wait_for 5 "grep -q \"Watches established\" ev4.err" &&
    echo "third" >alpha/peers/beta/send &&
    wait_for 3 "grep -q MODIFY ev4" &&
    grep -q "^held: 3$" beta/leads/beta/status
'

test_expect_success 'poll() on an open inbox wakes on arrival and reads the new line' '
    ($POLLWAIT beta/leads/beta/inbox 5000 >polled 2>&1 &) &&
    wait_for 5 "grep -q ready polled" &&
    echo "poll me" >alpha/peers/beta/send &&
    wait_for 3 "grep -q readable polled" &&
    grep -q "poll me" polled &&
    test $(grep -c msgId polled) = 1
'

test_expect_success 'poll() without arrivals times out (it does not spin on a stale inbox)' '
    test_must_fail $POLLWAIT beta/leads/beta/inbox 700 >quiet &&
    grep -q timeout quiet
'

test_expect_success 'tail -f prints each arrival once; acks in between change nothing' '
    (tail -n +1 -f beta/leads/beta/inbox >tailed 2>&1 & echo $! >tail.pid) &&
    wait_for 5 "test \$(wc -l <tailed) = 4" &&
    echo all >beta/leads/beta/ack &&
    echo "after ack 1" >alpha/peers/beta/send &&
    echo "after ack 2" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"after ack 2\" tailed" &&
    echo "after ack 3" >alpha/peers/beta/send &&
    test_absent 5 "grep -q \"after ack 3\" tailed" "msgids tailed | sort | uniq -d | grep ." &&
    kill $(cat tail.pid) &&
    test $(wc -l <tailed) = 7 &&
    ! grep -q "file truncated" tailed
'

test_expect_success 'a fresh cat shows what is pending now' '
    test $(wc -l <beta/leads/beta/inbox) = 3
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
