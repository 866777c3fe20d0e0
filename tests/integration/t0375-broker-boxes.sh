#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The broker layer's mailboxes ("boxes", issue 18; broker/conn.h) against a
# real broker, through tests/tools/boxtry (broker/ linked, driven one
# command at a time): the lead's box 0 and two agent boxes bound to
# fleet.msg; a routed publish reaches exactly its box, a broadcast one copy
# per bound box, no binding is a return (ENXIO); a refusal on one box (a
# second consumer) disturbs no other; after the broker closes the
# connection every box consumes again; removal deletes an empty mailbox,
# keeps one that holds messages (ENOTEMPTY), or unbinds and keeps it; and
# no delivery of a closed channel is ever taken for the reopened one's
# (issue 16, 2.1): every message of a stream is seen exactly once while the
# box's channel is closed under it. What a box got is what boxtry's
# delivery callback logged; what is left is the broker's own count.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
export FLEET_VHOST=t0375
new_vhost $FLEET_VHOST
URI=$(broker_uri $FLEET_VHOST)
BOX=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/boxtry
TRY=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/amqptry
[[ ${FLEETFS_BUILD:-} == /* ]] && BOX=$FLEETFS_BUILD/tools/boxtry && TRY=$FLEETFS_BUILD/tools/amqptry

# start NAME ARGS...: boxtry NAME in the background, commands through the
# fifo NAME.in (held open by a sleeper), answers in NAME.out, deliveries in
# NAME.dlv, its log in NAME.err
start() {
    local n=$1
    shift
    mkfifo "$TEST_DIR/$n.in" &&
    { sleep 600 >"$TEST_DIR/$n.in" & echo $! >"$TEST_DIR/$n.keep"; } &&
    { "$BOX" "$n" "$TEST_DIR/$n.dlv" "$@" <"$TEST_DIR/$n.in" >"$TEST_DIR/$n.out" 2>"$TEST_DIR/$n.err" &
      echo $! >"$TEST_DIR/$n.pid"; } &&
    at_exit "kill \$(cat $TEST_DIR/$n.pid) \$(cat $TEST_DIR/$n.keep) 2>/dev/null; true" &&
    wait_for 10 "test -e $TEST_DIR/$n.out"
}
# ask NAME COMMAND...: a command (or several, joined by ';', run back to
# back) to boxtry NAME; prints the answers, one line each
ask() {
    local n=$1 c k
    shift
    c=$(wc -l <"$TEST_DIR/$n.out")
    k=$(tr -cd ";" <<<"$*" | wc -c)
    echo "$*" >"$TEST_DIR/$n.in" &&
    wait_for 30 "test \$(wc -l <$TEST_DIR/$n.out) -gt $((c + k))" >&2 &&
    sed -n "$((c + 1)),$((c + k + 1))p" "$TEST_DIR/$n.out"
}
# expect NAME ANSWER-PREFIX COMMAND...: the answer starts with ANSWER-PREFIX
expect() {
    local n=$1 want=$2 got
    shift 2
    got=$(ask "$n" "$@") || return 1
    echo "$n: $* -> $got"
    [[ $got == "$want"* ]] || { echo "expected: $want" >&2; return 1; }
}
# bodies NAME BOX: what box BOX of boxtry NAME was delivered, sorted
bodies() { awk -v b="$2" '$1 == b' "$TEST_DIR/$1.dlv" | cut -d" " -f5- | sort; }
epoch_of() { ask "$1" status "$2" | sed -n "s/.*epoch=\([0-9]*\).*/\1/p"; }
queue_row() { rmqctl list_queues -q -p $FLEET_VHOST name messages messages_unacknowledged consumers | awk -v q="$1" '$1 == q { print $2, $3, $4 }'; }
conn_pid() {
    # client_properties as rabbitmqctl prints them (Erlang terms), or as
    # JSON (LavinMQ, scripts/broker-lavinmq)
    rmqctl list_connections -q pid client_properties |
        grep -F -e "{\"connection_name\",\"fleetfs $1@boxtry\"}" \
            -e "\"connection_name\":\"fleetfs $1@boxtry\"" | cut -f1
}

test_expect_success 'box 0 and two agent boxes consume, each bound to fleet.msg with its keys' '
    start alpha -k broadcast.all,broadcast.ops &&
    expect alpha agent.w1@alpha.inbox agentq w1@alpha &&
    expect alpha ok add 1 agent.w1@alpha.inbox fleet.msg w1@alpha broadcast.all broadcast.ops &&
    expect alpha ok add 2 agent.w2@alpha.inbox fleet.msg w2@alpha broadcast.all &&
    for b in 0 1 2; do expect alpha ok wait $b ok 10 || return 1; done &&
    test "$(queue_row agent.w1@alpha.inbox)" = "0 0 1" &&
    test "$(queue_row agent.w2@alpha.inbox)" = "0 0 1" &&
    test "$(queue_row lead.alpha.inbox)" = "0 0 1" &&
    rmqctl list_bindings -q -p $FLEET_VHOST source_name destination_name routing_key | grep "^fleet\.msg" | sort >bindings &&
    cat bindings &&
    test $(wc -l <bindings) = 7 &&
    grep -q "agent.w1@alpha.inbox	w1@alpha" bindings &&
    grep -q "lead.alpha.inbox	broadcast.ops" bindings &&
    for b in 0 1 2; do ask alpha status $b | grep -q "bound=1" || return 1; done
'

test_expect_success 'a routed publish reaches its box only; a broadcast one copy per bound box' '
    expect alpha "ok unread=0" pub fleet.msg w1@alpha agent.w1@alpha.inbox m1 to w1 &&
    expect alpha "ok unread=0" pub fleet.msg w2@alpha agent.w2@alpha.inbox m2 to w2 &&
    expect alpha "ok unread=0" pub fleet.msg broadcast.all - m3 to all &&
    expect alpha "ok unread=0" pub fleet.msg broadcast.ops - m4 to ops &&
    wait_for 10 "test \$(wc -l <alpha.dlv) -ge 7" &&
    printf "%s\n" "to all" "to ops" >want0 && bodies alpha 0 >got0 && test_cmp want0 got0 &&
    printf "%s\n" "to all" "to ops" "to w1" >want1 && bodies alpha 1 >got1 && test_cmp want1 got1 &&
    printf "%s\n" "to all" "to w2" >want2 && bodies alpha 2 >got2 && test_cmp want2 got2 &&
    wait_for 10 "test \"\$(queue_row agent.w1@alpha.inbox)\" = \"0 0 1\"" &&
    test "$(queue_row lead.alpha.inbox)" = "0 0 1"
'

test_expect_success 'no box bound to the key: returned, ENXIO (no-mailbox); unread when nobody reads' '
    expect alpha "no-mailbox unread=0 the broker returned" pub fleet.msg broadcast.none - m5 to nobody &&
    expect alpha "no-mailbox unread=0 the broker returned" pub fleet.msg w9@alpha agent.w9@alpha.inbox m6 to w9 &&
    expect alpha "no-mailbox unread=0 exchange fleet.nosuch does not exist" pub fleet.nosuch k - m7 x &&
    "$TRY" "$URI" declare-mailbox agent.idle@alpha.inbox &&
    "$TRY" "$URI" bind agent.idle@alpha.inbox fleet.msg idle@alpha &&
    expect alpha "ok unread=1" pub fleet.msg idle@alpha agent.idle@alpha.inbox m8 to idle &&
    test "$(queue_row agent.idle@alpha.inbox)" = "1 0 0" &&
    test $(wc -l <alpha.dlv) = 7
'

test_expect_success 'a consume refused on one box disturbs neither the other boxes nor the lead' '
    start intruder &&
    expect intruder ok add 1 agent.w1@alpha.inbox fleet.msg &&
    expect intruder ok add 2 agent.x@intruder.inbox fleet.msg x@intruder &&
    expect intruder ok wait 1 exclusive 10 &&
    ask intruder status 1 | grep "another connection is already the consumer of agent.w1@alpha.inbox" &&
    expect intruder ok wait 2 ok 10 &&
    expect intruder ok wait 0 ok 10 &&
    expect intruder "ok unread=0" pub fleet.msg x@intruder - i1 to x &&
    wait_for 10 "bodies intruder 2 | grep -qx \"to x\"" &&
    expect alpha "ok unread=0" pub fleet.msg w1@alpha - m9 still w1 &&
    wait_for 10 "bodies alpha 1 | grep -qx \"still w1\"" &&
    for b in 0 1 2; do ask alpha status $b | grep -q "^ok " || return 1; done &&
    ! grep -q "connection lost" alpha.err intruder.err &&
    expect intruder bye quit
'

test_expect_success 'the broker closes the connection: every box consumes again on a new epoch' '
    e1=$(epoch_of alpha 1) && e2=$(epoch_of alpha 2) &&
    pid=$(conn_pid alpha) && test -n "$pid" &&
    rmqctl close_connection "$pid" "t0375 closes it" &&
    wait_for 15 "grep -q \"connection lost.*t0375 closes it\" alpha.err" &&
    for b in 0 1 2; do expect alpha ok wait $b ok 15 || return 1; done &&
    test "$(epoch_of alpha 1)" -gt "$e1" && test "$(epoch_of alpha 2)" -gt "$e2" &&
    expect alpha "ok unread=0" pub fleet.msg broadcast.all - m10 again all &&
    wait_for 10 "test \$(grep -c \" again all\$\" alpha.dlv) = 3" &&
    awk "\$5 == \"again\" { print \$1 }" alpha.dlv | sort >boxes && printf "%s\n" 0 1 2 >want && test_cmp want boxes
'

test_expect_success 'remove: a held message -> kept as it was (ENOTEMPTY); acked, empty -> deleted; then ENXIO' '
    expect alpha ok mode 2 hold &&
    expect alpha "ok unread=0" pub fleet.msg w2@alpha - m11 held by w2 &&
    wait_for 10 "bodies alpha 2 | grep -qx \"held by w2\"" &&
    e2=$(epoch_of alpha 2) &&
    expect alpha "not-empty agent.w2@alpha.inbox kept: this box holds 1 message(s) delivered and not acked" remove 2 delete &&
    expect alpha ok wait 2 ok 10 &&
    e=$(epoch_of alpha 2) && echo "epoch $e2 -> $e" && test "$e" = "$e2" &&
    wait_for 10 "test \"\$(queue_row agent.w2@alpha.inbox)\" = \"1 1 1\"" &&
    expect alpha ok mode 2 ack &&
    expect alpha ok ackall 2 &&
    wait_for 10 "test \"\$(queue_row agent.w2@alpha.inbox)\" = \"0 0 1\"" &&
    expect alpha "ok agent.w2@alpha.inbox deleted" remove 2 delete &&
    test -z "$(queue_row agent.w2@alpha.inbox)" &&
    expect alpha absent status 2 &&
    expect alpha "no-mailbox" pub fleet.msg w2@alpha - m12 to w2 again &&
    expect alpha "ok unread=0" pub fleet.msg broadcast.all - m13 all but w2 &&
    wait_for 10 "test \$(grep -c \" all but w2\$\" alpha.dlv) = 2" &&
    ! grep -q "^2 .* all but w2" alpha.dlv
'

test_expect_success 'remove, keep: unbound, what waits is kept; adding it again serves it' '
    expect alpha "ok" mode 1 hold &&
    "$TRY" "$URI" publish "" agent.w1@alpha.inbox "waits for w1" &&
    wait_for 10 "bodies alpha 1 | grep -qx \"waits for w1\"" &&
    expect alpha "ok agent.w1@alpha.inbox unbound and kept" remove 1 keep &&
    test "$(queue_row agent.w1@alpha.inbox)" = "1 0 0" &&
    expect alpha "no-mailbox" pub fleet.msg w1@alpha - m14 to w1 unbound &&
    expect alpha ok mode 1 ack &&
    expect alpha ok add 1 agent.w1@alpha.inbox fleet.msg w1@alpha &&
    expect alpha ok wait 1 ok 10 &&
    wait_for 10 "test \$(grep -c \" waits for w1\$\" alpha.dlv) = 2" &&
    grep " waits for w1$" alpha.dlv | tail -n1 | grep -q "^1 [0-9]* [0-9]* 1 " &&
    expect alpha "ok unread=0" pub fleet.msg w1@alpha - m15 to w1 bound again &&
    wait_for 10 "test \"\$(queue_row agent.w1@alpha.inbox)\" = \"0 0 1\""
'

# A stream through closes of its box's channel (issue 16, 2.1). First
# 2000 messages wait in agent.g@alpha.inbox, box 3 holds the first 64
# (prefetch), then, in one go, acks them and from then on each delivery
# after a millisecond's work (so that a full window of deliveries is always
# on its way), and its channel is closed under the stream three times by a
# removal that keeps the box (not empty): an ack always precedes our
# close, so every message must be seen exactly once, and deliveries that
# were on their way when the channel closed are dropped, never taken for
# the reopened channel's (they are redelivered there).
test_expect_success 'no ghost: a stream through removals that keep the box, each message seen once' '
    expect alpha ok mode 3 hold &&
    expect alpha ok add 3 agent.g@alpha.inbox fleet.msg g@alpha &&
    expect alpha ok wait 3 ok 10 &&
    expect alpha "ok 2000" flood fleet.msg g@alpha 2000 g &&
    wait_for 10 "test \$(bodies alpha 3 | wc -l) = 64" &&
    ask alpha "mode 3 slow; ackall 3; remove 3 delete; wait 3 ok 5; remove 3 delete; wait 3 ok 5; remove 3 delete; wait 3 ok 5" >chain &&
    cat chain &&
    test $(grep -c "^not-empty" chain) = 3 &&
    wait_for 20 "test \"\$(queue_row agent.g@alpha.inbox)\" = \"0 0 1\"" &&
    bodies alpha 3 >all && sort -u all >seen &&
    seq 2000 | sed "s/^/g-/" | sort >want && test_cmp want seen &&
    test $(wc -l <all) = 2000 &&
    grep "dropped [0-9]* deliveries that arrived on closed consumer channels" alpha.err &&
    ! grep -q "unknown delivery tag" alpha.err
'

# Then the broker closes the channel itself (406, as after an ack of an
# unknown tag) while another process streams 3000 more: acks sent after
# the broker's close do not count, so a message may come twice, but a
# second copy is always the broker's redelivery (flagged), nothing is lost,
# and no ack of ours ever hits a tag of the wrong channel.
lavinmq_skip t0375.9 'no ghost: the broker closes the box channel under a stream; nothing lost or mistaken' ||
test_expect_success 'no ghost: the broker closes the box channel under a stream; nothing lost or mistaken' '
    expect alpha ok mode 3 slow &&
    start sender &&
    echo "flood fleet.msg g@alpha 3000 h" >sender.in &&
    wait_for 20 "test \$(grep -c \" h-\" alpha.dlv) -ge 300" &&
    broker_close_consumer_channel agent.g@alpha.inbox &&
    wait_for 60 "grep -q \"^ok 3000\" sender.out" &&
    expect alpha ok wait 3 ok 10 &&
    wait_for 20 "test \"\$(queue_row agent.g@alpha.inbox)\" = \"0 0 1\"" &&
    grep -c "closed by the broker: 406" alpha.err &&
    awk "\$1 == 3 && \$5 ~ /^h-/" alpha.dlv >h &&
    cut -d" " -f5 h | sort -u >seen &&
    seq 3000 | sed "s/^/h-/" | sort >want && test_cmp want seen &&
    awk "seen[\$5]++ && \$4 != 1 { print; bad = 1 } END { exit bad }" h &&
    ! grep "unknown delivery tag" alpha.err | grep -v 987654321 &&
    n=$(broker_count fleet.dlq) && test "$n" = 0 &&
    expect sender bye quit
'

# Quorum queues refuse queue.delete with if-empty with a connection error
# (540 NOT_IMPLEMENTED, seen on RabbitMQ 3.10): the removal counts instead.
test_expect_success 'quorum mailboxes: held -> kept; empty -> deleted; the connection stays' '
    start quorum -q quorum &&
    expect quorum ok mode 1 hold &&
    expect quorum ok add 1 agent.q1@quorum.inbox fleet.msg q1@quorum &&
    expect quorum ok wait 1 ok 10 &&
    expect quorum "ok unread=0" pub fleet.msg q1@quorum - q1 held &&
    wait_for 10 "bodies quorum 1 | grep -qx held" &&
    expect quorum "not-empty agent.q1@quorum.inbox kept: this box holds 1" remove 1 delete &&
    expect quorum ok wait 1 ok 10 &&
    expect quorum ok mode 1 ack &&
    expect quorum ok ackall 1 &&
    wait_for 10 "test \"\$(queue_row agent.q1@quorum.inbox)\" = \"0 0 1\"" &&
    expect quorum "ok agent.q1@quorum.inbox deleted" remove 1 delete &&
    test -z "$(queue_row agent.q1@quorum.inbox)" &&
    ! grep "connection lost" quorum.err &&
    expect quorum bye quit
'

test_expect_success 'quit: the broker takes back nothing it should not' '
    expect alpha bye quit &&
    wait_for 10 "! kill -0 \$(cat alpha.pid) 2>/dev/null" &&
    ! grep -n "Sanitizer\|runtime error" alpha.err intruder.err sender.err quorum.err &&
    test "$(queue_row lead.alpha.inbox)" = "0 0 0"
'

test_done
