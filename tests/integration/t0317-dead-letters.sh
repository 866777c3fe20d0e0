#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Dead letters come home (issue 36, part 3), through real mounts on the
# shared login (make run's guest). A message the broker dead-letters
# reaches its sender: queue-TTL expiry with nobody reading (in vhost
# t0317ttl, where every mount has message_ttl=4s: the sender's `sent` says
# dead-lettered, "expired in lead.nobody.inbox", within 5 s of its
# expiresAt, long before its own clock would conclude expired, and stays
# so past expire_grace), the same for a local agent's message, for a
# message to an agent whose host is down (it died in agent.w1@member.inbox)
# and for a broadcast member's copy (that recipient's state), and a
# receiver's rejection that sends no receipt (beta does not trust alpha's
# key: "rejected by the reader of lead.beta.inbox"). Copies that are not
# alpha's — another lead's message, one forged under alpha's name — put
# into fleet.dlx with alpha's fleet-host header change nothing in alpha's
# sent and are counted. The broker's own counts (rabbitmqctl) show fleet.dlq
# kept every dead letter and lead.<host>.dead was emptied.
#
# Then the operator's `fleetfs dlq` on vhost /, checked against the
# broker's counts: list and show leave fleet.dlq as it was; redrive of the
# rejected message once beta trusts alpha: beta takes it once (one inbox
# line) and alpha's sent moves on to beta's receipt (acked); a copy of it
# replayed into beta's mailbox after that is refused as a replay, and its
# redrive too (it comes back to fleet.dlq, never shown again); an unknown
# ID is exit 3; purge empties fleet.dlq and says how many; a login without
# rights on fleet.dlq gets a clear error, exit 1.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
command -v amqp-publish >/dev/null || test_skip_all "amqp-publish (amqp-tools) is not installed"
URI=$(broker_uri)
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
RAWPUB=$BIN/tools/rawpub

# sent_of FILE MSGID KEY: KEY of the entry MSGID in the sent file FILE
sent_of() { jq -r "select(.msgId == \"$2\") | .$3 // empty" "$1"; }
# field LEAD MSGID KEY: KEY of LEAD's sent entry MSGID
field() { sent_of "$1/leads/$1/sent" "$2" "$3"; }
# until_expired FILE MSGID: seconds from now to its expiresAt (at least 0)
until_expired() {
    local exp now
    exp=$(date -d "$(sent_of "$1" "$2" expiresAt)" +%s%N) && now=$(date +%s%N) &&
        echo $(( exp > now ? (exp - now) / 1000000000 : 0 ))
}
# dead_lettered FILE MSGID WORDS: the sent file says dead-lettered, detail WORDS
dead_lettered() {
    test "$(sent_of "$1" "$2" state)" = dead-lettered && sent_of "$1" "$2" detail | grep -q "$3"
}
status_of() { sed -n "s/^$2: //p" "$1/status"; }
# recipient_of FILE MSGID ID: the state of recipient ID in a broadcast's sent entry
recipient_of() { jq -r --arg id "$2" --arg r "$3" 'select(.msgId == $id) | .recipients[$r] // empty' "$1"; }
# into_dlx FILE: FILE's bytes published into fleet.dlx with alpha's header
into_dlx() { amqp-publish -u "$URI" -e fleet.dlx -r x -p -H "fleet-host: alpha" -b "$(cat "$1")"; }
# count Q [VHOST]: the broker's count of messages in Q
count() { FLEET_VHOST=${2:-/} broker_count "$1"; }
# refused URI OP ARG...: the broker refused it with 403 (tests/tools/amqptry)
refused() {
    local out rc
    out=$("$BIN/tools/amqptry" "$@") && { echo "NOT refused: ${*:2} -> $out" >&2; return 1; }
    rc=$?
    [[ $rc == 3 && $out == "refused 403"* ]] || { echo "${*:2} -> $out" >&2; return 1; }
}
# dlq ARGS: fleetfs dlq on the guest login of vhost /
dlq() { FLEET_BROKER_URI=$URI "$FLEETFS" dlq "$@"; }

