#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A script reads beta's inbox and acks what it read in a tight loop (every
# 20 ms) while the injector types (fake herdr) and redeliveries happen
# (beta is kill -9'd and restarted mid-stream, so journal-known messages
# come back): no message is acked twice (the broker would close the
# channel: no PRECONDITION_FAILED / unknown delivery tag in the log),
# nothing is typed twice, every successful write is consumed exactly once
# — typed (the fake's prompt log) or acked (the script's own log), never
# both — or, at most once in all, caught by the kill mid-typing (issue 8
# defect 2). Run under ASan too (make test): no use-after-free.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_use_shared
FLEET_VHOST=f0500
new_vhost $FLEET_VHOST
N=$(stream_size 150)
TAG=f0500

test_expect_success 'beta types into a fake herdr agent; a script acks what it reads, continuously' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"after_prompt_status\":\"working\",\"busy_ms\":50,\"panes\":[$(pane beta idle)]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    reader_start beta 0.02
'

test_expect_success "$N messages; beta killed with -9 mid-stream and restarted (redeliveries)" '
    stream_start alpha beta '$N' '$TAG' &&
    wait_for 120 "test \$(_observed '$TAG' beta | wc -l) -ge $((N / 3))" &&
    kill_fleet beta && receiver_killed '$TAG' beta &&
    mount_fleet beta peers=alpha inject=herdr &&
    stream_wait '$TAG' 300 &&
    after_fault alpha beta '$TAG' &&
    { wait_for 120 "settled '$TAG' beta" || true; } &&
    reader_stop beta
'

test_expect_success 'no double ack: the broker never closed a channel on beta' '
    ! grep -E "PRECONDITION_FAILED|unknown delivery tag|channel.*closed by the broker" beta.log
'

test_expect_success 'nothing typed twice' '
    jq -r .text "$HERDR_LOG" | grep "^'$TAG' " | sort | uniq -d >twice &&
    test_cmp /dev/null twice
'

test_expect_success 'reconciliation: every successful write consumed exactly once (one uncertain at most)' '
    reconcile '$TAG' beta --min-ok '$N' --uncertain 1
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly (and, under ASan, without a report)' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
