#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A message more than 5 minutes past its expiresAt (issue 43 item 7): a
# redriven dead letter, say. alpha's message to beta died in beta's
# mailbox while beta was away (alpha: dead-lettered, the broker's word);
# a copy of it under the same msgId, signed with alpha's key and expired
# 10 minutes ago, then reaches beta. beta refuses it at step 6 (counted
# rejected_expired, to fleet.dlq), and its receipt says what it is:
# `expired` (alpha's sent: expired, expiredBy receiver), not `rejected`
# as on 8dc6d57.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
RAWPUB=$BIN/tools/rawpub
field() { jq -r "select(.msgId == \"$1\") | .$2 // empty" alpha/leads/alpha/sent; }

test_expect_success 'alpha and beta mount; beta goes away' '
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=none &&
    unmount_fleet beta
'

test_expect_success 'the message dies in beta'"'"'s mailbox: dead-lettered at alpha' '
    echo "{\"body\":\"while beta is away\",\"expiresIn\":\"2s\"}" >alpha/peers/beta/send.json &&
    id=$(last_sent_id alpha) && echo $id >late.id &&
    wait_for 20 "test \"\$(field $id state)\" = dead-lettered"
'

test_expect_success 'a copy 10 minutes past its expiresAt: beta refuses it as expired, and says expired' '
    id=$(cat late.id) &&
    "$RAWPUB" "$(broker_uri)" lead.beta.inbox --sign "$TEST_DIR/keys/alpha.key" --from alpha \
        --to beta --msgid $id --text "while beta is away" --sent-in -660 --expires-in 60 >/dev/null &&
    mount_fleet beta peers=alpha inject=none &&
    wait_for 10 "grep -q \"^rejected_expired: 1$\" beta/status" &&
    wait_for 15 "test \"\$(field $id state)\" = expired" &&
    test "$(field $id expiredBy)" = receiver &&
    field $id detail | grep -q "^expired: " &&
    test "$(jq -r "select(.msgId == \"$id\") | .consumed" beta/leads/beta/history)" = expired &&
    ! grep -q "while beta is away" beta/leads/beta/inbox
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
