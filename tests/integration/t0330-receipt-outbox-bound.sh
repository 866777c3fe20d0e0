#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The receipt outbox's bound per peer never drops the one word a sender
# cannot learn otherwise (issue 43 item 7, "the per-peer outbox cap
# dropping receipts"). gamma sends beta three messages and goes offline with
# its receipt queue full (max_length receipts wait in lead.gamma.receipts,
# put there by a broker login), so beta's receipts for gamma wait in beta's
# outbox. beta runs with its bound lowered to 1 (FLEETFS_TEST_OUTBOX_CAP, the
# 1000 of doc/protocol.md section 9 made small): before this fix the second
# and third `acked` were dropped over the bound and gamma's sent kept
# `published` for ever while beta had acked them. Now all three wait, and
# once gamma's queue has room gamma's sent says acked for each. Past ten
# times the bound (a peer that sends and never takes its receipts) beta
# drops the rest, says so in its log and counts them; what reached
# lead.gamma.receipts is counted by the broker.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0330
new_vhost $FLEET_VHOST
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
RAWPUB=$BIN/tools/rawpub
URI=$(broker_uri $FLEET_VHOST)
ML=max_length=5
status_of() { sed -n "s/^$2: //p" "$1/status"; }
# fill: lead.gamma.receipts holds its 5, a sixth is refused
fill() {
    for i in 1 2 3 4 5; do
        "$RAWPUB" "$URI" lead.gamma.receipts --body "filler $i" >/dev/null || return 1
    done
    test_must_fail "$RAWPUB" "$URI" lead.gamma.receipts --body "one too many" >/dev/null
}
# drain: take what waits in lead.gamma.receipts (one line each, its
# message id first, tab-separated: a receipt's msgId, "-" for a filler)
# into ./taken
drain() { "$RAWPUB" "$URI" lead.gamma.receipts --take >>taken; }
# held_at N: beta's inbox shows N messages
held_at() { test "$(grep -c '^{' beta/leads/beta/inbox)" = "$1"; }

test_expect_success 'gamma sends beta three messages and goes offline' '
    FLEETFS_TEST_OUTBOX_CAP=1 mount_fleet beta peers=gamma inject=none $ML &&
    mount_fleet gamma peers=beta $ML &&
    for i in 1 2 3; do echo "from gamma $i" >gamma/peers/beta/send || return 1; done &&
    msgids gamma/leads/gamma/sent >gamma.ids && test $(wc -l <gamma.ids) = 3 &&
    unmount_fleet gamma &&
    wait_for 10 "held_at 3"
'

test_expect_success 'gamma'\''s receipt queue is full; beta acks all three: three acked receipts wait, none dropped' '
    fill &&
    echo all >beta/leads/beta/ack &&
    wait_for 10 "grep -q \"receipts: gamma does not take its receipts now\" beta.log" &&
    wait_for 10 "test \"\$(status_of beta receipts_waiting)\" = 3" &&
    test "$(status_of beta receipts_dropped)" = 0
'

test_expect_success 'room in gamma'\''s queue: gamma'\''s sent says acked for all three' '
    rmqctl purge_queue -p $FLEET_VHOST lead.gamma.receipts >/dev/null &&
    wait_for 30 "test \"\$(status_of beta receipts_waiting)\" = 0" &&
    n=$(broker_count lead.gamma.receipts) && test "$n" = 3 &&
    mount_fleet gamma peers=beta $ML &&
    for id in $(cat gamma.ids); do
        wait_for 10 "test \"\$(sent_state gamma $id)\" = acked" || return 1
    done &&
    unmount_fleet gamma
'

test_expect_success 'past ten times the bound: beta drops the rest, logs it and counts it' '
    fill &&
    for round in 1 2 3; do
        n=$(( round == 3 ? 2 : 5 )) &&
        "$RAWPUB" "$URI" lead.beta.inbox --sign "$TEST_DIR/keys/gamma.key" --from gamma \
            --to beta --text "flood $round" --count $n >/dev/null &&
        wait_for 10 "held_at $n" &&
        echo all >beta/leads/beta/ack &&
        wait_for 10 "held_at 0" || return 1
    done &&
    wait_for 10 "test \"\$(status_of beta receipts_dropped)\" = 2" &&
    test "$(status_of beta receipts_waiting)" = 10 &&
    grep -q "receipts: 10 receipts for gamma wait already (it does not take them), the most kept even for typed and acked messages" beta.log &&
    test "$(grep -c "receipts: 10 receipts for gamma wait already" beta.log)" = 1
'

test_expect_success 'room again: the ten kept reach lead.gamma.receipts (the broker hands over ten)' '
    : >taken &&
    wait_for 60 "drain && test \"\$(status_of beta receipts_waiting)\" = 0" &&
    drain &&
    test "$(awk '\''$1 != "-"'\'' taken | wc -l)" = 10 &&
    test "$(awk '\''$1 != "-" { print $1 }'\'' taken | sort -u | wc -l)" = 10 &&
    grep -q "receipts: 2 receipts for gamma were dropped over the bound" beta.log
'

test_expect_success 'unmount cleanly' '
    unmount_fleet beta
'

test_done
