#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Honest published-unread (issue 16 item 2.9): it means nobody reads the
# peer's mailbox (the probe saw 0 consumers).  A mailbox that has a reader
# which sends no heartbeat — another implementation of doc/protocol.md,
# here tests/tools/rawpub --consume — gets `published`, with the missing
# heartbeat in detail; the reader's own output proves it read the message.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0395
new_vhost $FLEET_VHOST
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub
URI=$(broker_uri $FLEET_VHOST)

last() { tail -n1 alpha/leads/alpha/sent; }

test_expect_success 'nobody reads delta'\''s mailbox: published-unread, no consumer' '
    mount_fleet alpha peers=delta heartbeat=1s &&
    echo "anyone there?" >alpha/peers/delta/send &&
    last | jq -e ".state == \"published-unread\"" &&
    last | jq -r .detail | grep -q "^no consumer"
'

test_expect_success 'a flood to a mailbox nobody reads: sent records every message, the log says so once a minute' '
    for i in $(seq 1 20); do echo "unread $i" >alpha/peers/delta/send || exit 1; done &&
    test "$(jq -c "select(.to == \"delta\" and .state == \"published-unread\")" alpha/leads/alpha/sent | wc -l)" = 21 &&
    test "$(grep -c "to delta: published-unread" alpha.log)" = 1 &&
    test "$(grep -c "more sends to delta are published-unread: one line a minute" alpha.log)" = 1
'

# one more message to delta; true once its entry says published and names
# the missing heartbeat (alpha's presence calls a peer away only once its
# own roster link has been up for three intervals: until then it says
# nothing either way)
published_to_a_silent_reader() {
    echo "read by something else" >alpha/peers/delta/send && last >last.json &&
    jq -e '.state == "published" and (.detail | test("heartbeat"))' last.json >/dev/null
}

test_expect_success 'a reader without heartbeats: published, the missing heartbeat in detail' '
    { "$RAWPUB" "$URI" lead.delta.inbox --consume 1000 >reader.out 2>reader.err & echo $! >reader.pid; } &&
    at_exit "kill \$(cat $TEST_DIR/reader.pid) 2>/dev/null" &&
    wait_for 10 "rmqctl list_queues -q -p $FLEET_VHOST name consumers | grep -q \"^lead.delta.inbox[[:space:]]*1\$\"" &&
    # a send judges by a probe up to 1 s old: once the status alpha shows has
    # seen the reader, no send may call the mailbox unread any more
    wait_for 10 "grep -q \"^consumers: 1\$\" alpha/peers/delta/status" &&
    wait_for 20 published_to_a_silent_reader &&
    jq -r .detail last.json | grep -q "^the mailbox has a reader, but peer not live (no heartbeat heard from it)" &&
    ! grep -q published-unread <(sed 1,21d alpha/leads/alpha/sent) &&
    id=$(jq -r .msgId last.json) &&
    wait_for 10 "grep -q $id reader.out" &&
    grep -q "anyone there?" reader.out
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha
'

test_done
