#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Agents mid-stream through a broker kill and a receiver kill (issue 18).
# Two streams at once to the agents of beta: one from alpha's lead to
# w1@beta, typed into w1's pane of a fake herdr; one from alpha's agent
# w1@alpha to w2@beta, which has no pane (its injector waits) and whose
# inbox a script reads and acks through agents/w2@beta/inbox and ack.
# Mid-stream beta's fleetfs is kill -9'd and mounted again, later the
# broker is kill -9'd and restarted. Counted by the observers of
# tests/faults/faults.sh (the fake herdr's prompt log, the reader's own
# log, the broker's queue counts and fleet.dlq), never by fleetfs: every
# successful write consumed exactly once (one typed message at most
# uncertain, caught by the kill mid-typing), nothing typed twice or into
# the wrong pane, no dead letter, both mailboxes empty at the end, and
# after the faults both senders' writes succeed and are consumed.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_start_own
N=$(stream_size 60)
A=f1200a # alpha -> w1@beta, typed
B=f1200b # w1@alpha -> w2@beta, read and acked by a script
export STREAM_PACE=${STREAM_PACE:-0.1}

test_expect_success 'beta serves w1 (typed into its pane of a fake herdr) and w2 (no pane: a script reads it); alpha serves w1' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"after_prompt_status\":\"working\",\"busy_ms\":100,\"panes\":[$(pane beta idle),$(pane w1 idle)]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none agents=w1 &&
    mount_fleet beta peers=alpha inject=herdr agents=w1:w2 &&
    wait_for 20 "test -d alpha/agents/w1@beta && test -d alpha/agents/w2@beta && test -d beta/agents/w1@alpha" &&
    wait_for 10 "grep -q \"^injector: ready\" beta/agents/w1@beta/status" &&
    reader_start w2@beta
'

test_expect_success "$N messages in each stream; beta killed with -9 once a third were typed and mounted again, then the broker killed and restarted" '
    stream_start alpha w1@beta '$N' '$A' &&
    stream_start w1@alpha w2@beta '$N' '$B' &&
    wait_for 120 "test \$(prompts) -ge $((N / 3))" &&
    kill_fleet beta && receiver_killed '$A' w1@beta && receiver_killed '$B' w2@beta &&
    mount_fleet beta peers=alpha inject=herdr agents=w1:w2 &&
    wait_for 120 "test \$(stream_progress '$A') -ge $((2 * N / 3))" &&
    broker_kill && broker_restart &&
    stream_wait '$A' 300 && stream_wait '$B' 300 &&
    wait_for 60 "grep -q \"^broker: connected$\" alpha/status && grep -q \"^broker: connected$\" beta/status"
'

test_expect_success 'after the faults both senders write again at once: 3 more messages each, all succeed' '
    after_fault alpha w1@beta '$A' &&
    after_fault w1@alpha w2@beta '$B'
'

test_expect_success 'nothing was typed twice; all typed into w1'"'"'s pane, nothing of w2'"'"'s stream typed' '
    { wait_for 300 "settled '$A' w1@beta && settled '$B' w2@beta" || true; } &&
    jq -r .text "$HERDR_LOG" | grep "^'$A' " | sort | uniq -d >twice &&
    test_cmp /dev/null twice &&
    jq -r "select(.text | contains(\"\\n'$A' \")) | .target" "$HERDR_LOG" | sort -u >panes &&
    echo w1:p2w1 >want && test_cmp want panes &&
    test_must_fail grep -q "'$B' " "$HERDR_LOG"
'

test_expect_success 'reconciliation, lead -> agent (typed): every successful write typed exactly once (one uncertain at most)' '
    reconcile '$A' w1@beta --min-ok $((N / 4)) --uncertain 1 --faults 2
'
[[ -f $TEST_DIR/$A.reconciled ]] && sed "s/^/# $A: /" "$TEST_DIR/$A.reconciled"

test_expect_success 'reconciliation, agent -> agent (read and acked): every successful write acked exactly once' '
    reconcile '$B' w2@beta --min-ok $((N / 4)) --faults 2
'
[[ -f $TEST_DIR/$B.reconciled ]] && sed "s/^/# $B: /" "$TEST_DIR/$B.reconciled"

test_expect_success 'unmount cleanly' '
    reader_stop w2@beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
