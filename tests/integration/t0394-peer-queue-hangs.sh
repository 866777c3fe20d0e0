#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One peer's mailbox stops answering (its queue process is suspended inside
# the broker, as a stuck queue or a quorum queue without a leader would be).
# Every host that lists that peer probes its mailbox (status files, the
# notifier's round, each send to it), and a passive declare of that queue
# never answers. It was asked synchronously: after RPC_TIMEOUT_MS (5 s) the
# asking connection was dropped, with the publishing one beside it, and made
# again, every few seconds, on every host: sends to healthy peers failed
# ECOMM meanwhile and deliveries stopped. Expected: the stuck mailbox
# affects what goes to it only; every connection stays up (the broker's
# own list of connections says so); a send to it fails ETIMEDOUT
# (unconfirmed) and is taken once the queue answers again.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0394
new_vhost $FLEET_VHOST

test_expect_success 'alpha, beta and gamma list each other; all mailboxes answer' '
    mount_fleet alpha peers=beta:gamma send_timeout=3s inject=none &&
    mount_fleet beta peers=alpha:gamma send_timeout=20s inject=none &&
    mount_fleet gamma peers=alpha:beta inject=none &&
    wait_for 10 "grep -q \"^state: reading\" alpha/peers/gamma/status" &&
    wait_for 10 "grep -q \"^state: reading\" beta/peers/gamma/status" &&
    broker_connections >before &&
    test $(wc -l <before) -ge 6
'

test_expect_success 'gamma'\''s mailbox hangs: alpha'\''s sends to beta all go, for 12 s; no connection is remade' '
    queue_process suspend lead.gamma.inbox &&
    at_exit "queue_process resume lead.gamma.inbox" &&
    for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
        echo "to beta $i" >alpha/peers/beta/send || return 1
        sleep 1
    done &&
    wait_for 10 "test \$(grep -c \"to beta\" beta/leads/beta/inbox) = 12" &&
    broker_connections >during &&
    diff before during
'

test_expect_success 'gamma'\''s status says it does not answer, within probe_timeout' '
    start=$(date +%s%N) &&
    cat alpha/peers/gamma/status >st &&
    ms=$(( ($(date +%s%N) - start) / 1000000 )) &&
    cat st && echo "read in $ms ms" &&
    test $ms -lt 4000 &&
    grep -q "^state: unknown$" st &&
    grep -q "^detail: .*lead.gamma.inbox" st &&
    grep -q "^state: reading$" alpha/peers/beta/status
'

test_expect_success 'a send to gamma fails ETIMEDOUT, unconfirmed; a send to beta right after goes' '
    test_must_fail bash -c "echo \"to gamma\" >alpha/peers/gamma/send" 2>err &&
    grep -q "Connection timed out" err &&
    id=$(last_sent_id alpha) && echo $id >gamma.id &&
    test "$(sent_state alpha $id)" = unconfirmed &&
    echo "to beta after" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"to beta after\" beta/leads/beta/inbox" &&
    grep -q "publisher: lead.gamma.inbox: no answer" alpha.log &&
    broker_connections >during &&
    diff before during
'

test_expect_success 'gamma'\''s mailbox answers again: the message reaches gamma once, sent moves on' '
    queue_process resume lead.gamma.inbox &&
    id=$(cat gamma.id) &&
    wait_for 15 "grep -q $id gamma/leads/gamma/inbox" &&
    test $(grep -c $id gamma/leads/gamma/inbox) = 1 &&
    wait_for 15 "test \"\$(sent_state alpha $id)\" != unconfirmed" &&
    wait_for 10 "grep -q \"^state: reading\" alpha/peers/gamma/status" &&
    broker_connections >after &&
    diff before after
'

# A publish waits for its mailbox's probe at most 1 s, then goes out. It
# used to be recorded "published" (someone reads it) whatever the probe said
# later; the probe, sent first, is answered before the confirm, and now
# decides. beta sends, with a send_timeout long enough for rabbitmqctl
# (seconds to start on a busy machine) to resume the queue while the write
# waits; it resumes once beta's log says the publish went out unanswered
# (after the last probe answer beta holds is more than 1 s old, so the
# publish asks again).
late_send() {
    (echo "late probe" >beta/peers/gamma/send 2>late.err; echo $? >late.rc) &
}
test_expect_success 'a send to an unread mailbox whose probe answers after 1 s: published-unread, not published' '
    unmount_fleet gamma &&
    wait_for 15 "grep -q \"^state: not-reading\" beta/peers/gamma/status" &&
    queue_process suspend lead.gamma.inbox &&
    sleep 1.1 &&
    late_send &&
    wait_for 10 "grep -q \"publisher: lead.gamma.inbox: no answer\" beta.log" &&
    queue_process resume lead.gamma.inbox &&
    wait_for 20 "test -s late.rc" &&
    cat late.err &&
    test_eq "write status" "$(cat late.rc)" 0 &&
    id=$(last_sent_id beta) &&
    jq -c "select(.msgId == \"$id\")" beta/leads/beta/sent &&
    test_eq "state of $id" "$(sent_state beta $id)" published-unread
'

# When every probe channel waits on a mailbox that does not answer, a
# publish cannot ask about its own mailbox at all: it goes out without the
# probe, and nothing answers before its confirm. sent must say that nobody
# knows whether it is read, never "published" with a reader nobody saw.
# delta lists eight stuck mailboxes (its notifier's probes of them hold
# the consuming connection's probe channels, so beta's cached answer gets
# old) and writes to each (those hold the publishing connection's).
TRY=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/amqptry
[[ ${FLEETFS_BUILD:-} == /* ]] && TRY=$FLEETFS_BUILD/tools/amqptry
stuck="s1 s2 s3 s4 s5 s6 s7 s8"
test_expect_success 'every probe channel held by stuck mailboxes: a send to beta goes, "not known" whether read' '
    uri=$(broker_uri $FLEET_VHOST) &&
    for s in $stuck; do
        "$TRY" "$uri" declare-mailbox lead.$s.inbox >/dev/null &&
        queue_process suspend lead.$s.inbox &&
        at_exit "queue_process resume lead.$s.inbox" || return 1
    done &&
    mount_fleet delta peers=beta:${stuck// /:} send_timeout=2s inject=none &&
    for s in $stuck; do
        { echo "to $s" >delta/peers/$s/send 2>/dev/null; echo $? >$s.rc; } &
    done &&
    wait_for 20 "test \$(cat s?.rc 2>/dev/null | wc -l) = 8" &&
    ! grep -qx 0 s?.rc &&
    echo "to beta unprobed" >delta/peers/beta/send &&
    id=$(last_sent_id delta) &&
    jq -c "select(.msgId == \"$id\")" delta/leads/delta/sent >entry &&
    cat entry &&
    test_eq "state of $id" "$(sent_state delta $id)" published &&
    grep -q "whether anyone reads lead.beta.inbox is not known" entry &&
    wait_for 10 "grep -q \"to beta unprobed\" beta/leads/beta/inbox"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet delta
'

test_done
