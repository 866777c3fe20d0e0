#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The broker closes beta's consumer channel mid-stream (twice), the way it
# does after an ack of an unknown delivery tag (406 PRECONDITION_FAILED):
# beta reopens it, the requeued messages come back and are taken as
# redeliveries — nothing is dead-lettered as a duplicate (issue 8 defect
# 3), every successful write is consumed exactly once (as beta's reader
# script saw it), the mailbox ends empty and fleet.dlq empty, and after
# the fault both sides work; no ack of beta's ever carries a tag of a
# channel that closed (the only unknown tag the broker may name is the one
# broker_close_consumer_channel injects: issue 16, 2.1).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_use_shared
FLEET_VHOST=f0400
new_vhost $FLEET_VHOST
N=$(stream_size 600)
TAG=f0400

test_expect_success 'alpha and beta mount; a script reads beta'"'"'s inbox and acks what it read' '
    mount_fleet alpha peers=beta &&
    mount_fleet beta peers=alpha &&
    reader_start beta
'

test_expect_success "$N messages; beta's consumer channel closed by the broker at 1/3 and 2/3" '
    stream_start alpha beta '$N' '$TAG' &&
    wait_for 120 "test \$(stream_progress '$TAG') -ge $((N / 3))" &&
    broker_close_consumer_channel lead.beta.inbox &&
    wait_for 20 "grep -q \"PRECONDITION_FAILED\\|unknown delivery tag\" beta.log" &&
    wait_for 120 "test \$(stream_progress '$TAG') -ge $((2 * N / 3))" &&
    broker_close_consumer_channel lead.beta.inbox &&
    stream_wait '$TAG' 300 &&
    after_fault alpha beta '$TAG' &&
    { wait_for 60 "settled '$TAG' beta" || true; }
'

test_expect_success 'nothing was dead-lettered: no duplicate, fleet.dlq empty; no ack with a closed channel tag' '
    grep -E "^(rejected|dead_lettered|consumer)" beta/status &&
    ! grep "unknown delivery tag" beta.log | grep -v 987654321 &&
    dead_letters_are 0 alpha beta &&
    grep -q "^consumer: ok$" beta/status
'

test_expect_success 'reconciliation: every successful write consumed exactly once' '
    reconcile '$TAG' beta --min-ok '$N' --faults 2
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly' '
    reader_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
