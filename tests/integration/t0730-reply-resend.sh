#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Answering a message from the shell (peers/<id>/reply/<msgId>), and the
# safe resend of a message whose fate is unknown (leads/<me>/resend): the
# same signed envelope, same msgId, so the receiver keeps it to one copy.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

state_of() { grep "$1" alpha/leads/alpha/sent | tail -n1 | jq -r .state; }
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
RAWPUB=$BIN/tools/rawpub
copies() { msgids "$2" | grep -c "^$1$"; }

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta send_timeout=2s inject=none &&
    mount_fleet beta peers=alpha send_timeout=2s inject=none
'

test_expect_success 'beta answers alpha through reply/<msgId>; alpha sees replyTo' '
    echo "which parser?" >alpha/peers/beta/send &&
    q=$(tail -n1 alpha/leads/alpha/sent | jq -r .msgId) &&
    wait_for 15 "grep -q $q beta/leads/beta/inbox" &&
    ls beta/peers/alpha/reply >listed &&
    grep -qx "$q" listed &&
    echo "the new one" >beta/peers/alpha/reply/$q &&
    wait_for 15 "grep -q \"the new one\" alpha/leads/alpha/inbox" &&
    grep "the new one" alpha/leads/alpha/inbox | jq -e ".replyTo == \"$q\" and .from == \"beta\"" &&
    echo all >alpha/leads/alpha/ack &&
    grep "the new one" alpha/leads/alpha/history | jq -e ".replyTo == \"$q\""
'

test_expect_success 'a consumed message can still be answered; an unknown msgId cannot' '
    q=$(msgids beta/leads/beta/inbox | tail -n1) &&
    echo all >beta/leads/beta/ack &&
    echo "later answer" >beta/peers/alpha/reply/$q &&
    test_must_fail bash -c "echo x >beta/peers/alpha/reply/0123456789abcdef0123456789abcdef" 2>err &&
    grep -q "No such file or directory" err &&
    test_must_fail bash -c "echo x >beta/peers/alpha/reply/not-an-id" 2>err &&
    grep -q "No such file or directory" err &&
    mine=$(tail -n1 alpha/leads/alpha/sent | jq -r .msgId) &&
    test_must_fail bash -c "echo x >alpha/peers/beta/reply/$mine" 2>err
'

test_expect_success 'resend refuses what is not an unconfirmed entry of sent' '
    id=$(tail -n1 alpha/leads/alpha/sent | jq -r .msgId) &&
    test_must_fail bash -c "echo $id >alpha/leads/alpha/resend" 2>err &&
    grep -q "Invalid argument" err &&
    test_must_fail bash -c "echo 0123456789abcdef0123456789abcdef >alpha/leads/alpha/resend" 2>err &&
    grep -q "No such file or directory" err &&
    test_must_fail bash -c "echo nonsense >alpha/leads/alpha/resend" 2>err &&
    grep -q "Invalid argument" err
'

test_expect_success 'a publish lost in a frozen broker stays unconfirmed' '
    broker_freeze &&
    if test_must_fail bash -c "echo \"lost in the freeze\" >alpha/peers/beta/send" 2>err; then failed=1; else failed=0; fi &&
    broker_kill && broker_restart &&
    test $failed = 1 &&
    grep -q "Connection timed out" err &&
    wait_for 30 "grep -q \"^broker: connected\" alpha/status" &&
    wait_for 30 "grep -q \"^broker: connected\" beta/status" &&
    lost=$(tail -n1 alpha/leads/alpha/sent | jq -r .msgId) &&
    test "$(state_of $lost)" = unconfirmed &&
    echo $lost >lost.id
'

test_expect_success 'resend publishes it, and beta gets it once' '
    lost=$(cat lost.id) &&
    echo $lost >alpha/leads/alpha/resend &&
    test "$(state_of $lost)" = published &&
    wait_for 10 "grep -q $lost beta/leads/beta/inbox" &&
    test "$(copies $lost beta/leads/beta/inbox)" = 1
'

