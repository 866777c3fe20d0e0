#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prefetch bounds what a mount holds: with 500 messages waiting and
# prefetch 64, the inbox shows 64, the status shows the rest as ready in the
# broker, and acking brings the next ones in.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0500
new_vhost $FLEET_VHOST

test_expect_success '500 messages wait for beta, sent on one open fd' '
    mount_fleet alpha peers=beta &&
    { for i in $(seq 1 500); do echo "message $i"; done; } >alpha/peers/beta/send &&
    test $(wc -l <alpha/leads/alpha/sent) = 500 &&
    n=$(broker_count lead.beta.inbox) && test "$n" = 500 &&
    jq -r .state alpha/leads/alpha/sent | sort -u >states &&
    echo published-unread >want && test_cmp want states
'

test_expect_success 'beta mounts with prefetch 64: the inbox holds 64, the broker the rest' '
    mount_fleet beta peers=alpha prefetch=64 &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 64" &&
    test_absent 5 "grep -q \"^messages: 436$\" beta/leads/beta/status" \
        "test \$(wc -l <beta/leads/beta/inbox) != 64" &&
    grep -q "^held: 64$" beta/leads/beta/status &&
    grep -q "^consumers: 1$" beta/leads/beta/status &&
    head -n1 beta/leads/beta/inbox | jq -r .body >first && echo "message 1" >want && test_cmp want first
'

test_expect_success 'acking one brings exactly one more in' '
    head -n1 beta/leads/beta/inbox | jq -r .msgId >beta/leads/beta/ack &&
    wait_for 5 "grep -q \"^messages: 435$\" beta/leads/beta/status" &&
    wait_for 5 "test \$(wc -l <beta/leads/beta/inbox) = 64" &&
    tail -n1 beta/leads/beta/inbox | jq -r .body >last && echo "message 65" >want && test_cmp want last
'

test_expect_success 'ack all brings the next 64, in order' '
    echo all >beta/leads/beta/ack &&
    wait_for 10 "test \$(wc -l <beta/leads/beta/inbox) = 64" &&
    wait_for 5 "grep -q \"^messages: 371$\" beta/leads/beta/status" &&
    head -n1 beta/leads/beta/inbox | jq -r .body >first && echo "message 66" >want && test_cmp want first
'

test_expect_success 'draining the mailbox with ack all, round after round' '
    for round in $(seq 1 30); do
        if test -s beta/leads/beta/inbox; then
            echo all >beta/leads/beta/ack || exit 1
        elif grep -q "^messages: 0$" beta/leads/beta/status; then
            break
        fi
        sleep 0.3
    done &&
    test ! -s beta/leads/beta/inbox &&
    wait_for 10 "test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    test $(wc -l <beta/leads/beta/history) = 500 &&
    grep -q "^acked: 500$" beta/status &&
    jq -r .body beta/leads/beta/history >bodies &&
    seq 1 500 | sed "s/^/message /" >want && test_cmp want bodies
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
