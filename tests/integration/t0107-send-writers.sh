#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Four writers on one send, each on its own fd, writing at once (issue 32,
# SPEC section 6 revised: the writer's thread signs and encodes and hands
# the bytes over; the publishing thread publishes, records the `sent` line
# on the confirm and answers the write itself, or ETIMEDOUT at
# send_timeout from its timer).
#
# What is counted is the test's own: every write's return, the broker's
# count of lead.sink.inbox, what sink's reader reads. Each message is
# confirmed (its write returned its length), is in the mailbox once (the
# broker's count), is read once (the reader), and is in alpha's sent once
# with a state that says the broker took it.
#
# Then the broker freezes (SIGSTOP) with four writes under way: all four
# fail ETIMEDOUT and nobody is left waiting. While they wait, no FUSE
# worker thread of the daemon sits in the kernel waiting for anything but
# the next request: the writes are held by the publishing thread's
# requests, not by FUSE threads blocked on a condition (what the design
# before issue 32 did: each waiting write held one libfuse worker in a
# futex wait; this check fails on that code). Then the same with four ask
# writes (peers/sink/ask), which go the publishing thread's way too. No
# timing is asserted: the bounds only tell a hang from slowness.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

W=4
M=50

# writers WHAT N [GO [FILE]]: $W writers, each one open (no O_TRUNC) and N
# writes of "WHAT wI mJ" on alpha/peers/sink/FILE (send; ask: opened
# read-write, as an asker does), all at once (with GO: each opens, then
# waits for the file GO before its first write, so that all write within
# milliseconds of it, whatever the machine's load); writer I leaves
# WHAT.I.rc: "ok N" when every write returned its full length, else the
# errno's name of the first that failed
writers() {
    local what=$1 n=$2 go=${3:-} file=${4:-send} i
    for ((i = 1; i <= W; i++)); do
        "$FLEET_ROOT/tests/tools/fdwrites" "alpha/peers/sink/$file" "$what w$i" "$n" \
            "$what.$i.rc" "$what.$i.ready" "$go" &
        echo $! >>"$what.pids"
    done
}

# in_write WHAT: how many of WHAT's writers wait inside a write(2) on the
# mount (the kernel's FUSE request wait)
in_write() {
    local p n=0
    for p in $(cat "$1.pids"); do
        [[ $(cat "/proc/$p/wchan" 2>/dev/null) == *request_wait_answer* ]] && n=$((n + 1))
    done
    echo "$n"
}

# all_done WHAT [EXT]: every writer of WHAT has finished (EXT ready: has
# opened the file and waits for GO)
all_done() {
    local i
    for ((i = 1; i <= W; i++)); do test -e "$1.$i.${2:-rc}" || return 1; done
}

