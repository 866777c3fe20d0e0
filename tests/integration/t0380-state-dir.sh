#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The state directory under stress: a full disk (a small tmpfs) with a torn
# last line left by a crash — the mount comes up with every line it had,
# says it runs degraded, and heals once space is back; one daemon per
# state_dir (a second one waits within takeover_grace, then refuses, naming
# the lock and the holder's pid; a takeover loads the state only once the
# old daemon is gone); a state_dir others may write is refused.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
new_vhost t0380
FLEET_VHOST=t0380

# tear FILE: append a fragment (a crash mid-append) that ends the file on a
# page boundary, so that closing it would need a new page of the disk
tear() {
  local size pad
  size=$(stat -c %s "$1") &&
    pad=$(((4096 - (size + 10) % 4096) % 4096)) &&
    { printf '{"msgId":"' && head -c "$pad" /dev/zero | tr '\0' x; } >>"$1"
}

# fill DIR NAME: take every free block of its file system (into DIR/NAME)
fill() {
  { dd if=/dev/zero of="$1/$2" bs=4096 2>/dev/null || true; } &&
    ! { printf x >>"$1/probe"; } 2>/dev/null &&
    rm -f "$1/probe"
}

test_expect_success 'beta keeps its state on a small tmpfs; it consumes three and sends one' '
    mkdir -p state/beta &&
    mount -t tmpfs -o size=1m,mode=0700 fleet-t0380 state/beta &&
    at_exit "umount -l $TEST_DIR/state/beta" &&
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha inject=none &&
    for i in 1 2 3; do echo "message $i" >alpha/peers/beta/send || return 1; done &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 3" &&
    echo all >beta/leads/beta/ack &&
    echo "from beta" >beta/peers/alpha/send &&
    test $(wc -l <beta/leads/beta/history) = 3 &&
    test $(wc -l <beta/leads/beta/sent) = 1 &&
    grep -q "^state_dir: ok$" beta/status
'

test_expect_success 'torn last lines and a full disk: beta comes up with every line, degraded' '
    unmount_fleet beta &&
    tear state/beta/history.jsonl && tear state/beta/sent.jsonl &&
    fill state/beta fill1 &&
    mount_fleet beta peers=alpha inject=none &&
    test $(wc -l <beta/leads/beta/history) = 3 &&
    test $(grep -c "message [123]" beta/leads/beta/history) = 3 &&
    test $(wc -l <beta/leads/beta/sent) = 1 &&
    grep "^state_dir: " beta/status >state.line &&
    grep -q "^state_dir: degraded: history.jsonl: No space left on device; sent.jsonl: No space left on device; " state.line &&
    grep -q "free space in $TEST_DIR/state/beta" state.line &&
    wait_for 15 "grep -q \"^presence: live\" alpha/peers/beta/status"
'

test_expect_success 'degraded, beta still consumes; once space is back it writes again' '
    fill state/beta fill2 &&
    { echo "message 4" && head -c 5000 /dev/zero | tr "\\0" y; } >big.txt &&
    cat big.txt >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"message 4\" beta/leads/beta/inbox" &&
    echo all >beta/leads/beta/ack &&
    test $(wc -l <beta/leads/beta/history) = 4 &&
    grep -q "^state_dir: degraded: history.jsonl: No space left on device" beta/status &&
    rm state/beta/fill1 state/beta/fill2 &&
    echo "message 5" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"message 5\" beta/leads/beta/inbox" &&
    echo all >beta/leads/beta/ack &&
    echo "again from beta" >beta/peers/alpha/send &&
    grep -q "^state_dir: ok$" beta/status
'

test_expect_success 'after a restart: what was written is there, nothing glued to a fragment' '
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=none &&
    test $(grep -c "message [1235]" beta/leads/beta/history) = 4 &&
    test $(wc -l <beta/leads/beta/sent) = 2 &&
    for f in state/beta/history.jsonl state/beta/sent.jsonl; do
        grep -v "^{\"msgId\":\"xx*" $f | jq -e . >/dev/null || return 1
    done
'

test_expect_success 'a second fleetfs on beta'\''s state_dir waits, then refuses naming the holder' '
    mkdir -p other &&
    if timeout -k 5 20 "$FLEETFS" other -f -o coord_id=other,state_dir=$TEST_DIR/state/beta,insecure,takeover_grace=1s,vhost=t0380 2>err; then rc=0; else rc=$?; fi &&
    test $rc = 1 &&
    ! mountpoint -q other &&
    grep -q "not mounting: state_dir $TEST_DIR/state/beta is in use: another fleetfs (pid $(cat .harness/pid.beta)) holds the lock $TEST_DIR/state/beta/lock" err &&
    test $(wc -l <beta/leads/beta/history) = 4
'

test_expect_success 'a takeover: the new beta waits for the lock and loads what the old one wrote last' '
    { mount_fleet beta2 coord_id=beta state_dir=$TEST_DIR/state/beta key=$TEST_DIR/keys/beta.key trusted_keys=$TEST_DIR/trust peers=alpha inject=none takeover_grace=30s >beta2.out 2>&1 & } &&
    wait_for 15 "grep -q \"holds $TEST_DIR/state/beta/lock; waiting up to 30000 ms\" beta2.log" &&
    echo "message 6" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"message 6\" beta/leads/beta/inbox" &&
    echo all >beta/leads/beta/ack &&
    unmount_fleet beta &&
    wait_for 30 "mountpoint -q beta2 && test -r beta2/status" &&
    grep -q "message 6" beta2/leads/beta/history &&
    test $(grep -c "message [12356]" beta2/leads/beta/history) = 5
'

test_expect_success 'a state_dir its group may write is refused, nothing mounted' '
    mkdir -p gamma && mkdir -m 0770 state/gamma &&
    if timeout -k 5 20 "$FLEETFS" gamma -f -o coord_id=gamma,state_dir=$TEST_DIR/state/gamma,insecure,vhost=t0380 2>err; then rc=0; else rc=$?; fi &&
    test $rc = 2 &&
    ! mountpoint -q gamma &&
    grep -q "not mounting: state_dir $TEST_DIR/state/gamma: writable by its group (mode 0770); run: chmod go-w" err &&
    chmod 0700 state/gamma
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta2
'

test_done
