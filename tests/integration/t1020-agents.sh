#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Agents across hosts (SPEC section 10): three hosts in their own network
# namespaces (tests/netns.sh), each a lead and two agents typed into their
# own panes of the host's own fake herdr. Every entity sends to every
# entity on another host, as itself; broadcasts to all and to a group; the
# refusals. What counts is what each host's fake herdr was asked to type
# (its prompt log: pane and text) and what the broker holds, never what
# fleetfs says it did.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: network namespaces; t1025 runs the agents paths on one host under ASan" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/netns.sh"
netns_require
netns_setup || { echo "# netns_setup failed" >&2; exit 1; }
FLEET_VHOST=t1020
new_vhost $FLEET_VHOST
FAKE_HERDR=$FLEET_ROOT/${FLEETFS_BUILD:-build}/fake-herdr
RAWPUB=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub

HOSTS="alpha beta gamma"
others() { for h in $HOSTS; do [[ $h == "$1" ]] || echo "$h"; done; }
# the entities of a host: its lead and its two agents
entities() { echo "$1" "w1@$1" "w2@$1"; }
# each host's fake herdr: a pane per entity, named like it (agent name for
# an agent), idle, going back to idle 1.5 s after each prompt (long enough
# for fleetfs to see the turn start: confirmed)
herdr_up() {
  local h=$1 n
  for n in "$h" w1 w2; do
    jq -cn --arg n "$n" --arg h "$h" \
      '{pane_id: ("w1:" + $h + "-" + $n), workspace_id: "w1", tab_id: "w1:t1",
        agent: "claude", name: $n, agent_status: "idle"}'
  done | jq -cs '{panes: ., after_prompt_status: "working", busy_ms: 1500}' >"$TEST_DIR/$h.herdr.json" ||
    return 1
  # started on its own, so that $! is the fake herdr itself (an `a && b &`
  # puts the whole list in a subshell, and killing that left it running)
  "$FAKE_HERDR" --socket "$TEST_DIR/$h.herdr.sock" --state "$TEST_DIR/$h.herdr.json" \
    --log "$TEST_DIR/$h.prompts" </dev/null >>"$TEST_DIR/$h.fake-herdr.out" 2>&1 &
  echo $! >"$TEST_DIR/.harness/pid.herdr.$h"
  test_log_on_failure "$TEST_DIR/$h.fake-herdr.out"
  at_exit "kill \$(cat $TEST_DIR/.harness/pid.herdr.$h 2>/dev/null) 2>/dev/null"
  wait_for 5 "test -S '$TEST_DIR/$h.herdr.sock'"
}
# typed H PANE: the texts host H's fake herdr typed into PANE, one per line (header only)
typed() { [[ -f $TEST_DIR/$1.prompts ]] && jq -r --arg p "w1:$1-$2" 'select(.target == $p) | .text | split("\n")[0]' "$TEST_DIR/$1.prompts" || true; }
ntyped() { typed "$@" | grep -c . || true; }
# the pane name of an entity on its host
pane_of() { case $1 in *@*) echo "${1%@*}" ;; *) echo "$1" ;; esac; }
host_of() { case $1 in *@*) echo "${1#*@}" ;; *) echo "$1" ;; esac; }
# where entity E of host H sends to T: a lead writes peers/<lead> or
# agents/<gid>/send; an agent writes agents/<its gid>/to/<T>
send_path() {
  local e=$1 t=$2 h
  h=$(host_of "$e")
  case $e in
    *@*) echo "$h/agents/$e/to/$t" ;;
    *) case $t in *@*) echo "$h/agents/$t/send" ;; *) echo "$h/peers/$t/send" ;; esac ;;
  esac
}
sent_of() {
  local e=$1 h
  h=$(host_of "$e")
  case $e in *@*) echo "$h/agents/$e/sent" ;; *) echo "$h/leads/$h/sent" ;; esac
}

