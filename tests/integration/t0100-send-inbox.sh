#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two mounts, alpha and beta, on one broker: the tree, sending both ways,
# inbox lines, ack of one and of all, presence of consumers, mail that
# waits while a lead is down.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0100
new_vhost $FLEET_VHOST

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta:gamma &&
    mount_fleet beta peers=alpha
'

test_expect_success 'the tree has what SPEC section 2 lists' '
    ls alpha >top && printf "README\nagents\ncensus\nclaims\ngroups\nhosts\nleads\npeers\nroster\nself\nstatus\n" >want && test_cmp want top &&
    test "$(readlink alpha/self)" = leads/alpha &&
    ls alpha/self/ >lead && printf "ack\nhistory\ninbox\nreply\nresend\nsent\nstatus\nsubmitted\n" >want && test_cmp want lead &&
    ls alpha/peers >peers && printf "beta\ngamma\n" >want && test_cmp want peers &&
    ls alpha/peers/beta >pf && printf "ask\nask.json\nreply\nsend\nsend.json\nstatus\n" >want && test_cmp want pf &&
    grep -q "^coord_id: alpha$" alpha/status &&
    grep -q "^broker: connected$" alpha/status &&
    grep -q "peers/<id>/send" alpha/README
'

test_expect_success 'sizes are real: wc -c agrees with stat' '
    test "$(stat -c %s alpha/status)" -gt 0 &&
    test "$(stat -c %s alpha/README)" = "$(cat alpha/README | wc -c)"
'

test_expect_success 'unknown names are ENOENT and never escape the tree' '
    test_must_fail cat alpha/peers/nobody/status 2>err && grep -q "No such file" err &&
    test_must_fail ls alpha/peers/../../etc 2>/dev/null &&
    test_must_fail cat alpha/leads/beta/inbox 2>/dev/null &&
    test_must_fail cat "alpha/peers/Beta/status" 2>/dev/null
'

test_expect_success 'send alpha -> beta: the inbox line carries from, to, msgId and body' '
    echo "I take the parser, you take codegen" >alpha/peers/beta/send &&
    wait_for 5 "test -s beta/leads/beta/inbox" &&
    cat beta/leads/beta/inbox >inbox &&
    test $(wc -l <inbox) = 1 &&
    test "$(jq -r .from inbox)" = alpha &&
    test "$(jq -r .to inbox)" = beta &&
    test "$(jq -r .body inbox)" = "I take the parser, you take codegen" &&
    jq -r .msgId inbox | grep -qE "^[0-9a-f]{32}$" &&
    test "$(jq -r .redelivered inbox)" = false &&
    jq -e ".sentAt and .expiresAt and .receivedAt" inbox >/dev/null
'

test_expect_success 'the sender sees it published in sent, with the same msgId' '
    jq -r .msgId beta/leads/beta/inbox >id &&
    jq -r "select(.msgId == \"$(cat id)\") | .state" alpha/leads/alpha/sent >st &&
    test "$(cat st)" = published &&
    grep -q "^sent: 1$" alpha/status
'

# one write(2) is one message: bash's builtin printf writes line by line,
# coreutils' printf (like echo and cat) writes once
test_expect_success 'send beta -> alpha, with >> as well as >' '
    echo one >>beta/peers/alpha/send &&
    /usr/bin/printf "two\n\n" >beta/peers/alpha/send &&
    wait_for 5 "test \$(wc -l <alpha/leads/alpha/inbox) = 2" &&
    jq -r .body alpha/leads/alpha/inbox >bodies &&
    printf "one\ntwo\n\n" >want && test_cmp want bodies
'

test_expect_success 'only the one trailing newline of echo is dropped' '
    /usr/bin/printf "a\nb" >beta/peers/alpha/send &&
    wait_for 5 "test \$(wc -l <alpha/leads/alpha/inbox) = 3" &&
    test "$(tail -n1 alpha/leads/alpha/inbox | jq .body)" = "\"a\\nb\""
'

