#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Agent mailboxes are collected by the broker (SPEC section 10, doc/protocol.md
# "Collecting agent mailboxes"): an agent mailbox is declared with x-expires
# = agent_expires, and a mount whose agent_expires is not longer than
# message_ttl + expire_grace is refused. The upgrade path: a mailbox made
# before that (the old arguments, no x-expires) and holding messages is
# served as it is, every message reaches its agent, and the policy
# `scripts/broker agent-expires` sets collects it. A mailbox served for
# longer than agent_expires is still there when its reader goes (LavinMQ
# 1.0.1 would delete it at once: fleetfs renews its idle clock); once it has
# had no reader for agent_expires the broker deletes it, a send to it is
# ENXIO and agents/ of another host stops listing it. A lead's mailbox is not
# collected. Lifetimes are tiny here (message_ttl 12s, agent_expires 14s).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1050
new_vhost $FLEET_VHOST
TRY=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/amqptry
[[ ${FLEETFS_BUILD:-} == /* ]] && TRY=$FLEETFS_BUILD/tools/amqptry
URI=${FLEET_BROKER_URI%/*}/$FLEET_VHOST
LIFE="message_ttl=12s,expire_grace=1s"
EXP="$LIFE,agent_expires=14s"

# args QUEUE: the queue's arguments as the broker lists them ("" for none)
args() { rmqctl list_queues -q -p $FLEET_VHOST name arguments | awk -v q="$1" '$1 == q { $1 = ""; print }'; }
present() { broker_queues | awk '{ print $1 }' | grep -qx "$1"; }

test_expect_success 'agent_expires not longer than message_ttl + expire_grace: the mount is refused, saying the rule' '
    mkdir -p bad &&
    test_must_fail "$FLEETFS" bad -f -o coord_id=bad,state_dir=$TEST_DIR/state/bad,insecure,vhost=$FLEET_VHOST,$LIFE,agent_expires=13s </dev/null >out 2>&1 &&
    cat out &&
    grep -q "agent_expires: 13000 ms is not longer than message_ttl + expire_grace (13000 ms)" out &&
    ! mountpoint -q bad
'

test_expect_success 'beta mounts; a mailbox of w2@alpha made before agent_expires (no x-expires) holds 3 messages from wb@beta' '
    mount_fleet beta inject=none agents=wb $EXP &&
    "$TRY" "$URI" declare-mailbox agent.w2@alpha.inbox 12000 &&
    "$TRY" "$URI" bind agent.w2@alpha.inbox fleet.msg w2@alpha &&
    for i in 1 2 3; do echo "old $i" >beta/agents/wb@beta/to/w2@alpha || return 1; done &&
    test "$(broker_count agent.w2@alpha.inbox)" = 3 &&
    test -z "$(args agent.w2@alpha.inbox | grep x-expires)"
'

test_expect_success 'the policy scripts/broker agent-expires sets: refused below the rule, set at 14s' '
    test_must_fail "$FLEET_ROOT/scripts/broker" agent-expires 13s --dir "$BROKER_DIR" --vhost $FLEET_VHOST -o $LIFE 2>err &&
    grep -q "not longer than message_ttl + expire_grace (13000 ms)" err &&
    "$FLEET_ROOT/scripts/broker" agent-expires 14s --dir "$BROKER_DIR" --vhost $FLEET_VHOST -o $LIFE &&
    rmqctl list_policies -p $FLEET_VHOST >pol && cat pol &&
    grep fleet-agent-expires pol | grep -q "\"expires\":14000"
'

test_expect_success 'alpha (agents w1, w2) mounts: w1 made with x-expires, the old w2 served as it is, its 3 messages delivered' '
    mount_fleet alpha inject=none agents=w1:w2 $EXP &&
    wait_for 15 "test \$(wc -l <alpha/agents/w2@alpha/inbox) = 3" &&
    jq -r .body alpha/agents/w2@alpha/inbox >got && printf "old 1\nold 2\nold 3\n" >want && test_cmp want got &&
    args agent.w1@alpha.inbox | grep -q "x-expires.*14000" &&
    test -z "$(args agent.w2@alpha.inbox | grep x-expires)" &&
    test -z "$(args lead.alpha.inbox | grep x-expires)" &&
    grep -q "agent.w2@alpha.inbox was made without x-expires" alpha.log &&
    msgids alpha/agents/w2@alpha/inbox >ids && cat ids >alpha/agents/w2@alpha/ack &&
    wait_for 10 "test \"\$(broker_count agent.w2@alpha.inbox)\" = 0" &&
    wait_for 20 "test -d beta/agents/w1@alpha && test -d beta/agents/w2@alpha"
'

test_expect_success 'served for longer than agent_expires, the mailboxes outlive their reader: a send after alpha is gone is held' '
    sleep 16 &&
    unmount_fleet alpha &&
    echo "after alpha left" >beta/agents/wb@beta/to/w1@alpha &&
    test "$(broker_count agent.w1@alpha.inbox)" = 1 &&
    present agent.w2@alpha.inbox
'

test_expect_success 'with no reader for agent_expires both are collected (argument and policy); the lead mailbox stays' '
    wait_for 40 "! present agent.w1@alpha.inbox && ! present agent.w2@alpha.inbox" &&
    present lead.alpha.inbox && present lead.beta.inbox && present agent.wb@beta.inbox
'

test_expect_success 'a send to a collected mailbox is ENXIO; beta'"'"'s agents/ no longer lists alpha'"'"'s agents' '
    test_must_fail bash -c "echo late >beta/agents/wb@beta/to/w1@alpha" 2>err &&
    grep -q "No such device or address" err &&
    wait_for 20 "! ls beta/agents | grep -q @alpha" &&
    ls beta/agents >got && echo wb@beta >want && test_cmp want got
'

test_expect_success 'agent_expires changed on beta: its agent mailbox is refused (406, twice), the log says which option' '
    unmount_fleet beta &&
    mount_fleet beta inject=none agents=wb $LIFE,agent_expires=20s &&
    wait_for 15 "grep -q \"configuration mismatch on agent.wb@beta.inbox.*and the agent_expires this mailbox was made with\" beta.log" &&
    test -z "$(rmqctl list_consumers -q -p $FLEET_VHOST queue_name | grep -x agent.wb@beta.inbox)" &&
    args agent.wb@beta.inbox | grep -q "x-expires.*14000"
'

test_done