# A message the broker took whose confirm alpha never saw. The broker is
# frozen and alpha's write gives up (ETIMEDOUT, sent: unconfirmed); then
# alpha's daemon is stopped (SIGSTOP) and the broker thawed: it routes the
# publish to beta and sends its confirm into a socket nobody reads; once
# beta has the message, alpha is killed (-9) and mounted again, so the
# confirm is never heard of. (Until then this test unmounted alpha while
# the broker was frozen and counted on the broker routing a publish that
# came before the connection's close: twice in CI under ASan it did not,
# which RabbitMQ is free to do with a connection closed under it; the
# product is allowed either outcome, this test needs the delivered one.)
# The status read just before the freeze leaves a fresh probe of beta's
# mailbox, so the publish goes out at once instead of asking the broker
# first (a probe older than 1 s is renewed before a publish; it would go
# out after 1 s without the answer, inside alpha's send_timeout of 2 s, a
# margin this test does not lean on): the read, the freeze and the write
# go within half a second, or the broker is thawed and they are tried
# again.
fresh_probe_then_freeze() {
    local try t0
    for try in 1 2 3 4 5; do
        cat alpha/peers/beta/status >/dev/null || return 1
        t0=${EPOCHREALTIME/[.,]/}
        broker_freeze || return 1
        (( ${EPOCHREALTIME/[.,]/} - t0 < 500000 )) && return 0
        broker_thaw
    done
    echo "fresh_probe_then_freeze: each of 5 freezes took more than 0.5 s" >&2
    return 1
}
test_expect_success 'delivered although unconfirmed: the resent copy is refused, beta keeps one' '
    fresh_probe_then_freeze &&
    if test_must_fail bash -c "echo \"maybe delivered\" >alpha/peers/beta/send" 2>err; then failed=1; else failed=0; fi &&
    id=$(tail -n1 alpha/leads/alpha/sent | jq -r .msgId) &&
    pid=$(cat "$TEST_DIR/.harness/pid.alpha") &&
    at_exit "kill -CONT $pid 2>/dev/null; true" &&
    kill -STOP $pid &&
    wait_for 10 "! ps -L -o stat= -p $pid | grep -qv \"^[TZ]\"" &&
    broker_thaw &&
    test $failed = 1 &&
    grep -q "Connection timed out" err &&
    wait_for 10 "grep -q $id beta/leads/beta/inbox" &&
    kill_fleet alpha &&
    mount_fleet alpha peers=beta send_timeout=2s inject=none &&
    wait_for 30 "grep -q \"^broker: connected\" alpha/status" &&
    test "$(state_of $id)" = unconfirmed &&
    d0=$(broker_count fleet.dlq) &&
    echo $id >alpha/leads/alpha/resend &&
    wait_for 10 "grep -q \"^rejected_duplicate: 1$\" beta/status" &&
    test "$(copies $id beta/leads/beta/inbox)" = 1 &&
    grep -q "$id from alpha (duplicate" beta.log &&
    echo $id >dup.id && echo $d0 >dlq.before
'

# Issue 43 item 2: the refused duplicate is a duplicate, not a death. A
# malformed message put into beta's mailbox after the resend is the
# marker: beta judges deliveries in order and the broker dead-letters them
# in order, so once the marker is in fleet.dlq, a dead letter of the
# duplicate would be there before it (on 8dc6d57: fleet.dlq grew by 2, and
# alpha's sent said dead-lettered, "rejected by the reader of
# lead.beta.inbox", while beta still held the first copy).
test_expect_success 'the refused duplicate is not a death: no dead letter, alpha not dead-lettered; the held copy decides' '
    id=$(cat dup.id) && d0=$(cat dlq.before) &&
    "$RAWPUB" "$(broker_uri)" lead.beta.inbox --body "not an envelope" >/dev/null &&
    wait_for 10 "grep -q \"^rejected_malformed: 1$\" beta/status" &&
    test_absent 10 "test \$(broker_count fleet.dlq) -ge $((d0 + 1))" \
        "test \$(broker_count fleet.dlq) -ge $((d0 + 2))" &&
    wait_for 10 "test \$(broker_count lead.alpha.dead) = 0" &&
    test "$(state_of $id)" != dead-lettered &&
    test "$(copies $id beta/leads/beta/inbox)" = 1 &&
    echo $id >beta/leads/beta/ack &&
    wait_for 10 "test \"\$(state_of $id)\" = acked"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
