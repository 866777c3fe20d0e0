#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An answer taken while the broker is away (issue 43 item 7): alpha asks,
# beta answers, and alpha's asker reads the answer only after the broker
# was killed; its ack cannot go out. When the broker is back it delivers
# the answer again — LavinMQ without the redelivered flag, which it
# forgets across its own restart — and alpha must ack that copy unseen,
# as any message consumed while its ack could not be sent: not refused as
# a replay into fleet.dlq (on 8dc6d57, on LavinMQ: rejected_replayed: 1
# in alpha's status and one dead letter). The broker's own counts say
# alpha's mailbox emptied and fleet.dlq stayed empty.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
ASKTRY=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/asktry
[[ ${FLEETFS_BUILD:-} == /* ]] && ASKTRY=$FLEETFS_BUILD/tools/asktry
id_of() { jq -r --arg b "$2" 'select(.body == $b) | .msgId' "$1"; }

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=none
'

test_expect_success 'the answer read while the broker is down: its copy after the restart is acked unseen, not a replay' '
    { "$ASKTRY" alpha/peers/beta/ask "read it offline?" write poll 30000 sleep 4000 read >o1 & } &&
    wait_for 15 "test -n \"\$(id_of beta/leads/beta/inbox \"read it offline?\")\"" &&
    q=$(id_of beta/leads/beta/inbox "read it offline?") &&
    echo "yes, offline" >beta/peers/alpha/reply/$q &&
    wait_for 15 "grep -q readable o1" &&
    broker_kill &&
    wait_for 15 "grep -q \"^answer: yes, offline\" o1" &&
    broker_restart &&
    wait_for 30 "grep -q \"^broker: connected\" alpha/status" &&
    wait_for 20 "test \"\$(broker_count lead.alpha.inbox)\" = 0" &&
    ! grep -q "^rejected_replayed:" alpha/status &&
    test "$(broker_count fleet.dlq)" = 0 &&
    ! grep -q "yes, offline" alpha/leads/alpha/inbox
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
