#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Agents on one machine (SPEC section 10), the paths of t1020 without
# network namespaces, so that they also run under ASan: two mounts, alpha
# (a lead and agent w1, typed into the fake herdr) and beta (a lead and
# agent w2, inject=none: a script reads and acks), sending as themselves,
# a broadcast, receipts to the right entry, mkdir/rmdir, and bad input.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
broker_use_shared
FLEET_VHOST=t1025
new_vhost $FLEET_VHOST

# the text typed into pane P of the fake herdr, first lines only
typed() { [[ -f $HERDR_LOG ]] && jq -r --arg p "$1" 'select(.target == $p) | .text | split("\n")[0]' "$HERDR_LOG" || true; }

test_expect_success 'alpha (lead + w1, typed) and beta (lead + w2, read by a script) mount' '
    herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"after_prompt_status\":\"working\",\"busy_ms\":1500,\"panes\":[$(pane alpha idle),$(pane w1 idle)]}" &&
    herdr_start &&
    mount_fleet alpha peers=beta inject=herdr agents=w1 &&
    mount_fleet beta peers=alpha inject=none agents=w2 groups=ops &&
    wait_for 20 "test -d alpha/agents/w2@beta && test -d beta/agents/w1@alpha"
'

test_expect_success 'roster: one line per lead, with its groups and its agents, as ls agents shows them' '
    wait_for 10 "test \"\$(jq -r \".agents[]?.gid\" alpha/roster | sort)\" = \"\$(ls alpha/agents)\"" &&
    jq -r .coord_id alpha/roster >got && printf "alpha\nbeta\n" >want && test_cmp want got &&
    jq -r "[.coord_id, (.groups | join(\" \"))] | @tsv" alpha/roster >got &&
    printf "alpha\tall\nbeta\tall ops\n" >want && test_cmp want got &&
    jq -r ".coord_id as \$l | .agents[] | [\$l, .gid, .local, .announced, (.groups | join(\" \")), (.state | type)] | @tsv" alpha/roster >got &&
    printf "alpha\tw1@alpha\ttrue\ttrue\tall\tstring\nbeta\tw2@beta\tfalse\ttrue\tall ops\tstring\n" >want &&
    test_cmp want got &&
    jq -r "select(.self) | .agents[].gid" beta/roster >got && echo w2@beta >want && test_cmp want got
'

test_expect_success 'lead to agent, agent to agent, agent to lead: typed into the right pane, or waiting in the right inbox' '
    echo "to w2" >alpha/agents/w2@beta/send &&
    echo "w1 to w2" >alpha/agents/w1@alpha/to/w2@beta &&
    echo "w2 to w1" >beta/agents/w2@beta/to/w1@alpha &&
    echo "w2 to alpha" >beta/agents/w2@beta/to/alpha &&
    wait_for 10 "test \$(wc -l <beta/agents/w2@beta/inbox) = 2" &&
    jq -r "\"\(.from) \(.body)\"" beta/agents/w2@beta/inbox >got &&
    printf "alpha to w2\nw1@alpha w1 to w2\n" >want && test_cmp want got &&
    test ! -s beta/leads/beta/inbox &&
    wait_for 10 "typed w1:p2w1 | grep -q \"from w2@beta\"" &&
    wait_for 10 "typed w1:p5alpha | grep -q \"from w2@beta\"" &&
    test $(typed w1:p2w1 | wc -l) = 1 && test $(typed w1:p5alpha | wc -l) = 1
'

test_expect_success 'receipts go to the sending entity: w2 acks, alpha and w1 see acked; beta'"'"'s w2 sees confirmed' '
    msgids beta/agents/w2@beta/inbox >ids && cat ids >beta/agents/w2@beta/ack &&
    wait_for 10 "test \"\$(jq -r .state alpha/leads/alpha/sent)\" = acked" &&
    wait_for 10 "test \"\$(jq -r .state alpha/agents/w1@alpha/sent)\" = acked" &&
    wait_for 10 "test \"\$(jq -r .state beta/agents/w2@beta/sent | sort -u)\" = confirmed" &&
    test "$(jq -r .consumed beta/agents/w2@beta/history | sort -u)" = acked