test_expect_success 'three hosts, each a lead and two agents (w1, w2), each typed into by its own fake herdr' '
    netns_host alpha && netns_host beta && netns_host gamma &&
    for h in $HOSTS; do herdr_up $h || exit 1; done &&
    HERDR_SOCKET_PATH=$TEST_DIR/alpha.herdr.sock host_mount alpha peers=beta:gamma inject=herdr agents=w1:w2 &&
    HERDR_SOCKET_PATH=$TEST_DIR/beta.herdr.sock host_mount beta peers=alpha:gamma inject=herdr agents=w1:w2 groups=red &&
    HERDR_SOCKET_PATH=$TEST_DIR/gamma.herdr.sock host_mount gamma peers=alpha:beta inject=herdr agents=w1:w2 groups=blue &&
    for h in $HOSTS; do
        wait_for 10 "grep -q \"^broker: connected$\" $h/status" || exit 1
    done &&
    for h in $HOSTS; do
        for g in w1 w2; do
            wait_for 10 "n=\$(rmqctl list_queues -q -p t1020 name consumers | awk -v q=agent.$g@$h.inbox '\''\$1 == q {print \$2}'\'') && test \"\$n\" = 1" || exit 1
        done
    done
'

test_expect_success 'agents/ lists every agent of the fleet once presence has heard them; groups/ every group' '
    for h in $HOSTS; do
        for o in $HOSTS; do
            wait_for 20 "test -d $h/agents/w1@$o && test -d $h/agents/w2@$o" || exit 1
        done &&
        ls $h/agents >got &&
        printf "%s\n" w1@alpha w1@beta w1@gamma w2@alpha w2@beta w2@gamma >want &&
        test_cmp want got &&
        ls $h/groups >got && printf "%s\n" all blue red >want && test_cmp want got || exit 1
    done &&
    ls alpha/agents/w1@alpha >home && printf "%s\n" ack ask ask.json claims history inbox reply resend send send.json sent status submitted to >want && sort -o home home && test_cmp want home &&
    ls alpha/agents/w1@beta >remote && printf "%s\n" ask ask.json send send.json status >want && sort -o remote remote && test_cmp want remote &&
    cat alpha/groups/red/members >got && printf "%s\n" beta w1@beta w2@beta >want && test_cmp want got
'

test_expect_success 'every entity sends to every entity on another host, as itself: each typed once, in the right pane' '
    for e in $(for h in $HOSTS; do entities $h; done); do
        for o in $(others $(host_of $e)); do
            for t in $(entities $o); do
                echo "from $e to $t" >$(send_path $e $t) || { echo "send $e -> $t failed"; exit 1; }
            done
        done
    done &&
    for h in $HOSTS; do
        for t in $(entities $h); do
            wait_for 30 "test \$(ntyped $h $(pane_of $t)) -ge 6" || { echo "$t got:"; typed $h $(pane_of $t); exit 1; }
        done
    done &&
    sleep 1 &&
    for h in $HOSTS; do
        for t in $(entities $h); do
            test $(ntyped $h $(pane_of $t)) = 6 || { echo "$t typed more than once:"; typed $h $(pane_of $t); exit 1; }
            typed $h $(pane_of $t) | sed "s/^\[fleet message from \([^,]*\),.*/\1/" | sort >got &&
            for o in $(others $h); do entities $o; done | tr " " "\n" | sort >want &&
            test_cmp want got || { echo "senders typed into $t"; exit 1; }
        done
    done &&
    jq -r "select(.target == \"w1:beta-w2\") | .text" $TEST_DIR/beta.prompts | grep -q "^from w1@gamma to w2@beta$"
'

test_expect_success 'receipts reach the right sender entry: every sent entry of every entity reaches confirmed' '
    for e in $(for h in $HOSTS; do entities $h; done); do
        f=$(sent_of $e) &&
        wait_for 20 "test \$(jq -r .state $f | sort -u) = confirmed" || { echo "$e:"; cat $f; exit 1; }
        test $(wc -l <$f) = 6 || exit 1
    done
'

