#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Faults inside one broker connection (issue 8, broker side): the broker
# closes or cancels one consumer while the rest of the connection lives on;
# the link dies between a publish and its confirm; a mount started right
# after an unmount meets the old daemon still holding its mailbox.
# A private broker: the test changes broker-wide settings (consumer_timeout).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

# rabbit's own delivery-acknowledgement timeout (consumer_timeout, 30 min by
# default) closes a consumer channel holding a message longer than that:
# exactly what a lead reading its inbox slowly does. Shortened here, checked
# every second instead of every minute; channels read it when they open.
set_consumer_timeout() {
  rmqctl eval "application:set_env(rabbit, consumer_timeout, $1), \
               application:set_env(rabbit, channel_tick_interval, 1000)." >/dev/null
}
# echo TEXT >FILE in the background; ./started appears just before the
# write, its exit status lands in ./rc, its stderr in ./err
send_in_background() {
  rm -f rc err started
  (touch started; echo "$2" >"$1" 2>err; echo $? >rc) &
}
# echo all >ack (its result is the mailbox's policy, not checked here); the
# frozen broker is thawed right after, either way
ack_then_thaw() {
  echo all >beta/leads/beta/ack
  broker_thaw
}
dlq_count() { broker_count fleet.dlq; }
# delivered to beta and not acked yet, per the broker
held_by_broker() {
  rmqctl list_queues -q name messages_unacknowledged | awk '$1 == "lead.beta.inbox" { print $2 }'
}
consuming() { grep -c "broker: consuming lead.beta.inbox" beta.log; }
closes() { grep -c "channel 2 closed by the broker: 406" beta.log; }
# no_close_for S: no such close logged in the last S seconds. A channel
# that still has the old 2 s timeout is closed again within about 3 s (the
# timeout plus one tick), so S seconds of quiet after set_consumer_timeout
# say the open channel has the new one, whether it was reopened just before
# or just after the change (waiting for one more close after the change
# waited in vain when the reopen had already come after it: CI, ASan)
no_close_for() {
  local last since
  last=$(grep "channel 2 closed by the broker: 406" beta.log | tail -n 1 | cut -d" " -f1)
  since=$(date -u -d "$1 seconds ago" +%Y-%m-%dT%H:%M:%S.%3NZ)
  [[ -z $last || $last < $since ]]
}
# fusermount3 -u alone, as a person types it: it returns once the kernel let
# go of the mount, not when the daemon has finished (EBUSY while a request
# is in flight is retried, as unmount_fleet does)
unmount_now() {
  local try
  for try in 1 2 3 4 5 6 7 8 9 10; do
    fusermount3 -u "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  fusermount3 -u "$1"
}

test_expect_success 'alpha and beta mount; beta holds what it gets (inject=none)' '
    set_consumer_timeout 2000 &&
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha inject=none &&
    wait_for 10 "grep -q \"^consumer: ok$\" beta/status"
'

test_expect_success 'the broker closes the consumer channel: nothing is dead-lettered, each message shows once' '
    for i in 1 2 3 4 5; do echo "held $i" >alpha/peers/beta/send || return 1; done &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 5" &&
    msgids beta/leads/beta/inbox | sort >before &&
    wait_for 15 "test \$(closes) -ge 1" &&
    wait_for 10 "test \"\$(held_by_broker)\" = 5" &&
    grep -q "^consumer: ok$" beta/status &&
    msgids beta/leads/beta/inbox | sort >after &&
    test_cmp before after &&
    grep -q "^dead_lettered: 0$" beta/status &&
    test "$(dlq_count)" = 0
'

test_expect_success 'a channel-level close stays channel-level: no reconnect, no 530' '
    ! grep -q "connection lost" beta.log &&
    ! grep -q "NOT_ALLOWED" beta.log
'

test_expect_success 'the redelivered messages are acked on the new channel and leave the broker' '
    set_consumer_timeout 1800000 &&
    wait_for 40 "no_close_for 6" &&
    wait_for 10 "test \"\$(held_by_broker)\" = 5" &&
    echo all >beta/leads/beta/ack &&
    test ! -s beta/leads/beta/inbox &&
    wait_for 10 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    test "$(dlq_count)" = 0 &&
    ! grep -q "unknown delivery tag" beta.log
'

test_expect_success 'mailbox deleted under its consumer: beta consumes the new one, same connection' '
    n=$(consuming) &&
    rmqctl delete_queue lead.beta.inbox >/dev/null &&
    wait_for 10 "grep -q \"cancelled consumer fleetfs.lead.beta.inbox\" beta.log" &&
    wait_for 10 "test \$(consuming) -gt $n" &&
    echo "after delete" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"after delete\" beta/leads/beta/inbox" &&
    grep -q "^consumer: ok$" beta/status &&
    ! grep -q "connection lost" beta.log &&
    echo all >beta/leads/beta/ack
