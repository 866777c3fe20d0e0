#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Trust nobody: messages published straight into beta's mailbox with a raw
# AMQP client, bypassing fleetfs — unsigned, forged, untrusted, misaddressed,
# expired, replayed, malformed, huge, not UTF-8.  None reaches the inbox or
# the pane; each is dead-lettered into fleet.dlq, counted by reason, and
# beta keeps serving good messages throughout.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_use_shared
FLEET_VHOST=t0800
new_vhost $FLEET_VHOST
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub
URI=$(broker_uri $FLEET_VHOST)
Q=lead.beta.inbox

dlq() { broker_count fleet.dlq; }
# reject CASE RAWPUB-ARGS...: publish, then expect one more dead letter and
# one more rejection counted as CASE, and nothing new in the inbox
reject() {
    local reason=$1 before after n0
    shift
    before=$(dlq) &&
    n0=$(grep "^rejected_$reason:" beta/status | awk "{print \$2}") &&
    "$RAWPUB" "$URI" $Q "$@" >/dev/null &&
    wait_for 5 "test \"\$(dlq)\" = $((before + 1))" &&
    wait_for 5 "grep -q \"^rejected_$reason: $(( ${n0:-0} + 1 ))$\" beta/status" &&
    test ! -s beta/leads/beta/inbox
}

test_expect_success 'alpha and beta mount, beta types into a (fake) herdr pane' '
    herdr_state "{\"panes\":[{\"pane_id\":\"w1:p1\",\"workspace_id\":\"w1\",\"tab_id\":\"w1:t1\",\"agent\":\"claude\",\"name\":\"beta\",\"agent_status\":\"working\"}]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    fleet_key mallory &&
    grep -q "^signing: on (ed25519; " beta/status &&
    n=$(dlq) && test "$n" = 0
'

test_expect_success 'unsigned: rejected' '
    test_must_fail "$RAWPUB" "$URI" lead.nowhere --sign $TEST_DIR/keys/alpha.key --from alpha --to beta --text hi --print >signed.json 2>/dev/null &&
    jq -c "del(.sig)" signed.json >unsigned.json &&
    test -s unsigned.json &&
    reject unsigned --body-file unsigned.json
'

test_expect_success 'a bad signature (body changed after signing): rejected' '
    reject bad-signature --sign $TEST_DIR/keys/alpha.key --from alpha --to beta --text "pay me" --tamper
'

test_expect_success 'signed by a key not trusted for the sender: rejected' '
    reject bad-signature --sign $TEST_DIR/keys/mallory.key --from alpha --to beta --text "I am alpha"
'

test_expect_success 'signed by a sender nobody trusts: rejected' '
    rm -f $TEST_DIR/trust/mallory.pub &&
    reject unknown-key --sign $TEST_DIR/keys/mallory.key --from mallory --to beta --text "hello from nowhere"
'

test_expect_success 'the right key, but addressed to another lead: rejected' '
    reject wrong-recipient --sign $TEST_DIR/keys/alpha.key --from alpha --to gamma --text "not for beta"
'

test_expect_success 'expired (beyond the 5 minute clock skew): rejected' '
    reject expired --sign $TEST_DIR/keys/alpha.key --from alpha --to beta --text stale --expires-in -600
'

test_expect_success 'not JSON, JSON without fields, 1 MiB, invalid UTF-8: rejected as malformed' '
    reject malformed --body "this is not json" &&
    reject malformed --body "{\"v\":1,\"type\":\"coord\"}" &&
    head -c 1048576 /dev/zero | tr "\\0" a >big.txt &&
    jq -Rsc "{v:1,type:\"coord\",msgId:\"0123456789abcdef0123456789abcdef\",from:\"alpha\",to:\"beta\",sentAt:\"2026-01-01T00:00:00Z\",expiresAt:\"2099-01-01T00:00:00Z\",body:.}" big.txt >big.json &&
    reject malformed --body-file big.json &&
    printf "{\"v\":1,\"type\":\"coord\",\"msgId\":\"0123456789abcdef0123456789abcdef\",\"from\":\"alpha\",\"to\":\"beta\",\"sentAt\":\"2026-01-01T00:00:00Z\",\"expiresAt\":\"2099-01-01T00:00:00Z\",\"body\":\"caf\\xe9\"}" >latin1.json &&
    reject malformed --body-file latin1.json &&
    grep -q "rejected message 0123456789abcdef0123456789abcdef claiming to be from alpha (malformed: " beta.log &&
    printf "{\"v\":1,\"type\":\"coord\",\"msgId\":\"00000000000000000000000000000abc\",\"from\":\"alpha\",\"to\":\"beta\",\"to\":\"gamma\",\"sentAt\":\"2026-01-01T00:00:00Z\",\"expiresAt\":\"2099-01-01T00:00:00Z\",\"body\":\"x\"}" >dupkey.json &&
    reject malformed --body-file dupkey.json &&
    grep -q "rejected message 00000000000000000000000000000abc claiming to be from alpha (malformed: a JSON object with a key given twice" beta.log
