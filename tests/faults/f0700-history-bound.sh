#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 2500 consumed messages (times FAULT_SCALE): history holds exactly the
# newest 1000, in order, before and after a restart (issue 8 defect 6: a
# compaction dropped the newest line and let its msgId fall out of the
# consumed set).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_use_shared
FLEET_VHOST=f0700
new_vhost $FLEET_VHOST
N=$(scaled 2500)

test_expect_success "$N messages alpha -> beta, beta acks them as they come" '
    mount_fleet alpha peers=beta max_length=100000 &&
    mount_fleet beta peers=alpha max_length=100000 &&
    reader_start beta &&
    { for i in $(seq 1 '$N'); do echo "h $i"; done; } >alpha/peers/beta/send &&
    stream_written h alpha '$N' &&
    wait_for '$(scaled 120)' "test \$(grep -c \"	ok\$\" beta.acked) -ge '$N'" &&
    reconcile h beta --min-ok '$N' &&
    reader_stop beta
'

test_expect_success 'history: exactly the newest 1000, in order' '
    seq $(('$N' - 999)) '$N' | sed "s/^/h /" >want &&
    jq -r .body beta/leads/beta/history >got &&
    test_cmp want got
'

test_expect_success 'the same after a restart of beta' '
    unmount_fleet beta &&
    mount_fleet beta peers=alpha max_length=100000 &&
    jq -r .body beta/leads/beta/history >got &&
    test_cmp want got
'

test_expect_success 'after the fault: fleet.dlq empty, nothing rejected, both sides work' '
    fault_end f0700 alpha beta 
'
[[ -f $TEST_DIR/h.reconciled ]] && sed "s/^/# f0700 stream: /" "$TEST_DIR/h.reconciled"
[[ -f $TEST_DIR/f0700.reconciled ]] && sed "s/^/# f0700: /" "$TEST_DIR/f0700.reconciled"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
