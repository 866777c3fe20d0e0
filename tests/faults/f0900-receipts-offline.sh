#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Receipts while the sender is offline reach it after it comes back: alpha
# sends and unmounts; beta consumes (one acked, one typed); alpha mounts
# again and sees acked and injected. And receipts beta produced while its
# own link to the broker was down (issue 8 defect 8: a durable outbox)
# reach alpha after beta reconnects.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_start_own

state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent; }

test_expect_success 'alpha sends two messages to beta (agent working), then unmounts' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"after_prompt_status\":\"working\",\"panes\":[$(pane beta working)]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    echo "to be acked" >alpha/peers/beta/send &&
    echo "to be typed" >alpha/peers/beta/send &&
    jq -r .msgId alpha/leads/alpha/sent >ids &&
    wait_for 5 "test \$(wc -l <beta/leads/beta/inbox) = 2" &&
    unmount_fleet alpha
'

test_expect_success 'while alpha is away beta acks one and types the other' '
    head -n1 ids >beta/leads/beta/ack &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    wait_for 10 "test \$(prompts) = 1" &&
    wait_for 10 "test ! -s beta/leads/beta/inbox"
'

test_expect_success 'alpha back: both receipts arrive' '
    mount_fleet alpha peers=beta inject=none &&
    wait_for 15 "test \"\$(state_of $(head -n1 ids))\" = acked" &&
    wait_for 15 "test \"\$(state_of $(tail -n1 ids))\" = confirmed"
'

test_expect_success 'receipts beta makes while the broker is down reach alpha after it returns' '
    herdr_set ".panes[0].agent_status=\"working\"" &&
    echo "acked in the dark" >alpha/peers/beta/send &&
    id=$(tail -n1 alpha/leads/alpha/sent | jq -r .msgId) &&
    wait_for 5 "grep -q $id beta/leads/beta/inbox" &&
    broker_kill &&
    wait_for 20 "! grep -q \"^broker: connected$\" beta/status" &&
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    wait_for 10 "test \$(prompts) = 2" &&
    broker_restart &&
    wait_for 30 "grep -q \"^broker: connected$\" beta/status" &&
    wait_for 30 "grep -q \"^broker: connected$\" alpha/status" &&
    wait_for 30 "test \"\$(state_of $id)\" = injected || test \"\$(state_of $id)\" = confirmed" &&
    test $(prompts) = 2
'

test_expect_success 'after the fault: fleet.dlq empty, nothing rejected, both sides work' '
    herdr_set ".panes[0].agent_status=\"idle\"" &&
    fault_end f0900 alpha beta typed
'
[[ -f $TEST_DIR/f0900.reconciled ]] && sed "s/^/# f0900: /" "$TEST_DIR/f0900.reconciled"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
