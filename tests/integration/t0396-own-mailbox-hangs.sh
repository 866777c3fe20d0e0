#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A host's own mailbox does not answer while its fleetfs (re)connects: the
# queue's process is suspended inside the broker, as a stuck queue or a
# quorum queue without a leader would be. fleetfs declared its own queues
# with synchronous calls that RabbitMQ answers from the queue's process:
# after RPC_TIMEOUT_MS (5 s) the consuming connection was dropped, the
# publishing one with it, and both were made again every few seconds for as
# long as the queue stayed stuck. Expected: the stuck mailbox waits alone
# and says so; every connection stays up (the broker's own list), sends go
# out, presence and the other queues are served; once the queue answers it
# is consumed and what waited in it arrives. Counted: the broker's list of
# connections and queue counts, and what the inbox file shows.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0396
new_vhost $FLEET_VHOST

test_expect_success 'beta starts again while its own mailbox does not answer' '
    mount_fleet alpha peers=beta heartbeat=1s inject=none &&
    mount_fleet beta peers=alpha heartbeat=1s inject=none &&
    wait_for 10 "grep -q \"^state: reading\" alpha/peers/beta/status" &&
    unmount_fleet beta &&
    echo "waiting for beta" >alpha/peers/beta/send &&
    n=$(broker_count lead.beta.inbox) && test "$n" = 1 &&
    queue_process suspend lead.beta.inbox &&
    at_exit "queue_process resume lead.beta.inbox" &&
    mount_fleet beta peers=alpha heartbeat=1s inject=none &&
    # every connection of both mounts is up before the list is kept: each
    # mount has four (consuming, publishing, roster, claims: broker/claims.h),
    # and the claims one is counted too, since no connection may be remade
    wait_for 15 "test \$(broker_connections | wc -l) = 8" &&
    broker_connections >before
'

test_expect_success 'for 12 s beta sends to alpha, every write succeeds; no connection is remade' '
    for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
        echo "to alpha $i" >beta/peers/alpha/send || return 1
        sleep 1
    done &&
    wait_for 10 "test \$(grep -c \"to alpha\" alpha/leads/alpha/inbox) = 12" &&
    n=$(broker_count lead.alpha.inbox) && test "$n" = 12 &&
    broker_connections >during &&
    test_cmp before during &&
    ! grep "connection lost" beta.log
'

test_expect_success 'beta says its mailbox does not answer, once; its receipts and presence go on' '
    grep "lead.beta.inbox does not answer" beta/status &&
    test $(grep -c "lead.beta.inbox does not answer" beta.log) = 1 &&
    cat beta/peers/alpha/status &&
    grep -q "^presence: live" beta/peers/alpha/status &&
    grep -q "^presence: live" alpha/peers/beta/status
'

test_expect_success 'the mailbox answers again: beta consumes it, what waited arrives once' '
    queue_process resume lead.beta.inbox &&
    wait_for 15 "grep -q \"waiting for beta\" beta/leads/beta/inbox" &&
    test $(grep -c "waiting for beta" beta/leads/beta/inbox) = 1 &&
    grep -q "lead.beta.inbox answers again" beta.log &&
    ! grep -q "does not answer" beta/status &&
    broker_connections >after &&
    test_cmp before after &&
    ! grep "connection lost" beta.log
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'
test_done
