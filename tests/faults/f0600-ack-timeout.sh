#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An ack on a frozen broker (SIGSTOP for 3 s — longer than the ack's own
# timeout — then SIGCONT): the broker runs it late, so the message is
# consumed — once — and must not be typed afterwards (issue 8 defect 5).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_start_own
at_exit "kill -CONT -- -\$(cat $TEST_DIR/broker/pgid) 2>/dev/null || true"

state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent; }

test_expect_success 'beta holds a message: its agent is working, so nothing is typed yet' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"after_prompt_status\":\"working\",\"panes\":[$(pane beta working)]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none send_timeout=2s &&
    mount_fleet beta peers=alpha inject=herdr send_timeout=2s &&
    echo "ack me while the broker sleeps" >alpha/peers/beta/send &&
    tail -n1 alpha/leads/alpha/sent | jq -r .msgId >id &&
    wait_for 5 "grep -q $(cat id) beta/leads/beta/inbox"
'

# The ack write either returns at once (consumed here, the broker ack
# queued) or fails with ETIMEDOUT after waiting for the broker; either is
# honest, provided what follows holds.
test_expect_success 'broker frozen: ack the held message, then thaw the broker' '
    broker_freeze &&
    if cat id >beta/leads/beta/ack 2>err; then rc=ok; else rc=failed; fi &&
    sleep 3 &&
    broker_thaw &&
    echo "the ack write: $rc $(cat err)" &&
    if test $rc = failed; then grep -q "Connection timed out" err; fi
'

test_expect_success 'the late ack took effect: consumed once, gone from the broker and the inbox' '
    wait_for 20 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    wait_for 20 "! grep -q $(cat id) beta/leads/beta/inbox" &&
    test $(grep -c $(cat id) beta/leads/beta/history) = 1
'

test_expect_success 'the agent goes idle: the acked message is never typed' '
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    echo "typed after the thaw" >alpha/peers/beta/send &&
    test_absent 20 "test \$(prompts) -ge 1" "grep -q \"ack me while\" \"$HERDR_LOG\"" &&
    wait_for 10 "test \"\$(state_of $(cat id))\" = acked" &&
    echo "typed: \"ack me while...\" $(_consumed_n beta "ack me while the broker sleeps"), \"typed after the thaw\" $(_consumed_n beta "typed after the thaw")" &&
    test $(_consumed_n beta "ack me while the broker sleeps") = 0 &&
    test $(_consumed_n beta "typed after the thaw") = 1
'

test_expect_success 'after the fault: fleet.dlq empty, nothing rejected, both sides work' '
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    fault_end f0600 alpha beta typed
'
[[ -f $TEST_DIR/f0600.reconciled ]] && sed "s/^/# f0600: /" "$TEST_DIR/f0600.reconciled"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
