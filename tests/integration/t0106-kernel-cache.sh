#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the kernel may keep (fleetfs/face/tree.c, doc/benchmarks.md "ls -l
# peers/"): the attributes of directories and of the files one writes to,
# for a second; never those of files whose size changes (sent, the inbox,
# status), so stat and tail -f see the size of now.  Seen from outside:
# with the daemon stopped (SIGSTOP), a stat the kernel answers from what it
# kept returns at once, and one that needs the daemon waits until killed.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0106
new_vhost $FLEET_VHOST

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta:gamma &&
    mount_fleet beta peers=alpha
'

test_expect_success 'stat sees sent and the inbox grow right after a change' '
    echo first >alpha/peers/beta/send &&
    wait_for 5 "grep -q first beta/leads/beta/inbox" &&
    sent=$(stat -c %s alpha/leads/alpha/sent) &&
    inbox=$(stat -c %s beta/leads/beta/inbox) &&
    test "$inbox" = "$(wc -c <beta/leads/beta/inbox)" &&
    echo second >alpha/peers/beta/send &&
    test "$(stat -c %s alpha/leads/alpha/sent)" -gt "$sent" &&
    test "$(stat -c %s alpha/leads/alpha/sent)" = "$(wc -c <alpha/leads/alpha/sent)" &&
    wait_for 5 "grep -q second beta/leads/beta/inbox" &&
    test "$(stat -c %s beta/leads/beta/inbox)" -gt "$inbox" &&
    test "$(stat -c %s beta/leads/beta/inbox)" = "$(wc -c <beta/leads/beta/inbox)"
'

# Right after `ls -l`, with alpha's daemon stopped: the peers' directories
# and ack (kept) still stat; sent (asked every time) waits until killed.
# Tried three times: a second lost to a busy machine between the ls and
# the stat lets the kept attributes lapse, which is not a failure.
# A timeout of 0 still holds until the kernel's clock ticks once (a jiffy:
# 10 ms at HZ=100), so sent is stat'ed 50 ms after the ls: on a fast
# machine (CI) the stat came within the same tick and was answered from
# the listing.
test_expect_success 'ls -l needs no request per entry; sent is asked afresh' '
    pid=$(cat .harness/pid.alpha) &&
    for i in 1 2 3; do
        ls -l alpha/peers alpha/leads/alpha >/dev/null &&
        kill -STOP $pid &&
        { timeout -s KILL 2 stat -c "%n %A" alpha/peers/beta alpha/peers/gamma alpha/leads/alpha/ack >kept 2>&1
          kept=$?
          sleep 0.05
          timeout -s KILL 1 stat -c %s alpha/leads/alpha/sent >/dev/null 2>&1
          asked=$?
          kill -CONT $pid; } &&
        test $kept = 0 && break
    done &&
    cat kept &&
    test $kept = 0 && test $asked = 137 &&
    printf "%s\n" "alpha/peers/beta dr-x------" "alpha/peers/gamma dr-x------" \
        "alpha/leads/alpha/ack --w-------" >want &&
    test_cmp want kept &&
    grep -q "^broker: connected$" alpha/status
'

test_expect_success 'tail -f sees each arrival while ls -l runs beside it' '
    { tail -f beta/leads/beta/inbox >tailed 2>&1 & echo $! >tail.pid; } &&
    wait_for 5 "grep -q second tailed" &&
    ls -l beta/leads/beta beta/peers >/dev/null &&
    echo third >alpha/peers/beta/send &&
    wait_for 5 "grep -q third tailed" &&
    kill $(cat tail.pid) &&
    test "$(grep -c "\"body\":\"third\"" tailed)" = 1
'

test_done
