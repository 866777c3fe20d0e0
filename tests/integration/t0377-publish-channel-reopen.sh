#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The broker closes the publish channel and is slow to open it again
# (SPEC section 6: nothing in the publishing thread waits on the broker
# synchronously, a channel reopen included). The publishing thread sends
# close-ok and channel.open and goes on with its loop; the sends handed
# over meanwhile wait for the open-ok (and the confirm mode after it), in
# order, and then go out; a send whose send_timeout comes first is
# answered ETIMEDOUT by the thread's timer, and its publish still goes out
# (sent records it when its confirm comes).
#
# How the broker is made slow: RabbitMQ opens a channel in the connection's
# reader process, which asks the connection's channel supervisor to start
# it; the supervisor is suspended (sys:suspend) for HOLD seconds, so the
# channel.open fleetfs sends is answered only after sys:resume. The close
# itself is the broker running an ack of a delivery tag that was never
# given on the publish channel (406 PRECONDITION_FAILED, as a client's bad
# ack gets). While the supervisor is suspended RabbitMQ reads nothing more
# of that connection (the reader waits), so nothing on it is answered: what
# the thread does meanwhile is take the hand-overs, keep its timers and turn
# its loop (its voluntary context switches, /proc: the code before this
# waited inside rabbitmq-c's synchronous channel.open, one poll(2) until
# the open-ok came, and fails that check). HOLD is under 5 s: a link that
# answers nothing for longer is taken for dead (the ping, probes.c).
#
# What is counted is the test's own: each write's return, the broker's
# queue counts and connection list, what a reader reads.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

HOLD=3
M=10

# switches WHO: voluntary context switches of WHO's publishing thread
switches() {
    local pid t
    pid=$(cat "$TEST_DIR/.harness/pid.$1")
    for t in /proc/"$pid"/task/*; do
        if [[ $(cat "$t/comm" 2>/dev/null) == broker-pub ]]; then
            awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status"
            return 0
        fi
    done
    return 1
}

# writer WHO PEER WHAT N: N writes of "WHAT mJ" on one fd of
# WHO/peers/PEER/send, in the background; WHAT.rc is "ok N" when every
# write returned its length, else the errno's name of the first that failed
writer() {
    "$FLEET_ROOT/tests/tools/fdwrites" "$1/peers/$2/send" "$3" "$4" "$3.rc" &
}

test_expect_success 'alpha mounts (sends to sink1 and sink2); both mailboxes made by a first send' '
    mount_fleet alpha peers=sink1:sink2 send_timeout=20s &&
    wait_for 10 "grep -q \"^broker: connected$\" alpha/status" &&
    echo "first to sink1" >alpha/peers/sink1/send &&
    echo "first to sink2" >alpha/peers/sink2/send &&
    broker_publish_conn alpha >conn.before && grep -q "<" conn.before
'

test_expect_success "the broker closes alpha's publish channel and holds its reopen for ${HOLD}s: two writers' sends wait, then each is confirmed" '
    broker_close_publish_channel alpha hold &&
    at_exit "broker_release_publish_channel alpha >/dev/null 2>&1" &&
    wait_for 10 "grep -q \"channel 1 closed by the broker: 406\" alpha.log" &&
    s0=$(switches alpha) &&
    writer alpha sink1 one $M &&
    writer alpha sink2 two $M &&
    sleep $HOLD &&
    s1=$(switches alpha) &&
    test ! -e one.rc && test ! -e two.rc &&
    broker_release_publish_channel alpha &&
    wait_for 30 "test -e one.rc && test -e two.rc" &&
    echo "ok $M" >want && test_cmp want one.rc && test_cmp want two.rc &&
    echo "publishing thread: $((s1 - s0)) voluntary switches while the reopen was held" &&
    test $((s1 - s0)) -ge 5
'

test_expect_success 'the connection stayed (the broker lists the same one); each message is in its mailbox once' '
    broker_publish_conn alpha >conn.after && test_cmp conn.before conn.after &&
    n=$(broker_count lead.sink1.inbox) && test "$n" = $((M + 1)) &&
    n=$(broker_count lead.sink2.inbox) && test "$n" = $((M + 1)) &&
    test $(wc -l <alpha/leads/alpha/sent) = $((2 * M + 2)) &&
    test $(msgids alpha/leads/alpha/sent | sort -u | wc -l) = $((2 * M + 2)) &&
    test "$(jq -r .state alpha/leads/alpha/sent | sort -u)" = published-unread
'

test_expect_success 'readers read each message once' '
    mount_fleet sink1 peers=alpha inject=none &&
    mount_fleet sink2 peers=alpha inject=none &&
    wait_for 20 "test \$(wc -l <sink1/leads/sink1/inbox) -ge $((M + 1))" &&
    wait_for 20 "test \$(wc -l <sink2/leads/sink2/inbox) -ge $((M + 1))" &&
    { echo "first to sink1"; for j in $(seq $M); do echo "one m$j"; done; } | sort >want1 &&
    jq -r .body sink1/leads/sink1/inbox | sort >got1 && test_cmp want1 got1 &&
    { echo "first to sink2"; for j in $(seq $M); do echo "two m$j"; done; } | sort >want2 &&
    jq -r .body sink2/leads/sink2/inbox | sort >got2 && test_cmp want2 got2 &&
    echo all >sink1/leads/sink1/ack && echo all >sink2/leads/sink2/ack
'

test_expect_success 'send_timeout passes while the reopen is held: ETIMEDOUT from the timer; the publish still goes out, read once, recorded' '
    mount_fleet gamma peers=sink1 send_timeout=1s &&
    wait_for 10 "grep -q \"^broker: connected$\" gamma/status" &&
    echo "gamma first" >gamma/peers/sink1/send &&
    broker_close_publish_channel gamma hold &&
    at_exit "broker_release_publish_channel gamma >/dev/null 2>&1" &&
    wait_for 10 "grep -q \"channel 1 closed by the broker: 406\" gamma.log" &&
    writer gamma sink1 late 1 &&
    wait_for 10 "test -e late.rc" &&
    echo ETIMEDOUT >want && test_cmp want late.rc &&
    broker_release_publish_channel gamma &&
    wait_for 20 "grep -q \"late m1\" sink1/leads/sink1/inbox" &&
    test "$(jq -r .body sink1/leads/sink1/inbox | grep -c "^late m1$")" = 1 &&
    id=$(jq -r "select(.body == \"late m1\") | .msgId" sink1/leads/sink1/inbox) &&
    wait_for 10 "test \"\$(sent_state gamma $id)\" = published" &&
    ! grep "told by the watchdog" gamma.log
'

test_expect_success 'unmount cleanly' '
    unmount_fleet gamma && unmount_fleet sink1 && unmount_fleet sink2 && unmount_fleet alpha
'

test_done
