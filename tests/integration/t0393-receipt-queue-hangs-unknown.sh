#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A receipt queue that stops answering before alpha's publishing connection
# knows it (alpha never sent it a receipt since connecting). The publish
# path used to probe it with a passive declare first, which never answered:
# the publishing connection's thread blocked for RPC_TIMEOUT_MS, then
# dropped the connection ("publisher: connection lost: request timed out"),
# again on every retry after each reconnect, and gamma's receipts and
# alpha's own sends to gamma failed meanwhile (found by a review of
# 54bd127; failed on 7cf5df6). A receipt is now published without asking
# first; its queue is probed (and made) only after a receipt to it came back
# unrouted. Expected: beta's hang delays beta's receipts only.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0393
new_vhost $FLEET_VHOST

test_expect_success 'gamma is known on alpha'\''s publishing connection, beta is not' '
    mount_fleet alpha peers=beta:gamma inject=none send_timeout=30s &&
    mount_fleet beta peers=alpha &&
    mount_fleet gamma peers=alpha &&
    echo "g1" >gamma/peers/alpha/send && last_sent_id gamma >g1.id &&
    wait_for 10 "test \$(wc -l <alpha/leads/alpha/inbox) = 1" &&
    cat g1.id >alpha/leads/alpha/ack &&
    wait_for 10 "test \"\$(sent_state gamma $(cat g1.id))\" = acked"
'

test_expect_success 'lead.beta.receipts hangs: gamma'\''s receipt and alpha'\''s sends go on' '
    echo "b1" >beta/peers/alpha/send && last_sent_id beta >b1.id &&
    echo "g2" >gamma/peers/alpha/send && last_sent_id gamma >g2.id &&
    wait_for 10 "test \$(wc -l <alpha/leads/alpha/inbox) = 2" &&
    queue_process suspend lead.beta.receipts &&
    at_exit "queue_process resume lead.beta.receipts" &&
    cat b1.id >alpha/leads/alpha/ack &&
    sleep 1 &&
    cat g2.id >alpha/leads/alpha/ack &&
    wait_for 15 "test \"\$(sent_state gamma $(cat g2.id))\" = acked" &&
    for i in 1 2 3 4 5 6 7 8 9 10; do
        echo "a$i" >alpha/peers/gamma/send || return 1
        sleep 1
    done &&
    ! grep "publisher: connection lost" alpha.log
'

test_expect_success 'the queue answers again; unmount cleanly' '
    queue_process resume lead.beta.receipts &&
    wait_for 30 "test \"\$(sent_state beta $(cat b1.id))\" = acked" &&
    n=$(broker_count fleet.dlq) && test "$n" = 0 &&
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
