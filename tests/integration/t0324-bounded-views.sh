#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bounded views (issue 43 item 6): an open reader of beta's inbox that
# never reads does not make beta's fleetfs keep every line that arrives
# after it opened. 100 messages of about 60 KB each arrive (6 MB; beta
# acks them as they come, so the mailbox holds few at a time) while one
# reader holds the inbox open and reads nothing; then it reads: it gets at
# most 4 MiB of message lines (the stated cap of what a view keeps unread)
# and one line {"fleetfs":"view-overflow","dropped":N,...} where N is
# exactly the number it missed; nothing is lost from the mailbox (beta's
# history has all 100, alpha's sent says acked for all). On 8dc6d57 the
# reader got all 100 lines (6 MB kept for it) and no such line.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

BODY=$(head -c 60000 /dev/zero | tr '\0' 'x')

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta inject=none &&
    mount_fleet beta peers=alpha inject=none
'

test_expect_success 'a reader that never reads: at most 4 MiB kept for it, then one line saying how many it missed' '
    exec 3<beta/leads/beta/inbox &&
    for b in 0 1 2 3 4; do
        for i in $(seq 1 20); do
            printf "%s %s\n" "m$b-$i" "$BODY" >body &&
            dd if=body of=alpha/peers/beta/send bs=1M status=none || return 1
        done &&
        wait_for 20 "test \"\$(sed -n \"s/^held: //p\" beta/leads/beta/status)\" = 20" &&
        echo all >beta/leads/beta/ack || return 1
    done &&
    cat <&3 >idle.out && exec 3<&- &&
    grep -c "\"msgId\"" idle.out >shown &&
    jq -r "select(.fleetfs == \"view-overflow\") | .dropped" idle.out >dropped &&
    test "$(wc -l <dropped)" = 1 &&
    test $(( $(cat shown) + $(cat dropped) )) = 100 &&
    test "$(cat dropped)" -gt 0 &&
    test "$(grep "\"msgId\"" idle.out | wc -c)" -le $((4 * 1024 * 1024)) &&
    test "$(jq -r "select(.consumed == \"acked\") | .msgId" beta/leads/beta/history | wc -l)" = 100 &&
    wait_for 20 "test \$(jq -r \"select(.state == \\\"acked\\\") | .msgId\" alpha/leads/alpha/sent | wc -l) = 100"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
