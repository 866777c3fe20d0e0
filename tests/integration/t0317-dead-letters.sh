#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Dead letters come home (issue 36, part 3), through real mounts on the
# shared login (make run's guest), every mount with message_ttl=4s (the
# fleet-wide queue TTL) and the default expire_grace (10 s). A message the
# broker dead-letters reaches its sender: queue-TTL expiry with nobody
# reading (the sender's `sent` says dead-lettered, "expired in
# lead.beta.inbox", within 5 s of its expiresAt, long before its own clock
# would conclude expired), a receiver's rejection that sends no receipt
# (beta does not trust alpha's key: "rejected by the reader of
# lead.beta.inbox"), and a local agent's message alike. Copies that are not
# alpha's — another lead's message, one forged under alpha's name,
# alpha's own bytes with no death — put into fleet.dlx with alpha's
# fleet-host header change nothing in alpha's sent and are counted. The
# broker's own counts (rabbitmqctl) show fleet.dlq kept every dead letter
# and lead.alpha.dead was emptied.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
command -v amqp-publish >/dev/null || test_skip_all "amqp-publish (amqp-tools) is not installed"
URI=$(broker_uri)
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
RAWPUB=$BIN/tools/rawpub

# field LEAD MSGID KEY: KEY of LEAD's sent entry MSGID
field() { jq -r "select(.msgId == \"$2\") | .$3 // empty" "$1/leads/$1/sent"; }
# until_expired MSGID: seconds from now to its expiresAt (at least 0)
until_expired() {
    local exp now
    exp=$(date -d "$(field alpha "$1" expiresAt)" +%s%N) && now=$(date +%s%N) &&
        echo $(( exp > now ? (exp - now) / 1000000000 : 0 ))
}
# dead_lettered LEAD MSGID WORDS: LEAD's sent says dead-lettered, detail WORDS
dead_lettered() {
    test "$(field "$1" "$2" state)" = dead-lettered && field "$1" "$2" detail | grep -q "$3"
}
status_of() { sed -n "s/^$2: //p" "$1/status"; }
# into_dlx FILE: FILE's bytes published into fleet.dlx with alpha's header
into_dlx() { amqp-publish -u "$URI" -e fleet.dlx -r x -p -H "fleet-host: alpha" -b "$(cat "$1")"; }

test_expect_success 'alpha mounted; beta has a mailbox but nobody reads it' '
    mount_fleet alpha peers=beta:gamma inject=none message_ttl=4s &&
    wait_for 10 "grep -q \"^consumer: ok\" alpha/status" &&
    wait_for 10 "n=\$(broker_count lead.alpha.dead) && test \"\$n\" = 0"
'

test_expect_success 'queue-TTL expiry with no consumer: alpha'"'"'s sent says dead-lettered within 5 s, with the broker'"'"'s reason' '
    dl0=$(broker_count fleet.dlq) &&
    echo "nobody reads this" >alpha/peers/beta/send &&
    id=$(last_sent_id alpha) &&
    test "$(field alpha $id state)" = published-unread &&
    wait_for $(( $(until_expired $id) + 5 )) "dead_lettered alpha $id \"expired in lead.beta.inbox\"" &&
    wait_for 10 "n=\$(broker_count fleet.dlq) && test \"\$n\" = $((dl0 + 1))" &&
    wait_for 10 "n=\$(broker_count lead.alpha.dead) && test \"\$n\" = 0" &&
    n=$(broker_count lead.beta.inbox) && test "$n" = 0 &&
    echo $id >expired.id
'

test_expect_success 'a later weaker state does not overwrite it: past expire_grace it is still dead-lettered' '
    id=$(cat expired.id) &&
    sleep $(( $(until_expired $id) + 11 )) &&
    dead_lettered alpha $id "expired in lead.beta.inbox"
'

test_expect_success 'copies that are not alpha'"'"'s, put into fleet.dlx under alpha'"'"'s header: sent unchanged, each counted' '
    mount_fleet gamma peers=alpha inject=none message_ttl=4s &&
    echo "held by gamma" >alpha/peers/gamma/send &&
    held=$(last_sent_id alpha) &&
    wait_for 5 "grep -q $held gamma/leads/gamma/inbox" &&
    cp alpha/leads/alpha/sent sent.before &&
    f0=$(status_of alpha dead_letters_foreign) &&
    { "$RAWPUB" "$URI" lead.nowhere --sign "$TEST_DIR/keys/gamma.key" --from gamma --to beta \
        --text "gamma to beta" --print >theirs.json 2>/dev/null || :; } &&
    { "$RAWPUB" "$URI" lead.nowhere --sign "$TEST_DIR/keys/gamma.key" --from alpha --to gamma \
        --msgid $held --text "forged under alpha" --print >forged.json 2>/dev/null || :; } &&
    test -s theirs.json && test -s forged.json &&
    into_dlx theirs.json && into_dlx forged.json &&
    wait_for 10 "test \"\$(status_of alpha dead_letters_foreign)\" = $((f0 + 2))" &&
    wait_for 10 "n=\$(broker_count lead.alpha.dead) && test \"\$n\" = 0" &&
    test_cmp sent.before alpha/leads/alpha/sent &&
    test "$(field alpha $held state)" = published &&
    grep -q "dead letters: a copy of .* changes nothing: from gamma, not this host" alpha.log &&
    grep -q "dead letters: a copy of $held .* not signed with this host" alpha.log
'

test_expect_success 'a receiver'"'"'s rejection (beta does not trust alpha: no receipt) comes home: dead-lettered, rejected' '
    fleet_key beta && mkdir -p trust.beta && cp "$TEST_DIR/trust/gamma.pub" trust.beta/ &&
    mount_fleet beta peers=alpha inject=none message_ttl=4s key="$TEST_DIR/keys/beta.key" \
        trusted_keys="$TEST_DIR/trust.beta" &&
    wait_for 10 "n=\$(broker_count lead.beta.inbox) && test \"\$n\" = 0" &&
    echo "beta refuses this" >alpha/peers/beta/send &&
    id=$(last_sent_id alpha) &&
    wait_for 5 "dead_lettered alpha $id \"rejected by the reader of lead.beta.inbox\"" &&
    grep -q "unknown-key" beta.log &&
    echo $id >rejected.id
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