test_expect_success 'vhost t0317ttl: shorty (message_ttl=4s, agent w1) mounted; nobody has a mailbox nobody reads' '
    new_vhost t0317ttl &&
    FLEET_VHOST=t0317ttl mount_fleet shorty peers=nobody inject=none agents=w1 message_ttl=4s &&
    wait_for 10 "grep -q \"^consumer: ok\" shorty/status" &&
    wait_for 10 "grep -qx \"dead_letters: ok\" shorty/status" &&
    wait_for 10 "n=\$(count lead.shorty.dead t0317ttl) && test \"\$n\" = 0"
'

test_expect_success 'queue-TTL expiry with no consumer: the sender'"'"'s sent says dead-lettered within 5 s, with the broker'"'"'s reason' '
    dl0=$(count fleet.dlq t0317ttl) &&
    echo "nobody reads this" >shorty/peers/nobody/send &&
    sent=shorty/leads/shorty/sent && id=$(last_sent_id shorty) &&
    test "$(sent_of $sent $id state)" = published-unread &&
    wait_for $(( $(until_expired $sent $id) + 5 )) "dead_lettered $sent $id \"expired in lead.nobody.inbox\"" &&
    wait_for 10 "n=\$(count fleet.dlq t0317ttl) && test \"\$n\" = $((dl0 + 1))" &&
    wait_for 10 "n=\$(count lead.shorty.dead t0317ttl) && test \"\$n\" = 0" &&
    n=$(count lead.nobody.inbox t0317ttl) && test "$n" = 0 &&
    echo $id >expired.id
'

test_expect_success 'a local agent'"'"'s message alike: w1@shorty'"'"'s sent says dead-lettered' '
    echo "w1 to nobody" >shorty/agents/w1@shorty/to/nobody &&
    sent=shorty/agents/w1@shorty/sent && id=$(jq -r .msgId $sent | tail -n1) &&
    wait_for $(( $(until_expired $sent $id) + 5 )) "dead_lettered $sent $id \"expired in lead.nobody.inbox\"" &&
    wait_for 10 "n=\$(count lead.shorty.dead t0317ttl) && test \"\$n\" = 0"
'

test_expect_success 'an agent'"'"'s mailbox and a broadcast member whose host is down: each dead letter comes home to its recipient'"'"'s entry' '
    FLEET_VHOST=t0317ttl mount_fleet member peers=shorty inject=none agents=w1 groups=ops message_ttl=4s &&
    wait_for 15 "test -d shorty/agents/w1@member && test -e shorty/groups/ops/send" &&
    unmount_fleet member &&
    echo "to w1, who is away" >shorty/agents/w1@member/send &&
    sent=shorty/leads/shorty/sent && id=$(last_sent_id shorty) &&
    echo "to ops, whose member is away" >shorty/groups/ops/send &&
    gid=$(last_sent_id shorty) &&
    wait_for $(( $(until_expired $sent $gid) + 5 )) "dead_lettered $sent $id \"expired in agent.w1@member.inbox\" && test \"\$(recipient_of $sent $gid member)\" = dead-lettered" &&
    test "$(sent_of $sent $gid state)" = dead-lettered &&
    wait_for 10 "n=\$(count lead.shorty.dead t0317ttl) && test \"\$n\" = 0"
'

test_expect_success 'a later weaker state does not overwrite it: past expire_grace it is still dead-lettered' '
    sent=shorty/leads/shorty/sent && id=$(cat expired.id) &&
    sleep $(( $(until_expired $sent $id) + 11 )) &&
    dead_lettered $sent $id "expired in lead.nobody.inbox" &&
    unmount_fleet shorty
'