'

test_expect_success 'a good message from alpha still arrives, signed' '
    echo "all good here" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"all good here\" beta/leads/beta/inbox"
'

test_expect_success 'replayed: the same signed bytes published again are rejected' '
    "$RAWPUB" "$URI" $Q --sign $TEST_DIR/keys/alpha.key --from alpha --to beta --text "once only" --print >once.json &&
    wait_for 5 "grep -q \"once only\" beta/leads/beta/inbox" &&
    echo all >beta/leads/beta/ack &&
    reject replayed --body-file once.json
'

test_expect_success 'nothing refused was typed; history keeps only what a verified sender sent' '
    test $(prompts) = 0 && test $(refused) = 0 &&
    ! grep -qE "pay me|I am alpha|hello from nowhere" beta/leads/beta/history &&
    grep "not for beta" beta/leads/beta/history | jq -e ".consumed == \"rejected\" and .detail == \"wrong-recipient\"" >/dev/null &&
    grep "\"stale\"" beta/leads/beta/history | jq -e ".consumed == \"expired\"" >/dev/null
'

test_expect_success 'status counts every rejection by reason' '
    grep -q "^rejected: 12$" beta/status &&
    grep -q "^dead_lettered: 12$" beta/status &&
    grep -q "^rejected_malformed: 5$" beta/status
'

# the stale copy (10 minutes past its expiresAt) is receipted expired, not
# rejected (issue 43: a copy that late is expired; t0326)
test_expect_success 'no receipt went to an unverified sender; the verified alpha got its receipts: rejected (misaddressed), expired (stale)' '
    n=$(broker_count lead.mallory.receipts) && test -z "$n" &&
    wait_for 5 "test \$(grep -c \"beta says rejected about\" alpha.log) = 1" &&
    wait_for 5 "test \$(grep -c \"beta says expired about\" alpha.log) = 1"
'

# The trust directory, changed while beta runs. cp and scp create a .pub
# and fill it afterwards; the directory's mtime moves only for the first.
test_expect_success 'a .pub copied in while its sender is sending: trusted once the file is whole' '
    fleet_key trudy &&
    mv trust/trudy.pub trudy.pub &&
    : >trust/trudy.pub &&
    d0=$(dlq) &&
    "$RAWPUB" "$URI" $Q --sign keys/trudy.key --from trudy --to beta --text "before its key was whole" >/dev/null &&
    wait_for 5 "test \"\$(dlq)\" = $((d0 + 1))" &&
    cat trudy.pub >trust/trudy.pub &&
    "$RAWPUB" "$URI" $Q --sign keys/trudy.key --from trudy --to beta --text "once its key is whole" >/dev/null &&
    wait_for 5 "grep -q \"once its key is whole\" beta/leads/beta/inbox" &&
    test "$(dlq)" = $((d0 + 1)) &&
    ! grep -q "before its key was whole" beta/leads/beta/inbox
'

test_expect_success 'a .pub removed (a key revoked): refused within a second, no restart, no status read' '
    rm trust/trudy.pub &&
    sleep 1.1 &&
    d0=$(dlq) &&
    "$RAWPUB" "$URI" $Q --sign keys/trudy.key --from trudy --to beta --text "after its key was removed" >/dev/null &&
    wait_for 5 "test \"\$(dlq)\" = $((d0 + 1))" &&
    ! grep -q "after its key was removed" beta/leads/beta/inbox &&
    grep -q "security: trusted_keys .* changed: .* trusted keys now" beta.log
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
