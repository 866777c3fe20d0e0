#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A broadcast's state once every member's word is in (issue 43 item 7:
# its expiredBy stuck at "sender"). beta and gamma, the members of ops,
# are away; alpha broadcasts A (12 s) and then B (2 s) to ops. B waits
# behind A in each member's mailbox (an expired message leaves a queue
# from its head, t0327), so alpha's own clock concludes B expired first
# ("expiredBy": "sender"); when A dies both members' copies of B are
# dead-lettered home, each recipient's state says so, and then the entry
# itself must say the broker's word, dead-lettered — on 8dc6d57 it stayed
# "expired", "expiredBy": "sender" for good.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
field() { jq -r "select(.msgId == \"$1\") | .$2 // empty" alpha/leads/alpha/sent; }
recipient() { jq -r --arg id "$1" --arg r "$2" 'select(.msgId == $id) | .recipients[$r] // empty' alpha/leads/alpha/sent; }

test_expect_success 'alpha; beta and gamma in ops mount once and go away' '
    mount_fleet alpha peers=beta:gamma inject=none expire_grace=3s &&
    mount_fleet beta peers=alpha inject=none groups=ops &&
    mount_fleet gamma peers=alpha inject=none groups=ops &&
    wait_for 20 "test -e alpha/groups/ops/send" &&
    unmount_fleet beta && unmount_fleet gamma
'

test_expect_success 'the sender concludes first; every member'"'"'s dead letter then replaces its conclusion' '
    echo "{\"body\":\"A, longer\",\"expiresIn\":\"12s\"}" >alpha/groups/ops/send.json &&
    echo "{\"body\":\"B, short\",\"expiresIn\":\"2s\"}" >alpha/groups/ops/send.json &&
    b=$(last_sent_id alpha) &&
    wait_for 15 "test \"\$(field $b state)\" = expired" &&
    test "$(field $b expiredBy)" = sender &&
    wait_for 30 "test \"\$(recipient $b beta)\" = dead-lettered && test \"\$(recipient $b gamma)\" = dead-lettered" &&
    wait_for 5 "test \"\$(field $b state)\" = dead-lettered" &&
    test -z "$(field $b expiredBy)"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha
'

test_done