test_expect_success 'the typed header names the agent'"'"'s own reply path; a reply chain agent -> agent -> lead' '
    id=$(jq -r "select(.to == \"w2@beta\") | .msgId" alpha/agents/w1@alpha/sent) &&
    typed beta w2 | grep -F "msgId $id" | grep -qF "> $TEST_DIR/beta/agents/w2@beta/reply/$id]" &&
    echo "w2 answers w1" >beta/agents/w2@beta/reply/$id &&
    wait_for 10 "typed alpha w1 | grep -q \"from w2@beta, msgId [0-9a-f]*, in reply to $id\"" &&
    id2=$(jq -r "select(.to == \"w1@alpha\") | .msgId" beta/agents/w2@beta/sent | tail -n1) &&
    wait_for 10 "grep -q $id2 alpha/agents/w1@alpha/history" &&
    n=$(typed gamma gamma | grep -c "from w1@alpha") &&
    echo "w1 passes it on" >alpha/agents/w1@alpha/to/gamma &&
    wait_for 10 "test \$(typed gamma gamma | grep -c \"from w1@alpha\") = $((n + 1))" &&
    id3=$(jq -r "select(.to == \"gamma\") | .msgId" alpha/agents/w1@alpha/sent | tail -n1) &&
    wait_for 10 "test \"\$(jq -r \"select(.msgId == \\\"$id3\\\") | .state\" alpha/agents/w1@alpha/sent)\" = confirmed"'

test_expect_success 'a broadcast to all: one sent entry, one copy per member on the other hosts, none for the sender'"'"'s own' '
    for h in $HOSTS; do for t in $(entities $h); do echo "$(ntyped $h $(pane_of $t))" >before.$t; done; done &&
    echo "to everyone" >alpha/groups/all/send &&
    id=$(jq -r "select(.to == \"group:all\") | .msgId" alpha/leads/alpha/sent) &&
    test $(echo "$id" | wc -l) = 1 &&
    for h in beta gamma; do
        for t in $(entities $h); do
            wait_for 15 "test \$(ntyped $h $(pane_of $t)) = \$((\$(cat before.$t) + 1))" || exit 1
        done
    done &&
    sleep 1 &&
    for t in $(entities alpha); do test $(ntyped alpha $(pane_of $t)) = $(cat before.$t) || exit 1; done &&
    wait_for 20 "jq -e \"select(.msgId == \\\"$id\\\") | .recipients | length == 6 and all(.[]; . == \\\"confirmed\\\")\" alpha/leads/alpha/sent >/dev/null" &&
    jq -r "select(.msgId == \"$id\") | .recipients | keys[]" alpha/leads/alpha/sent >got &&
    printf "%s\n" beta gamma w1@beta w1@gamma w2@beta w2@gamma >want && test_cmp want got &&
    test "$(jq -r "select(.msgId == \"$id\") | .state" alpha/leads/alpha/sent)" = confirmed
'

test_expect_success 'a broadcast to a group from an agent: only the group'"'"'s members get it' '
    for h in $HOSTS; do for t in $(entities $h); do echo "$(ntyped $h $(pane_of $t))" >before.$t; done; done &&
    echo "red team, listen" >gamma/agents/w1@gamma/to/group:red &&
    for t in $(entities beta); do
        wait_for 15 "test \$(ntyped beta $(pane_of $t)) = \$((\$(cat before.$t) + 1))" || exit 1
    done &&
    sleep 1 &&
    for h in alpha gamma; do for t in $(entities $h); do test $(ntyped $h $(pane_of $t)) = $(cat before.$t) || exit 1; done; done &&
    typed beta w1 | tail -n1 | grep -q "from w1@gamma"
'

test_expect_success 'a broadcast to a group without members is ENXIO; nothing is recorded as sent' '
    n=$(wc -l <alpha/agents/w2@alpha/sent) &&
    test_must_fail bash -c "echo nobody >alpha/agents/w2@alpha/to/group:nobody" 2>err &&
    grep -q "No such device or address" err &&
    test $(wc -l <alpha/agents/w2@alpha/sent) = $n
'

