#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Resource alarms (issue 16, 2.5), met as an operator meets them: rabbitmqctl
# lowers the memory watermark (then the free-disk limit) below what the node
# uses. The broker then blocks connections that publish. Expected: status and
# the sd_notify STATUS line say "broker: blocked: <reason>", a send fails at
# once with ENOBUFS (nothing published: the broker's own count does not
# move), the receiver keeps consuming and acking (its consuming connection
# does not publish), nothing reconnects, and once the alarm clears sends go
# out again and the receipts queued meanwhile reach the sender. Counted by a
# reader script (the msgIds it read and then acked) and by rabbitmqctl.
# A private broker: the test changes broker-wide limits.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

send_n() { # send_n PREFIX COUNT: alpha sends COUNT messages to beta
  local i
  for i in $(seq "$2"); do echo "$1 $i" >alpha/peers/beta/send || return 1; done
}
acked() { jq -r 'select(.state == "acked") | .msgId' alpha/leads/alpha/sent | sort -u | wc -l; }
# a send during the alarm: ENOBUFS, and nothing reached the broker
send_refused() {
  local before after
  before=$(broker_count lead.beta.inbox) &&
    test_must_fail bash -c 'echo "during the alarm" >alpha/peers/beta/send' 2>err &&
    grep -q "No buffer space available" err &&
    after=$(broker_count lead.beta.inbox) &&
    test "$before" = "$after"
}
disk_free_bytes() { df --output=avail -B1 "$BROKER_DIR" | tail -n 1 | tr -d ' '; }

test_expect_success 'alpha and beta mount; alpha sends 20, beta holds 5 of them' '
    { "$FLEET_ROOT/tests/tools/notify-listen" "$TEST_DIR/alpha.sock" alpha.notify & } &&
    at_exit "kill $! 2>/dev/null; true" &&
    wait_for 20 "grep -q listening alpha.notify" &&
    NOTIFY_SOCKET=$TEST_DIR/alpha.sock mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha inject=none prefetch=5 &&
    wait_for 10 "grep -q \"^consumer: ok$\" beta/status" &&
    send_n before 20 &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 5" &&
    : >read.log
'

test_expect_success 'memory alarm: status and STATUS= say blocked, with the reason' '
    rmqctl set_vm_memory_high_watermark 0.0000001 >/dev/null &&
    wait_for 20 "grep -q \"^broker: blocked: .*memory\" alpha/status" &&
    wait_for 20 "grep -q \"^broker: blocked: .*memory\" beta/status" &&
    grep -q "STATUS=broker: blocked: .*memory" alpha.notify &&
    grep -q "^consumer: ok$" beta/status
'

test_expect_success 'memory alarm: a send fails at once with ENOBUFS, nothing published' '
    send_refused &&
    grep -q "blocked" alpha.log
'

test_expect_success 'memory alarm: beta reads and acks all 20, the broker sees them go' '
    { fleet_reader beta read.log & } &&
    at_exit "touch $TEST_DIR/stop" &&
    wait_for 30 "test \$(wc -l <read.log) -ge 20" &&
    wait_for 10 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    grep -q "^broker: blocked: " alpha/status &&
    ! grep -q "connection lost" beta.log &&
    ! grep -q "connection lost" alpha.log
'

test_expect_success 'alarm cleared: sends go out, the receipts queued meanwhile arrive' '
    rmqctl set_vm_memory_high_watermark 0.4 >/dev/null &&
    wait_for 20 "grep -q \"^broker: connected$\" alpha/status" &&
    send_n after 5 &&
    wait_for 30 "test \$(wc -l <read.log) -ge 25" &&
    wait_for 30 "test \$(acked) -ge 25"
'

test_expect_success 'disk alarm: blocked, ENOBUFS at once, beta consumes; cleared: sends resume' '
    send_n "before disk" 5 &&
    wait_for 30 "test \$(wc -l <read.log) -ge 30" &&
    rmqctl set_disk_free_limit $(( $(disk_free_bytes) + 10000000000 )) >/dev/null &&
    wait_for 30 "grep -q \"^broker: blocked: .*disk\" alpha/status" &&
    wait_for 30 "grep -q \"^broker: blocked: .*disk\" beta/status" &&
    send_refused &&
    rmqctl set_disk_free_limit 50000000 >/dev/null &&
    wait_for 30 "grep -q \"^broker: connected$\" alpha/status" &&
    send_n "after disk" 5 &&
    wait_for 30 "test \$(wc -l <read.log) -ge 35"
'

test_expect_success 'every confirmed message was read once; nothing dead-lettered (broker counts)' '
    sleep 1 && touch stop &&
    jq -r "select(.state != \"unconfirmed\") | .msgId" alpha/leads/alpha/sent | sort >sent.ids &&
    test $(wc -l <sent.ids) = 35 &&
    sort read.log >read.ids &&
    test_cmp sent.ids read.ids &&
    n=$(broker_count fleet.dlq) && test "$n" = 0 &&
    test "$(broker_count lead.beta.inbox)" = 0 &&
    wait_for 30 "test \$(acked) -ge 35"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
