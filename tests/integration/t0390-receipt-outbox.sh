#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The receipt outbox has one queue per peer (issue 16 item 2.6, issue 20
# section 2): gamma is offline with its receipt queue full (max_length
# receipts wait in lead.gamma.receipts), so beta cannot deliver gamma's
# receipt; alpha's receipts must still arrive — alpha's sent reaches acked —
# and gamma's goes out once its queue has room again.  The queue is filled
# the way any broker login (or a hostile trusted peer keeping its own queue
# full) could: with tests/tools/rawpub.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0390
new_vhost $FLEET_VHOST
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub
URI=$(broker_uri $FLEET_VHOST)

# every mount of this fleet: queues hold at most 5 messages
ML=max_length=5

test_expect_success 'gamma sends beta a message and goes offline' '
    mount_fleet beta peers=alpha:gamma inject=none $ML &&
    mount_fleet gamma peers=beta $ML &&
    echo "from gamma" >gamma/peers/beta/send &&
    last_sent_id gamma >gamma.id &&
    unmount_fleet gamma &&
    wait_for 10 "grep -q \"from gamma\" beta/leads/beta/inbox"
'

test_expect_success 'lead.gamma.receipts is full: 5 wait, a sixth is refused' '
    for i in 1 2 3 4 5; do
        "$RAWPUB" "$URI" lead.gamma.receipts --body "filler $i" || return 1
    done &&
    test_must_fail "$RAWPUB" "$URI" lead.gamma.receipts --body "one too many" &&
    n=$(broker_count lead.gamma.receipts) && test "$n" = 5
'

test_expect_success 'beta consumes gamma'\''s message: its receipt waits in the outbox' '
    echo all >beta/leads/beta/ack &&
    wait_for 10 "grep -q \"receipts: gamma does not take its receipts now\" beta.log" &&
    grep -q "^receipts_waiting: 1$" beta/status
'

test_expect_success 'alpha'\''s receipts still arrive: its sent reaches acked' '
    mount_fleet alpha peers=beta $ML &&
    echo "from alpha" >alpha/peers/beta/send &&
    id=$(last_sent_id alpha) &&
    wait_for 10 "grep -q \"from alpha\" beta/leads/beta/inbox" &&
    echo $id >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(sent_state alpha $id)\" = acked" &&
    grep -q "^receipts_waiting: 1$" beta/status &&
    grep -q "^receipts_dropped: 0$" beta/status &&
    n=$(broker_count lead.gamma.receipts) && test "$n" = 5
'

test_expect_success 'room in gamma'\''s queue: its receipt goes, and gamma sees acked' '
    rmqctl purge_queue -p $FLEET_VHOST lead.gamma.receipts >/dev/null &&
    wait_for 30 "grep -q \"^receipts_waiting: 0$\" beta/status" &&
    grep -q "receipts: gamma takes its receipts again" beta.log &&
    mount_fleet gamma peers=beta $ML &&
    wait_for 10 "test \"\$(sent_state gamma $(cat gamma.id))\" = acked"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