'

test_expect_success 'a broadcast to ops from w1: beta and w2 get one copy each, alpha'"'"'s own entities none' '
    n=$(prompts) &&
    echo "ops: deploy at 5" >alpha/agents/w1@alpha/to/group:ops &&
    wait_for 10 "grep -q \"deploy at 5\" beta/leads/beta/inbox && grep -q \"deploy at 5\" beta/agents/w2@beta/inbox" &&
    sleep 1 && test $(prompts) = $n &&
    test $(grep -c "deploy at 5" beta/agents/w2@beta/inbox) = 1 &&
    jq -e "select(.to == \"group:ops\") | .recipients | keys == [\"beta\", \"w2@beta\"]" alpha/agents/w1@alpha/sent >/dev/null
'

test_expect_success 'bad input: an unknown target, an empty message, a bad gid for mkdir; nothing sent, nothing typed' '
    n=$(prompts) &&
    test_must_fail bash -c "echo x >alpha/agents/w1@alpha/to/nobody@beta" 2>err && grep -q "No such device or address" err &&
    test_must_fail bash -c "echo >alpha/agents/w1@alpha/to/beta" 2>err && grep -q "Invalid argument" err &&
    test_must_fail bash -c "echo x >alpha/agents/w1@alpha/to/UPPER" 2>err &&
    test_must_fail mkdir alpha/agents/x@y@alpha &&
    test_must_fail mkdir alpha/agents/w5@beta &&
    sleep 1 && test $(prompts) = $n
'

test_expect_success 'mkdir and rmdir at run time: registered, reachable, retired; watchers of agents/ and roster wake' '
    { inotifywait -q -t 20 -e create,delete,attrib alpha/agents >ev 2>&1 & } &&
    { inotifywait -q -t 20 -e modify alpha/roster >rev 2>&1 & } &&
    sleep 0.5 &&
    mkdir beta/agents/w3@beta &&
    wait_for 20 "test -d alpha/agents/w3@beta" &&
    wait_for 5 "grep -q \"CREATE,ISDIR w3@beta\" ev && grep -q MODIFY rev" &&
    wait_for 10 "jq -r \"select(.coord_id == \\\"beta\\\") | .agents[].gid\" alpha/roster | grep -qx w3@beta" &&
    echo "hello w3" >alpha/agents/w3@beta/send &&
    wait_for 10 "grep -q \"hello w3\" beta/agents/w3@beta/inbox" &&
    test_must_fail rmdir beta/agents/w3@beta &&
    wait_for 10 "echo all >beta/agents/w3@beta/ack 2>/dev/null && test ! -s beta/agents/w3@beta/inbox" &&
    rmdir beta/agents/w3@beta &&
    wait_for 10 "! jq -r \".agents[]?.gid\" alpha/roster | grep -qx w3@beta" &&
    test_must_fail bash -c "echo again >beta/agents/w2@beta/to/w3@beta" 2>err &&
    grep -q "No such device or address" err
'

test_expect_success 'groups/: beta remounts with agent w4 in qa, never heard before; alpha'"'"'s watchers of groups/ see qa come, members lists w4, and see it go when w4 does' '
    test ! -e alpha/groups/qa &&
    printf "[agent w4]\ngroups = qa\n" >w4.conf &&
    { inotifywait -q -m -e create,delete,attrib alpha/groups >gev 2>&1 & echo $! >gpid; } &&
    at_exit "kill $(cat gpid) 2>/dev/null" &&
    sleep 0.5 &&
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=none agents=w2 groups=ops config=$TEST_DIR/w4.conf &&
    wait_for 20 "grep -q \"CREATE,ISDIR qa\" gev" &&
    wait_for 10 "test \"\$(cat alpha/groups/qa/members)\" = w4@beta" &&
    unmount_fleet beta &&
    mount_fleet beta peers=alpha inject=none agents=w2 groups=ops &&
    wait_for 20 "grep -q \"DELETE,ISDIR qa\" gev" &&
    test ! -e alpha/groups/qa &&
    kill $(cat gpid) &&
    test $(grep -c " qa$" gev) = 2
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