test_expect_success 'refused: a forged from (signed by another host), a broadcast copy in a non-member'"'"'s mailbox' '
    p=$(ntyped gamma w1) &&
    d0=$(broker_count fleet.dlq) &&
    "$RAWPUB" "$(host_broker_uri)" agent.w1@gamma.inbox --sign $TEST_DIR/hosts/alpha/key --from w1@beta --to w1@gamma --text forged &&
    "$RAWPUB" "$(host_broker_uri)" agent.w1@gamma.inbox --sign $TEST_DIR/hosts/beta/key --from beta --to group:red --text "not for gamma" &&
    wait_for 10 "d=\$(broker_count fleet.dlq) && test \"\$d\" = \$((d0 + 2))" &&
    grep -q "rejected .* from w1@beta (bad-signature" gamma.log &&
    grep -q "wrong-recipient: a broadcast to .group:red. arrived in the mailbox of w1@gamma" gamma.log &&
    sleep 1 && test $(ntyped gamma w1) = $p
'

test_expect_success 'mkdir registers a local agent at run time; a name on another host is EPERM, a bad one EINVAL' '
    test_must_fail mkdir alpha/agents/w9@beta 2>err && grep -q "Operation not permitted" err &&
    test_must_fail mkdir alpha/agents/W9@alpha 2>err && grep -q "Invalid argument" err &&
    test_must_fail mkdir alpha/agents/w1@alpha 2>err && grep -q "File exists" err &&
    herdr_set_alpha() { jq -c "$1" $TEST_DIR/alpha.herdr.json >$TEST_DIR/alpha.herdr.tmp && mv $TEST_DIR/alpha.herdr.tmp $TEST_DIR/alpha.herdr.json; } &&
    herdr_set_alpha ".panes += [{pane_id: \"w1:alpha-w3\", workspace_id: \"w1\", tab_id: \"w1:t1\", agent: \"claude\", name: \"w3\", agent_status: \"idle\"}]" &&
    mkdir alpha/agents/w3@alpha &&
    test -f alpha/agents/w3@alpha/inbox &&
    wait_for 10 "n=\$(rmqctl list_queues -q -p t1020 name consumers | awk '\''\$1 == \"agent.w3@alpha.inbox\" {print \$2}'\'') && test \"\$n\" = 1" &&
    wait_for 20 "test -d beta/agents/w3@alpha" &&
    echo "welcome w3" >beta/agents/w3@alpha/send &&
    wait_for 10 "typed alpha w3 | grep -q \"from beta\""
'

test_expect_success 'rmdir retires an empty agent: its mailbox goes, a send to it is ENXIO; a busy one is ENOTEMPTY' '
    herdr_set_alpha() { jq -c "$1" $TEST_DIR/alpha.herdr.json >$TEST_DIR/alpha.herdr.tmp && mv $TEST_DIR/alpha.herdr.tmp $TEST_DIR/alpha.herdr.json; } &&
    herdr_set_alpha "(.panes[] | select(.name == \"w3\")) |= (.agent_status = \"working\" | del(.idle_at))" &&
    echo "held while w3 works" >beta/agents/w3@alpha/send &&
    wait_for 10 "test \$(wc -l <alpha/agents/w3@alpha/inbox) = 1" &&
    test_must_fail rmdir alpha/agents/w3@alpha 2>err && grep -q "not empty" err &&
    test -d alpha/agents/w3@alpha &&
    wait_for 10 "echo all >alpha/agents/w3@alpha/ack 2>/dev/null && test ! -s alpha/agents/w3@alpha/inbox" &&
    rmdir alpha/agents/w3@alpha &&
    test_must_fail test -d alpha/agents/w3@alpha/inbox &&
    q=$(broker_queues) && ! grep -q "^agent.w3@alpha.inbox" <<<"$q" &&
    test_must_fail bash -c "echo gone >alpha/agents/w1@alpha/to/w3@alpha" 2>err &&
    grep -q "No such device or address" err &&
    test $(typed alpha w3 | wc -l) = 1
'

test_expect_success 'unmount cleanly' '
    for h in $HOSTS; do unmount_fleet $h || exit 1; done
'

test_done
