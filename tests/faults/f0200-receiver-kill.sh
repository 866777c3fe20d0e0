#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# beta's fleetfs is kill -9'd mid-stream and restarted at once, with
# injection on (fake herdr): nothing is typed twice (the fake's prompt log
# records every typed text), every successful write is typed once — or, at
# most once in all, caught by the kill mid-typing (uncertain, never
# retyped) — nothing is dead-lettered and the broker's mailbox ends empty;
# after the kill alpha's writes succeed and beta types them.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_start_own
N=$(stream_size 40)
TAG=f0200

test_expect_success 'beta types into a fake herdr agent that finishes each turn in 100 ms' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"after_prompt_status\":\"working\",\"busy_ms\":100,\"panes\":[$(pane beta idle)]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 5 "grep -q \"^injector: ready\" beta/leads/beta/status"
'

test_expect_success "$N messages; beta killed with -9 after a third were typed, restarted at once" '
    stream_start alpha beta '$N' '$TAG' &&
    wait_for 120 "test \$(prompts) -ge $((N / 3))" &&
    kill_fleet beta && receiver_killed '$TAG' beta &&
    mount_fleet beta peers=alpha inject=herdr &&
    stream_wait '$TAG' 300 &&
    after_fault alpha beta '$TAG' &&
    { wait_for 300 "settled '$TAG' beta" || true; }
'

test_expect_success 'nothing was typed twice' '
    jq -r .text "$HERDR_LOG" | grep "^'$TAG' " | sort | uniq -d >twice &&
    test_cmp /dev/null twice
'

test_expect_success 'reconciliation: every successful write typed exactly once (one uncertain at most)' '
    reconcile '$TAG' beta --min-ok '$N' --uncertain 1
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
