#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Unmount and remount beta at once, 10 times (times FAULT_SCALE), while
# alpha sends, the new daemon overlapping the old one for real: the old
# daemon is frozen (SIGSTOP) just before fusermount3 -u and thawed a
# second later, so each new daemon starts while the old process still
# exists and still holds its connection and consumer (asserted for every
# remount: the old pid is alive when the new one is started). Every
# remount succeeds (the old consumer lets go once thawed, or the new one
# waits for it: issue 8 defect 1), and every successful write is consumed
# exactly once, as beta's reader script saw it; nothing is dead-lettered,
# the mailbox ends empty, and after the loop both sides work.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_use_shared
FLEET_VHOST=f0300
new_vhost $FLEET_VHOST
N=$(stream_size 400)
LOOPS=$(scaled 10)
# paced so that the stream outlasts the remounts (2 to 4 s each under load)
PACE=$(awk -v l=$LOOPS -v n=$N 'BEGIN { printf "%.3f", l * 5 / n }')
TAG=f0300

# alive PID: the process exists and is not a zombie
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# mounted DIR: DIR is a mount point, from /proc/self/mountinfo (a stat of
# it would hang on a frozen daemon)
mounted() { awk -v d="$1" '$5 == d { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# remount_overlapping NAME OPT...: freeze NAME's daemon (thawed a second
# later, in the background), fusermount3 -u NAME (lazily if a reader's
# request is stuck in it) and mount NAME again at once; appends "overlap"
# or "sequential" to $TEST_DIR/overlaps (was the old process still there
# when the new one was started?), then waits for the old one to exit
remount_overlapping() {
    local name=$1 old try
    shift
    old=$(cat "$TEST_DIR/.harness/pid.$name") || return 1
    kill -STOP "$old" || return 1
    { sleep 1; kill -CONT "$old"; } </dev/null >/dev/null 2>&1 &
    for try in 1 2 3; do
        fusermount3 -u "$TEST_DIR/$name" 2>/dev/null && break
        mounted "$TEST_DIR/$name" || break
        sleep 0.2
    done
    ! mounted "$TEST_DIR/$name" || fusermount3 -uz "$TEST_DIR/$name" || return 1
    if alive "$old"; then echo overlap; else echo sequential; fi >>"$TEST_DIR/overlaps"
    mount_fleet "$name" "$@" || { kill -CONT "$old"; return 1; }
    wait_for 30 "! alive $old" || { echo "the old daemon $old did not exit"; return 1; }
}

test_expect_success 'alpha and beta mount; a script reads beta'"'"'s inbox and acks what it read' '
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha &&
    reader_start beta
'

test_expect_success "$LOOPS times: beta frozen, fusermount3 -u, a new beta at once (the old one thawed 1 s later), while alpha sends" '
    STREAM_PACE=$PACE stream_start alpha beta '$N' '$TAG' &&
    for i in $(seq 1 '$LOOPS'); do
        remount_overlapping beta peers=alpha || { echo "remount $i failed"; exit 1; }
    done &&
    p=$(stream_progress '$TAG') && echo "remounts done at write $p of '$N'" &&
    test $p -lt '$N' &&
    stream_wait '$TAG' '$(scaled 300)' &&
    o=$(grep -c "^overlap$" overlaps) && echo "$o of '$LOOPS' remounts overlapped the old daemon" | tee overlapped &&
    test $o = '$LOOPS'
'
[[ -f $TEST_DIR/overlapped ]] && sed "s/^/# $TAG: /" "$TEST_DIR/overlapped"

test_expect_success 'reconciliation: every successful write consumed exactly once' '
    after_fault alpha beta '$TAG' &&
    { wait_for 60 "settled '$TAG' beta" || true; } &&
    reconcile '$TAG' beta --min-ok '$N' --faults '$LOOPS'
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly' '
    reader_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
