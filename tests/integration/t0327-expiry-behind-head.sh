#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A message that expires behind a longer-lived one (issue 43 item 7; the
# claim in protocol.md section 4 that a dead letter comes "well within
# expire_grace"). beta is away; alpha sends A (lifetime 12 s) and then B
# (2 s) to beta's mailbox. An expired message leaves a queue only from
# its head (RabbitMQ; LavinMQ 1.0.1 does the same here): B stays behind A,
# its dead letter does not come by B's expiresAt + expire_grace (3 s), and
# alpha's own clock concludes expired ("expiredBy": "sender"); once A
# expires, both die and B's entry takes the broker's word, dead-lettered
# "expired in lead.beta.inbox" (read from alpha's sent file and the
# broker's count of beta's mailbox).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
field() { jq -r "select(.msgId == \"$1\") | .$2 // empty" alpha/leads/alpha/sent; }

test_expect_success 'alpha mounts; beta mounts once (its mailbox exists) and goes away' '
    mount_fleet alpha peers=beta inject=none expire_grace=3s &&
    mount_fleet beta peers=alpha inject=none &&
    unmount_fleet beta
'

test_expect_success 'B behind A: the sender concludes first, the broker'"'"'s word comes when A leaves' '
    echo "{\"body\":\"A, longer\",\"expiresIn\":\"12s\"}" >alpha/peers/beta/send.json &&
    a=$(last_sent_id alpha) &&
    echo "{\"body\":\"B, short\",\"expiresIn\":\"2s\"}" >alpha/peers/beta/send.json &&
    b=$(last_sent_id alpha) &&
    wait_for 15 "test \"\$(field $b state)\" = expired || test \"\$(field $b state)\" = dead-lettered" &&
    test "$(field $b state)" = expired && test "$(field $b expiredBy)" = sender &&
    case "$(field $a state)" in published | published-unread) ;; *) false ;; esac &&
    wait_for 30 "test \"\$(field $b state)\" = dead-lettered && test \"\$(field $a state)\" = dead-lettered" &&
    field $b detail | grep -q "^expired in lead.beta.inbox" &&
    test "$(broker_count lead.beta.inbox)" = 0
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha
'

test_done