# futex_workers PID: the daemon's threads without a name of their own
# (libfuse's workers and the main thread, all named after the program;
# fleetfs's own threads are named) that wait in a futex
futex_workers() {
    local pid=$1 main t n=0
    main=$(cat "/proc/$pid/comm")
    for t in /proc/"$pid"/task/*; do
        [[ $(cat "$t/comm" 2>/dev/null) == "$main" ]] || continue
        [[ $(cat "$t/wchan" 2>/dev/null) == futex* ]] && n=$((n + 1))
    done
    echo "$n"
}

test_expect_success 'alpha mounts; sink is configured, nobody reads it yet' '
    mount_fleet alpha peers=sink send_timeout=2s &&
    wait_for 10 "grep -q \"^broker: connected$\" alpha/status"
'

test_expect_success "$W writers, $M writes each on one fd, at once: every write returns its length" '
    writers go $M &&
    wait_for 120 "all_done go" &&
    for i in $(seq $W); do echo "ok $M"; done >want &&
    cat go.*.rc >got && test_cmp want got
'

test_expect_success 'the broker holds each message once' '
    n=$(broker_count lead.sink.inbox) && test "$n" = $((W * M))
'

test_expect_success 'sent records each once, as taken by the broker (nobody reads: published-unread)' '
    test $(wc -l <alpha/leads/alpha/sent) = $((W * M)) &&
    test $(msgids alpha/leads/alpha/sent | sort -u | wc -l) = $((W * M)) &&
    test "$(jq -r .state alpha/leads/alpha/sent | sort -u)" = published-unread
'

test_expect_success 'a reader reads each message once, the same msgIds sent records' '
    mount_fleet sink peers=alpha inject=none prefetch=1000 &&
    wait_for 20 "test \$(wc -l <sink/leads/sink/inbox) -ge $((W * M))" &&
    cat sink/leads/sink/inbox >inbox &&
    test $(wc -l <inbox) = $((W * M)) &&
    for i in $(seq $W); do for j in $(seq $M); do echo "go w$i m$j"; done; done | sort >want &&
    jq -r .body inbox | sort >got && test_cmp want got &&
    msgids inbox | sort >got.ids && msgids alpha/leads/alpha/sent | sort >want.ids &&
    test_cmp want.ids got.ids
'

# The writes start at once after the freeze: a frozen broker also stops
# answering the consuming connection's probes, and after about 5 s
# (probes.c: PING_AFTER_MS, PING_WAIT_MS) both connections are dropped; a
# write handed over after that fails ECOMM (nothing was sent), which is
# right, but not what is tested here.
test_expect_success 'the broker freezes with four writes under way: no FUSE thread waits for them' '
    pid=$(cat "$TEST_DIR/.harness/pid.alpha") &&
    writers frozen 1 go &&
    wait_for 20 "all_done frozen ready" &&
    broker_freeze &&
    at_exit broker_thaw &&
    touch go &&
    wait_for 10 "test \$(in_write frozen) = $W" &&
    n=$(futex_workers $pid) && echo "workers in a futex: $n" &&
    test "$n" -le 1
'

test_expect_success 'all four fail ETIMEDOUT, and no writer is left waiting' '
    wait_for 30 "all_done frozen" &&
    for i in $(seq $W); do echo ETIMEDOUT; done >want &&
    cat frozen.*.rc >got && test_cmp want got &&
    test $(jq -r "select(.state == \"unconfirmed\") | .msgId" alpha/leads/alpha/sent | wc -l) = $W
'

test_expect_success 'thawed: each of the four reaches the reader at most once; what sent calls published is there' '
    broker_thaw &&
    wait_for 30 "grep -q \"^broker: connected$\" alpha/status" &&
    echo "after the thaw" >alpha/peers/sink/send &&
    wait_for 20 "grep -q \"after the thaw\" sink/leads/sink/inbox" &&
    jq -r .body sink/leads/sink/inbox | grep "^frozen " | sort >frozen.read &&
    test -z "$(uniq -d frozen.read)" &&
    for id in $(jq -r "select(.state == \"published-unread\" or .state == \"published\") | .msgId" alpha/leads/alpha/sent); do
        grep -q "$id" sink/leads/sink/inbox || { echo "published but not read: $id"; return 1; }
    done
'

# An ask's write goes the same way as a send's: the publishing thread
# registers the question on the confirm, then answers the write (a read
# after it finds the question), or answers ETIMEDOUT at send_timeout. Four
# asks written with the broker frozen leave no FUSE worker waiting for
# them (the code before answered an ask's write on its FUSE thread, which
# waited for the confirm: one worker in a futex per ask; this check fails
# on it), and all four fail ETIMEDOUT.
test_expect_success 'the broker freezes with four ask writes under way: no FUSE thread waits for them' '
    wait_for 30 "grep -q \"^broker: connected$\" alpha/status" &&
    pid=$(cat "$TEST_DIR/.harness/pid.alpha") &&
    rm -f go &&
    writers asked 1 go ask &&
    wait_for 20 "all_done asked ready" &&
    broker_freeze &&
    touch go &&
    wait_for 10 "test \$(in_write asked) = $W" &&
    n=$(futex_workers $pid) && echo "workers in a futex: $n" &&
    test "$n" -le 1
'

test_expect_success 'all four ask writes fail ETIMEDOUT, and no asker is left waiting' '
    wait_for 30 "all_done asked" &&
    for i in $(seq $W); do echo ETIMEDOUT; done >want &&
    cat asked.*.rc >got && test_cmp want got &&
    broker_thaw &&
    wait_for 30 "grep -q \"^broker: connected$\" alpha/status"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet sink && unmount_fleet alpha
'

test_done
