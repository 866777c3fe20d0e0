#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A duplicate of a broadcast, per member (issue 43 item 2): alpha
# broadcasts to group:ops (beta and gamma); gamma acks its copy, beta holds
# its own. A second copy under the same msgId, signed with alpha's key as
# alpha's resend would be, is put into beta's mailbox: beta counts it
# (rejected_duplicate) but it is not dead-lettered — fleet.dlq gains only
# the malformed marker put in after it (beta judges, and the broker
# dead-letters, in order) — and alpha's entry keeps beta's recipient state
# short of dead-lettered; beta's ack of the copy it held then makes beta's
# recipient state acked, gamma's untouched. On 8dc6d57 the copy was
# dead-lettered and beta's recipient state became dead-lettered.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
RAWPUB=$BIN/tools/rawpub

recipient() { jq -r --arg id "$1" --arg r "$2" 'select(.msgId == $id) | .recipients[$r] // empty' alpha/leads/alpha/sent; }
held_at() { test "$(sed -n "s/^held: //p" "$1/leads/$1/status")" = "$2"; }

test_expect_success 'alpha, and beta and gamma in group ops' '
    mount_fleet alpha peers=beta:gamma inject=none &&
    mount_fleet beta peers=alpha inject=none groups=ops &&
    mount_fleet gamma peers=alpha inject=none groups=ops &&
    wait_for 20 "test -e alpha/groups/ops/send"
'

test_expect_success 'a second copy at one member: not dead-lettered; that member alone keeps its own state' '
    echo "to ops" >alpha/groups/ops/send &&
    id=$(last_sent_id alpha) &&
    wait_for 10 "held_at beta 1 && held_at gamma 1" &&
    echo all >gamma/leads/gamma/ack &&
    wait_for 10 "test \"\$(recipient $id gamma)\" = acked" &&
    d0=$(broker_count fleet.dlq) &&
    "$RAWPUB" "$(broker_uri)" lead.beta.inbox --sign "$TEST_DIR/keys/alpha.key" --from alpha \
        --to group:ops --msgid $id --text "to ops" >/dev/null &&
    wait_for 10 "grep -q \"^rejected_duplicate: 1$\" beta/status" &&
    "$RAWPUB" "$(broker_uri)" lead.beta.inbox --body "not an envelope" >/dev/null &&
    wait_for 10 "grep -q \"^rejected_malformed: 1$\" beta/status" &&
    test_absent 10 "test \$(broker_count fleet.dlq) -ge $((d0 + 1))" \
        "test \$(broker_count fleet.dlq) -ge $((d0 + 2))" &&
    wait_for 10 "test \$(broker_count lead.alpha.dead) = 0" &&
    test "$(recipient $id beta)" != dead-lettered &&
    held_at beta 1 &&
    echo all >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(recipient $id beta)\" = acked" &&
    test "$(recipient $id gamma)" = acked
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
