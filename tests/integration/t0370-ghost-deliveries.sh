#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ghost deliveries (issue 16, 2.1): the own receipt queue is replaced by one
# with other arguments while the mailbox consumer holds messages and more
# wait in the broker. fleetfs cannot consume its receipts for several retry
# rounds, then the queue is put right. What the reader script read (and
# acked, exactly those msgIds) must be every message, each once, and
# nothing may end in fleet.dlq (per the broker's own count). Before the
# fix the mailbox channel was closed for the receipts failure and deliveries
# already queued inside rabbitmq-c were taken for the new channel's: the
# broker's real redeliveries went to fleet.dlq as duplicates; and a ghost's
# ack with the old channel's tag closes the new channel (406 unknown
# delivery tag), which must never be in beta's log.
# While the receipt queue is wrong the mailbox consumer is paused, not
# closed: what beta already holds can still be read and acked (issue 16,
# the closing note's "ack refused while the receipts consumer fails"). The
# broker's own count of the mailbox drops by what was acked, the inbox shows
# nothing again, and the rest arrive once the queue is put right.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

N=$((30 * ${FAULT_SCALE:-1})) # make soak: 300
# lead.beta.receipts deleted and declared anew without fleetfs's arguments;
# fleetfs re-declares it within half a second of the delete, so try again
# until ours is the declare that made it
replace_receipts() {
  local uri try
  uri=$(broker_uri) || return 1
  for try in 1 2 3 4 5 6 7 8 9 10; do
    amqp-delete-queue -u "$uri" -q lead.beta.receipts >/dev/null 2>&1
    amqp-declare-queue -u "$uri" -d -q lead.beta.receipts >/dev/null 2>&1 && return 0
  done
  return 1
}
mismatches() { grep -c "configuration mismatch on lead.beta.receipts" beta.log; }

test_expect_success 'alpha sends; beta holds prefetch of them, the rest wait in the broker' '
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha inject=none prefetch=5 &&
    wait_for 10 "grep -q \"^consumer: ok$\" beta/status" &&
    for i in $(seq $N); do echo "message $i" >alpha/peers/beta/send || return 1; done &&
    jq -r "select(.state != \"unconfirmed\") | .msgId" alpha/leads/alpha/sent | sort >sent.ids &&
    test $(wc -l <sent.ids) = $N &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 5"
'

test_expect_success 'the receipt queue replaced: beta pauses its mailbox consumer' '
    replace_receipts &&
    wait_for 10 "test \$(mismatches) -ge 1" &&
    grep -q "^consumer: mismatch" beta/status &&
    test $(wc -l <beta/leads/beta/inbox) = 5
'

test_expect_success 'while it is wrong, a reader acks the 5 held: the broker count drops, nothing shown again' '
    : >read.log &&
    { fleet_reader beta read.log & } &&
    at_exit "touch $TEST_DIR/stop" &&
    wait_for 10 "test \$(wc -l <read.log) -ge 5" &&
    wait_for 10 "test \"\$(broker_count lead.beta.inbox)\" = $((N - 5))" &&
    grep -q "^consumer: mismatch" beta/status &&
    test $(wc -l <read.log) = 5 &&
    test $(wc -l <beta/leads/beta/inbox) = 0
'

test_expect_success 'kept wrong for several retry rounds, then put right: the rest arrive' '
    sleep 6 &&
    test $(wc -l <read.log) = 5 &&
    rmqctl delete_queue lead.beta.receipts >/dev/null &&
    wait_for $((30 * ${FAULT_SCALE:-1})) "test \$(wc -l <read.log) -ge $N" &&
    sleep 1 && touch stop
'

test_expect_success 'every message was read once, none dead-lettered (broker counts)' '
    sort read.log >read.ids &&
    test_cmp sent.ids read.ids &&
    ! grep "unknown delivery tag" beta.log &&
    wait_for 10 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    n=$(broker_count fleet.dlq) && test "$n" = 0
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
