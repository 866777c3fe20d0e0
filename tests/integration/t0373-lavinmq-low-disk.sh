#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# LavinMQ's low disk (issue 31), met as an operator meets it: the private
# LavinMQ's data directory is a small tmpfs, filled until under two
# segments (16 MB) are free. LavinMQ has no disk alarm and no
# connection.blocked: it refuses every publish, closing the channel with
# 406 "Server low on disk space", and says nothing when space comes back.
# Expected as under RabbitMQ's disk alarm (t0372): while alpha keeps
# sending, the publish LavinMQ refuses fails with ENOBUFS (not EIO); status
# says "broker: blocked: low on disk ...", a send fails with ENOBUFS and nothing
# reaches the broker (its own queue count does not move), the log says the
# broker is low on disk and what to do; once the space is freed, status
# says connected again by itself and the next send is read once by beta;
# every send recorded in sent was read exactly once (counted by a reader
# script: the msgIds it read and acked).
# LavinMQ only: RabbitMQ's disk alarm is t0372's.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
[[ ${FLEET_BROKER_KIND:-rabbitmq} == lavinmq ]] ||
  test_skip_all --planned "LavinMQ only (FLEET_BROKER_KIND=lavinmq): its low-disk refusal; RabbitMQ's disk alarm is t0372"

data=$TEST_DIR/broker/data
mkdir -p "$data" && mount -t tmpfs -o size=48m fleetfs-t0373 "$data" ||
  test_fail_all "cannot mount a tmpfs on $data (needs root)"
# the broker stopped before its disk goes (it writes its definitions then)
at_exit "'$FLEET_ROOT/scripts/broker' stop --dir '$TEST_DIR/broker' >/dev/null 2>&1; umount -l '$data'"
broker_start_own

free_bytes() { df --output=avail -B1 "$data" | tail -n 1 | tr -d ' '; }

test_expect_success 'alpha and beta mount; a send before the disk fills is read by beta' '
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha inject=none &&
    wait_for 10 "grep -q \"^consumer: ok$\" beta/status" &&
    : >read.log &&
    { fleet_reader beta read.log & } &&
    at_exit "touch $TEST_DIR/stop" &&
    echo "before the disk fills" >alpha/peers/beta/send &&
    wait_for 30 "test \$(wc -l <read.log) = 1"
'

test_expect_success 'the disk fills while alpha keeps sending: the send refused fails ENOBUFS' '
    fallocate -l $(( $(free_bytes) - 6 * 1024 * 1024 )) "$data/filler" &&
    test "$(free_bytes)" -lt $(( 16 * 1024 * 1024 )) &&
    : >err &&
    for i in $(seq 100); do
        echo "busy $i" >alpha/peers/beta/send 2>err || break
        sleep 0.2
    done &&
    test -s err &&
    grep -q "No buffer space available" err
'

test_expect_success 'status says blocked: low on disk, on both mounts; the log says what to do' '
    wait_for 30 "grep -q \"^broker: blocked: low on disk\" alpha/status" &&
    wait_for 30 "grep -q \"^broker: blocked: low on disk\" beta/status" &&
    grep -q "^consumer: ok$" beta/status &&
    grep -q "blocked: low on disk.*free" alpha.log
'

test_expect_success 'a send fails with ENOBUFS, nothing reaches the broker, none is recorded' '
    before=$(broker_count lead.beta.inbox) && test -n "$before" &&
    nsent=$(msgids alpha/leads/alpha/sent | wc -l) &&
    test_must_fail bash -c "echo \"while the disk is full\" >alpha/peers/beta/send" 2>err &&
    grep -q "No buffer space available" err &&
    after=$(broker_count lead.beta.inbox) &&
    test "$before" = "$after" &&
    test "$(msgids alpha/leads/alpha/sent | wc -l)" = "$nsent" &&
    grep -q "low on disk" alpha.log
'

# LavinMQ also refuses every heartbeat and closes the roster's connection
# right after each connect: said once, not two lines a reconnect (18 in 6 s
# before)
test_expect_success 'presence while the disk is full: one line says the roster connection flaps' '
    sleep 6 &&
    grep "presence: roster" alpha.log | tail -n 5 &&
    test $(grep -c "presence: roster connection lost" alpha.log) -le 2 &&
    test $(grep -c "presence: the roster connection is lost again and again right after connecting" alpha.log) = 1
'

test_expect_success 'space freed: status says connected by itself; the next send is read once' '
    rm "$data/filler" &&
    wait_for 30 "grep -q \"^broker: connected$\" alpha/status" &&
    echo "after the disk is freed" >alpha/peers/beta/send &&
    msgids alpha/leads/alpha/sent | sort >sent.ids &&
    wait_for 30 "test \$(wc -l <read.log) -ge \$(wc -l <sent.ids)" &&
    sleep 1 && touch stop &&
    grep -qx "$(last_sent_id alpha)" read.log &&
    sort read.log >read.ids &&
    test_cmp sent.ids read.ids &&
    test "$(broker_count lead.beta.inbox)" = 0 &&
    wait_for 30 "grep -q \"presence: the roster connection to .* has stayed up 10 s: steady again\" alpha.log" &&
    wait_for 15 "grep -q \"^presence: live\" alpha/peers/beta/status"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