test_expect_success 'vhost /: alpha and gamma mounted; beta trusts gamma but not alpha' '
    mount_fleet alpha peers=beta:gamma inject=none &&
    mount_fleet gamma peers=alpha inject=none &&
    fleet_key beta && mkdir -p trust.beta && cp "$TEST_DIR/trust/gamma.pub" trust.beta/ &&
    mount_fleet beta peers=alpha inject=none key="$TEST_DIR/keys/beta.key" \
        trusted_keys="$TEST_DIR/trust.beta" &&
    wait_for 10 "n=\$(count lead.alpha.dead) && test \"\$n\" = 0"
'

test_expect_success 'copies that are not alpha'"'"'s, put into fleet.dlx under alpha'"'"'s header: sent unchanged, each counted' '
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
    wait_for 10 "n=\$(count lead.alpha.dead) && test \"\$n\" = 0" &&
    test_cmp sent.before alpha/leads/alpha/sent &&
    test "$(field alpha $held state)" = published &&
    grep -q "dead letters: a copy of .* changes nothing: from gamma, not this host" alpha.log &&
    grep -q "dead letters: a copy of $held .* not signed with this host" alpha.log
'

test_expect_success 'a receiver'"'"'s rejection (beta does not trust alpha: no receipt) comes home: dead-lettered, rejected' '
    echo "beta refuses this" >alpha/peers/beta/send &&
    id=$(last_sent_id alpha) &&
    wait_for 5 "dead_lettered alpha/leads/alpha/sent $id \"rejected by the reader of lead.beta.inbox\"" &&
    grep -q "unknown-key" beta.log &&
    echo $id >rejected.id
'

test_expect_success 'per-host logins (fleetfs-broker host add): kilo'"'"'s dead letter comes home on its own login' '
    for h in kilo lima; do
        "$FLEET_ROOT/scripts/broker" host add $h --dir "$BROKER_DIR" >$h.login 2>$h.add || { cat $h.add; return 1; }
    done &&
    grep -q "lead.kilo.dead" kilo.add &&
    export LOGIN_kilo="$(sed -n "s/^FLEET_BROKER_URI=//p" kilo.login)" &&
    mount_fleet kilo broker_uri_env=LOGIN_kilo peers=lima inject=none &&
    wait_for 10 "grep -qx \"dead_letters: ok\" kilo/status" &&
    echo "{\"body\":\"lima never reads\",\"expiresIn\":\"2s\"}" >kilo/peers/lima/send.json &&
    sent=kilo/leads/kilo/sent && id=$(last_sent_id kilo) &&
    wait_for $(( $(until_expired $sent $id) + 5 )) "dead_lettered $sent $id \"expired in lead.lima.inbox\"" &&
    wait_for 10 "n=\$(count lead.kilo.dead) && test \"\$n\" = 0"
'

test_expect_success 'least privilege: kilo reads its own lead.kilo.dead only, binds nothing to fleet.dead, may not read fleet.dlq' '
    LOGIN_kilo=$(sed -n "s/^FLEET_BROKER_URI=//p" kilo.login) &&
    refused "$LOGIN_kilo" get lead.lima.dead &&
    refused "$LOGIN_kilo" bind lead.kilo.dead fleet.dead kilo &&
    refused "$LOGIN_kilo" get fleet.dlq &&
    { FLEET_BROKER_URI=$LOGIN_kilo "$FLEETFS" dlq list >out 2>err; test $? = 1; } &&
    grep -q "403 ACCESS_REFUSED" err &&
    unmount_fleet kilo
'

