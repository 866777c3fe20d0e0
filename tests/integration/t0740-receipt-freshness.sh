#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Receipts get the same freshness checks as messages (issue 12 item 4): a
# receipt is refused — dead-lettered, counted, logged once — when it has
# expired, when its msgId was seen before, when it lives longer than
# message_ttl or starts in the future (issue 20), so a captured old
# receipt cannot move a `sent` state. The receipts are forged the way a broker user
# holding gamma's key (or a capture of gamma's receipts) would: with
# tests/tools/rawpub straight into lead.alpha.receipts.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0740
new_vhost $FLEET_VHOST
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub
URI=$(broker_uri $FLEET_VHOST)
Q=lead.alpha.receipts

state_of() { jq -r "select(.msgId == \"$1\") | .state" alpha/leads/alpha/sent; }
last_id() { tail -n1 alpha/leads/alpha/sent | jq -r .msgId; }
rejected() { sed -n "s/^rejected_$1: //p" alpha/status | grep . || echo 0; }
# receipt STATE REF [RAWPUB-ARGS...]: a receipt signed with gamma's key
receipt() {
    local state=$1 ref=$2
    shift 2
    "$RAWPUB" "$URI" $Q --sign "$TEST_DIR/keys/gamma.key" --from gamma --to alpha --text "" \
        --receipt "$ref" "$state" "$@"
}

test_expect_success 'alpha sends two messages to gamma, which is trusted but not running' '
    fleet_key gamma &&
    mount_fleet alpha peers=gamma inject=none &&
    echo "first to gamma" >alpha/peers/gamma/send && echo "$(last_id)" >m1 &&
    echo "second to gamma" >alpha/peers/gamma/send && echo "$(last_id)" >m2 &&
    test "$(state_of $(cat m1))" = published-unread &&
    test "$(state_of $(cat m2))" = published-unread
'

test_expect_success 'a fresh receipt from gamma moves sent (the path works)' '
    receipt injected "$(cat m1)" --print >r1.json &&
    wait_for 5 "test \"\$(state_of \$(cat m1))\" = injected" &&
    test "$(jq -r .ref r1.json)" = "$(cat m1)"
'

test_expect_success 'a receipt whose msgId was seen before is refused and changes nothing' '
    n=$(rejected replayed-receipt) &&
    receipt acked "$(cat m2)" --msgid "$(jq -r .msgId r1.json)" >/dev/null &&
    wait_for 5 "test \"\$(rejected replayed-receipt)\" = $((n + 1))" &&
    test "$(state_of $(cat m2))" = published-unread &&
    test "$(grep -c "receipts: rejected one from gamma about $(cat m2) (replayed-receipt" alpha.log)" = 1
'

test_expect_success 'the captured bytes of the first receipt, published again, are refused too' '
    n=$(rejected replayed-receipt) &&
    "$RAWPUB" "$URI" $Q --body-file r1.json >/dev/null &&
    wait_for 5 "test \"\$(rejected replayed-receipt)\" = $((n + 1))" &&
    test "$(state_of $(cat m1))" = injected
'

test_expect_success 'an expired receipt is refused and changes nothing' '
    n=$(rejected stale-receipt) &&
    receipt acked "$(cat m2)" --expires-in -600 >/dev/null &&
    wait_for 5 "test \"\$(rejected stale-receipt)\" = $((n + 1))" &&
    test "$(state_of $(cat m2))" = published-unread &&
    test "$(grep -c "receipts: rejected one from gamma about $(cat m2) (stale-receipt: expired at" alpha.log)" = 1
'

test_expect_success 'the refused receipts are dead letters; a fresh one about m2 still works' '
    test "$(broker_count fleet.dlq)" = 3 &&
    receipt acked "$(cat m2)" >/dev/null &&
    wait_for 5 "test \"\$(state_of \$(cat m2))\" = acked" &&
    test "$(state_of $(cat m1))" = injected
'

test_expect_success 'a receipt from the future, or living longer than message_ttl: refused, changes nothing' '
    n=$(rejected bad-receipt) &&
    receipt confirmed "$(cat m1)" --sent-in 3600 >/dev/null &&
    receipt confirmed "$(cat m1)" --expires-in 1000000 >/dev/null &&
    wait_for 5 "test \"\$(rejected bad-receipt)\" = $((n + 2))" &&
    test "$(state_of $(cat m1))" = injected &&
    grep -q "about $(cat m1) (bad-receipt: sentAt .* is in the future" alpha.log &&
    grep -q "about $(cat m1) (bad-receipt: lifetime from .* is longer than message_ttl" alpha.log &&
    test "$(broker_count fleet.dlq)" = 5
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha
'

test_done
