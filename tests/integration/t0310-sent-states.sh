#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The two sent states no other file reaches, through real mounts:
# `rejected` (the peer's fleetfs refused the message and said so in a
# receipt) and an `unconfirmed` that lasts (the write failed with ETIMEDOUT
# and the broker died before it could confirm: nothing will ever move it
# on, and the message never arrives).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

# DETAIL_OF LEAD MSGID: from LEAD's sent (sent_state and last_sent_id: fleet.sh)
detail_of() { jq -r "select(.msgId == \"$2\") | .detail" $1/leads/$1/sent; }

# alpha and beta accept messages that live at most 1 h (message_ttl);
# gamma stamps its messages with the default 7 days: beta refuses them as
# "bad-lifetime" — from a verified sender, so gamma gets a `rejected` receipt
test_expect_success 'alpha and beta (message_ttl 1 hour), gamma (the default 7 days) mount' '
    fleet_key alpha && fleet_key beta && fleet_key gamma &&
    mount_fleet beta peers=alpha:gamma message_ttl=1h send_timeout=2s &&
    mount_fleet alpha peers=beta message_ttl=1h send_timeout=2s &&
    mount_fleet gamma peers=beta send_timeout=2s
'

test_expect_success 'a message beta refuses: gamma sees it rejected, with the reason' '
    echo "this lives too long for beta" >gamma/peers/beta/send &&
    id=$(last_sent_id gamma) && echo $id >rejected.id &&
    wait_for 10 "test \"\$(sent_state gamma $id)\" = rejected" &&
    detail_of gamma $id | grep -q "^bad-lifetime: .*longer than message_ttl" &&
    test ! -s beta/leads/beta/inbox &&
    grep $id beta/leads/beta/history | jq -e ".consumed == \"rejected\" and .detail == \"bad-lifetime\"" &&
    grep -q "^rejected_bad-lifetime: 1$" beta/status &&
    n=$(broker_count fleet.dlq) && test "$n" = 1
'

test_expect_success 'rejected is final: it survives a restart of gamma' '
    unmount_fleet gamma &&
    mount_fleet gamma peers=beta send_timeout=2s &&
    test "$(sent_state gamma $(cat rejected.id))" = rejected
'

test_expect_success 'broker frozen: the write fails with ETIMEDOUT, sent says unconfirmed' '
    broker_freeze &&
    if test_must_fail bash -c "echo \"lost with the broker\" >alpha/peers/beta/send" 2>err; then failed=1; else failed=0; fi &&
    id=$(last_sent_id alpha) && echo $id >unconfirmed.id &&
    state=$(sent_state alpha $id) &&
    broker_kill &&
    test $failed = 1 &&
    grep -q "write error: Connection timed out" err &&
    test "$state" = unconfirmed &&
    grep "$id" alpha.log | grep -q "no confirm within 2000 ms; state unknown"
'

test_expect_success 'killed while frozen and restarted: the confirm never comes, unconfirmed lasts' '
    broker_restart &&
    wait_for 20 "grep -q \"^broker: connected$\" alpha/status" &&
    wait_for 20 "grep -q \"^consumer: ok$\" beta/status" &&
    echo "sent after the restart" >alpha/peers/beta/send &&
    later=$(last_sent_id alpha) &&
    wait_for 10 "grep -q $later beta/leads/beta/inbox" &&
    echo $later >beta/leads/beta/ack &&
    id=$(cat unconfirmed.id) &&
    test_absent 10 "test \"\$(sent_state alpha $later)\" = acked" \
        "test \"\$(sent_state alpha $id)\" != unconfirmed || grep -q \"lost with the broker\" beta/leads/beta/inbox beta/leads/beta/history" &&
    detail_of alpha $id | grep -q "may or may not be in the mailbox"
'

test_expect_success 'unconfirmed lasts across a restart of alpha too' '
    unmount_fleet alpha &&
    mount_fleet alpha peers=beta message_ttl=1h send_timeout=2s &&
    test "$(sent_state alpha $(cat unconfirmed.id))" = unconfirmed
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