test_expect_success 'fleetfs dlq list and show: every dead letter, as the broker counts them; they stay' '
    n=$(count fleet.dlq) && test "$n" -ge 1 &&
    dlq list >list &&
    test $(grep -cE "^([0-9a-f]{32}|#[0-9]+) " list) = "$n" &&
    tail -n1 list | grep -q "^fleet.dlq: $n dead letter" &&
    id=$(cat rejected.id) &&
    grep -qE "^$id rejected lead\.beta\.inbox [0-9T:-]+Z coord from alpha to beta$" list &&
    dlq show $id >show &&
    grep -qx "reason: rejected" show && grep -qx "queue: lead.beta.inbox" show &&
    grep -qx "fleet-host: alpha" show && grep -q "^body: {.*\"msgId\":\"$id\"" show &&
    grep -q "^1 copy of $id in fleet.dlq" show &&
    n2=$(count fleet.dlq) && test "$n2" = "$n" &&
    { dlq show 0123456789abcdef0123456789abcdef >none 2>err; test $? = 3; } &&
    grep -q "no dead letter 0123456789abcdef0123456789abcdef in fleet.dlq" err &&
    { dlq redrive 0123456789abcdef0123456789abcdef 2>err; test $? = 3; } &&
    { dlq frobnicate 2>err; test $? = 2; } && grep -q "^usage: fleetfs dlq" err
'

test_expect_success 'redrive an unconsumed one: beta, now trusting alpha, takes it once; alpha hears beta'"'"'s word' '
    id=$(cat rejected.id) &&
    sed -n "s/^body: //p" show >replay.json && test -s replay.json &&
    cp "$TEST_DIR/trust/alpha.pub" trust.beta/ &&
    n=$(count fleet.dlq) &&
    dlq redrive $id >out &&
    grep -q "^redrove $id: the broker confirmed it into lead.beta.inbox; removed from fleet.dlq" out &&
    wait_for 10 "grep -q $id beta/leads/beta/inbox" &&
    test $(grep -c $id beta/leads/beta/inbox) = 1 &&
    test "$(jq -r "select(.msgId == \"$id\") | .body" beta/leads/beta/inbox)" = "beta refuses this" &&
    n2=$(count fleet.dlq) && test "$n2" = $((n - 1)) &&
    echo $id >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(field alpha $id state)\" = acked" &&
    test "$(jq -r "select(.msgId == \"$id\") | .consumed" beta/leads/beta/history)" = acked
'

test_expect_success 'redrive a consumed one: beta refuses it as a replay, it comes back to fleet.dlq, never shown' '
    id=$(cat rejected.id) &&
    r0=$(status_of beta rejected_replayed) &&
    "$RAWPUB" "$URI" lead.beta.inbox --body-file replay.json --message-id $id &&
    wait_for 10 "test \"\$(status_of beta rejected_replayed)\" = $((${r0:-0} + 1))" &&
    n=$(count fleet.dlq) &&
    dlq show $id | grep -q "^1 copy of $id" &&
    dlq redrive $id >out && grep -q "^redrove $id" out &&
    wait_for 10 "test \"\$(status_of beta rejected_replayed)\" = $((${r0:-0} + 2))" &&
    wait_for 10 "n2=\$(count fleet.dlq) && test \"\$n2\" = $n" &&
    ! grep -q $id beta/leads/beta/inbox &&
    test $(grep -c $id beta/leads/beta/history) = 1 &&
    test "$(field alpha $id state)" = acked
'

test_expect_success 'purge: fleet.dlq emptied, and it says how many; a login without rights: a clear error, exit 1' '
    id=$(cat rejected.id) && n=$(count fleet.dlq) && test "$n" -ge 1 &&
    dlq purge >out && grep -qE "^purged $n dead letters? from fleet.dlq$" out &&
    n2=$(count fleet.dlq) && test "$n2" = 0 &&
    dlq list >list && grep -qx "fleet.dlq: 0 dead letters, oldest first (listed; each stays there)" list &&
    rmqctl add_user nobody nopass >/dev/null 2>&1 &&
    rmqctl set_permissions -p / nobody "^\$" "^\$" "^\$" >/dev/null 2>&1 &&
    nobody=$(sed "s|guest:guest|nobody:nopass|" <<<"$URI") &&
    for op in list purge "show $id" "redrive $id"; do
        { FLEET_BROKER_URI=$nobody "$FLEETFS" dlq $op >out 2>err; test $? = 1; } &&
        grep -q "403 ACCESS_REFUSED.*this broker login may not" err && ! grep -q nopass err || return 1
    done
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