'

# The send waits for a probe of beta's mailbox unless one answered within
# the last second (broker/conn.c), and goes out without its answer after
# PROBE_PUBLISH_WAIT_MS (1 s): 2 s after the write began, it has left.
# (0.5 s was too short once freezing the broker took long: the send was
# still waiting for its probe, and the kill made it ECOMM, not sent.)
test_expect_success 'the link lost between publish and confirm: ETIMEDOUT, sent says unconfirmed' '
    echo warm >alpha/peers/beta/send &&
    broker_freeze &&
    send_in_background alpha/peers/beta/send "in flight" &&
    sleep 2 &&
    broker_kill &&
    wait_for 10 "test -s rc" &&
    test "$(cat rc)" != 0 &&
    grep -q "write error: Connection timed out" err &&
    jq -r "select(.state == \"unconfirmed\") | .to" alpha/leads/alpha/sent >unconfirmed &&
    test "$(cat unconfirmed)" = beta &&
    grep -q "state unknown: the connection was lost after the message left" alpha.log
'

test_expect_success 'the broker back: both mounts reconnect' '
    broker_restart &&
    wait_for 20 "grep -q \"^consumer: ok$\" alpha/status" &&
    wait_for 20 "grep -q \"^consumer: ok$\" beta/status"
'

# What systemctl restart and a person at a shell do: unmount, mount again at
# once, while the old daemon may still hold its broker connection.
test_expect_success 'unmount and remount the same coord_id at once, five times' '
    for i in 1 2 3 4 5; do
        old=$(cat .harness/pid.beta) &&
        unmount_now beta &&
        mount_fleet beta peers=alpha inject=none send_timeout=2s &&
        wait_for 10 "grep -q \"^consumer: ok$\" beta/status" &&
        wait_for 15 "! kill -0 $old 2>/dev/null" || return 1
    done &&
    echo "after remounts" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"after remounts\" beta/leads/beta/inbox"
'

test_expect_success 'a real duplicate waits out takeover_grace, then fails loudly; the first keeps its mailbox' '
    mkdir -p dup &&
    { "$FLEET_ROOT/tests/tools/notify-listen" "$TEST_DIR/dup.sock" dup.notify & } &&
    at_exit "kill $! 2>/dev/null; true" &&
    wait_for 20 "grep -q listening dup.notify" &&
    start=$(date +%s%N) &&
    test_must_fail env NOTIFY_SOCKET="$TEST_DIR/dup.sock" \
        "$FLEETFS" dup -f -o coord_id=beta,insecure,state_dir=$TEST_DIR/state/dup,takeover_grace=2s 2>dup.log &&
    grep -q "STATUS=broker: connected.*; consumer: waiting for the previous consumer of lead.beta.inbox to go" dup.notify &&
    ms=$(( ($(date +%s%N) - start) / 1000000 )) &&
    test $ms -ge 2000 && test $ms -le 10000 &&
    grep -q "waiting for the previous consumer of lead.beta.inbox to go" dup.log &&
    grep -q "not mounting: another fleetfs is already the consumer of lead.beta.inbox" dup.log &&
    ! mountpoint -q dup &&
    grep -q "^consumer: ok$" beta/status &&
    grep -q "^consumers: 1$" alpha/peers/beta/status
'

# The consuming connection's thread is busy (an agent's mailbox being
# removed: its channel closed, which waits for the broker's answer, up to
# 5 s, on a frozen broker) when an ack comes: br_ack gives up after
# send_timeout (2 s here; the second lets the rmdir reach the broker thread
# first), but the request stays with the broker thread, which carries it
# out (or finds the link gone) once the broker answers again. Its owner is
# told the real outcome (late_ack), the log says it, and the message leaves
# the broker once: acked late, or redelivered and acked then. (Until
# broker/probes.c a probe kept that thread busy too, and until the gate in
# broker/boxes.c an agent's mailbox being made did: neither waits on it now,
# so the rmdir it is.)
test_expect_success 'an ack the caller gave up on is still carried out, and its outcome reported' '
    mkdir beta/agents/late@beta &&
    wait_for 10 "grep -q \"broker: consuming agent.late@beta.inbox\" beta.log" &&
    echo "to ack late" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"to ack late\" beta/leads/beta/inbox" &&
    broker_freeze &&
    { (touch started; rmdir beta/agents/late@beta 2>rmdir.err; echo $? >rmdir.rc) & } &&
    wait_for 5 "test -e started" &&
    sleep 1 &&
    ack_then_thaw &&
    wait_for 20 "test -s rmdir.rc" &&
    grep -q "ack of delivery .*: no answer from the broker thread within 2000 ms" beta.log &&
    wait_for 10 "grep -q \"ack of delivery .* after the caller had given up\" beta.log" &&
    wait_for 15 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    test ! -s beta/leads/beta/inbox
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