test_expect_success 'ack of one msgId removes it, and the broker agrees' '
    echo more >alpha/peers/beta/send &&
    wait_for 5 "test \$(wc -l <beta/leads/beta/inbox) = 2" &&
    n=$(broker_count lead.beta.inbox) && test "$n" = 2 &&
    head -n1 beta/leads/beta/inbox | jq -r .msgId >first &&
    cat first >beta/leads/beta/ack &&
    test $(wc -l <beta/leads/beta/inbox) = 1 &&
    ! grep -q "$(cat first)" beta/leads/beta/inbox &&
    wait_for 5 "test \"\$(broker_count lead.beta.inbox)\" = 1" &&
    grep -q "$(cat first)" beta/leads/beta/history &&
    grep "$(cat first)" beta/leads/beta/history | jq -e ".consumed == \"acked\"" >/dev/null
'

test_expect_success 'acking the same msgId again is ENOENT; garbage is EINVAL' '
    test_must_fail bash -c "cat first >beta/leads/beta/ack" 2>err &&
    grep -q "No such file" err &&
    test_must_fail bash -c "echo not-an-id >beta/leads/beta/ack" 2>err &&
    grep -q "Invalid argument" err &&
    test $(wc -l <beta/leads/beta/inbox) = 1
'

test_expect_success 'ack all empties the inbox and the mailbox' '
    echo all >alpha/leads/alpha/ack &&
    test ! -s alpha/leads/alpha/inbox &&
    wait_for 5 "test \"\$(broker_count lead.alpha.inbox)\" = 0" &&
    grep -q "^held: 0$" alpha/leads/alpha/status &&
    echo all >beta/leads/beta/ack &&
    wait_for 5 "test \"\$(broker_count lead.beta.inbox)\" = 0"
'

test_expect_success 'a reading peer shows consumers 1 and state reading' '
    cat alpha/peers/beta/status >st &&
    grep -q "^mailbox: present$" st &&
    grep -q "^consumers: 1$" st &&
    grep -q "^state: reading$" st
'

test_expect_success 'an absent mailbox shows as absent' '
    cat alpha/peers/gamma/status >st &&
    grep -q "^mailbox: absent$" st &&
    grep -q "^state: absent$" st
'

test_expect_success 'beta unmounted: consumers 0, not-reading; sends are published-unread' '
    unmount_fleet beta &&
    wait_for 5 "grep -q \"^consumers: 0$\" alpha/peers/beta/status" &&
    grep -q "^state: not-reading$" alpha/peers/beta/status &&
    echo "while you were out 1" >alpha/peers/beta/send &&
    echo "while you were out 2" >alpha/peers/beta/send &&
    tail -n1 alpha/leads/alpha/sent | jq -e ".state == \"published-unread\"" >/dev/null &&
    wait_for 5 "grep -q \"^messages: 2$\" alpha/peers/beta/status"
'

test_expect_success 'beta remounted: what was sent meanwhile is in its inbox, in order' '
    mount_fleet beta peers=alpha &&
    wait_for 5 "test \$(wc -l <beta/leads/beta/inbox) = 2" &&
    jq -r .body beta/leads/beta/inbox >bodies &&
    printf "while you were out 1\nwhile you were out 2\n" >want && test_cmp want bodies
'

test_expect_success 'sending to a configured peer that never started creates its mailbox: it waits' '
    echo "for later" >alpha/peers/gamma/send &&
    grep -q "^mailbox: present$" alpha/peers/gamma/status &&
    n=$(broker_count lead.gamma.inbox) && test "$n" = 1
'

test_expect_success 'files the tree does not have cannot be created, removed or renamed' '
    test_must_fail sh -c "echo x >alpha/peers/beta/other" 2>/dev/null &&
    test_must_fail rm alpha/status 2>/dev/null &&
    test_must_fail mkdir alpha/peers/delta 2>/dev/null &&
    test_must_fail sh -c "echo x >alpha/status" 2>/dev/null &&
    test_must_fail cat alpha/peers/beta/send 2>/dev/null
'

test_expect_success 'unmount leaves no daemon behind' '
    unmount_fleet alpha && unmount_fleet beta &&
    ! mountpoint -q alpha && ! mountpoint -q beta
'

test_done
