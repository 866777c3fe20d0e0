#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The claims thread stuck (doc/claims.md, "When the claims thread does not
# answer"): a broker link that stops reading but still talks (what a wedged
# proxy or a resource alarm does, and a SIGSTOP cannot: tests/tools/
# freezeproxy, as t0374) blocks the claims thread in a send once the
# socket buffers are full (FLEETFS_TEST_SNDBUF keeps alpha's small; a
# burst of notes fills them). Expected: a mkdir meanwhile fails EAGAIN
# after 5 s with its log line, nothing taken; the holder gives its claims
# up itself within the grace (the watchdog shuts the stuck socket down:
# log lines, claims/NAME gone), before beta, trying all along, could take
# one; unmount returns while the link is still frozen. What the broker
# holds is read by claimpeek; beta's grant time by this script.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1107
new_vhost $FLEET_VHOST
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
[[ $FLEETFS_BUILD == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek
URI=$(broker_uri $FLEET_VHOST)
peek() { "$PEEK" "$URI" "$1"; }
thaw() { rm -f "$TEST_DIR/freeze"; }
W1=alpha/agents/w1@alpha

test_expect_success 'alpha reaches the broker through the proxy; its agent w1 holds deploy, alpha holds build' '
    { "$FLEET_ROOT/tests/tools/freezeproxy" proxy.port "$BROKER_PORT" "$TEST_DIR/freeze" & } &&
    at_exit "kill $! 2>/dev/null; true" &&
    wait_for 5 "test -s proxy.port" &&
    FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:$(cat proxy.port)/$FLEET_VHOST \
        FLEETFS_TEST_SNDBUF=4096 mount_fleet alpha inject=none agents=w1 &&
    mount_fleet beta inject=none &&
    wait_for 10 "grep -q \"claims: connected\" alpha.log" &&
    wait_for 10 "mkdir $W1/claims/deploy 2>/dev/null" &&
    mkdir alpha/claims/build &&
    peek deploy | grep -qx "consumers 1 tokens 1 max 1 holder alpha agent w1@alpha" &&
    peek build | grep -qx "consumers 1 tokens 1 max 1 holder alpha"
'

test_expect_success 'the link stops reading, a burst of notes fills the buffers: mkdir fails EAGAIN after 5 s with its log line' '
    at_exit thaw &&
    pad=$(head -c 1000 /dev/zero | tr "\\0" n) &&
    echo 0 >freeze &&
    { { until mkdir beta/claims/deploy 2>/dev/null; do sleep 0.2; done; now_ms >beta.took; } & } &&
    at_exit "kill $! 2>/dev/null; true" &&
    for i in $(seq 100); do echo "$i $pad" >alpha/claims/build/note || return 1; done &&
    t0=$(_test_now) &&
    test_must_fail mkdir alpha/claims/other 2>err &&
    t1=$(_test_now) &&
    grep -q "Resource temporarily unavailable" err &&
    grep -q "claims: mkdir claims/other failed (EAGAIN): no answer from the broker within 5000 ms" alpha.log &&
    test $((t1 - t0)) -ge 4500000 &&
    echo "# mkdir answered EAGAIN $(((t1 - t0) / 1000)) ms after it started" >>measured
'

test_expect_success 'alpha gives both claims up itself (the watchdog shuts its socket down), before beta could take deploy' '
    wait_for 30 "grep -q \"claims: lost claim deploy (token 1, taken by w1@alpha)\" alpha.log" &&
    grep -q "claims: the claims thread made no progress for [0-9]* ms" alpha.log &&
    grep -q "claims: lost claim build (token 1)" alpha.log &&
    test_must_fail test -d alpha/claims/build &&
    test_must_fail test -d alpha/claims/deploy &&
    wait_for 90 "test -s beta.took" &&
    lost=$(grep "claims: lost claim deploy" alpha.log | head -n 1 | cut -d" " -f1) &&
    lost_ms=$(( $(date -d "$lost" +%s%3N) )) &&
    echo "# alpha gave deploy up at $lost_ms, beta held it at $(cat beta.took) (ms)" >>measured &&
    test "$lost_ms" -le "$(cat beta.took)" &&
    peek deploy | grep -qx "consumers 1 tokens 1 max 2 holder beta"
'

test_expect_success 'unmount returns while the link is still frozen' '
    timeout 30 sh -c "until fusermount3 -u alpha 2>/dev/null; do sleep 0.3; done" &&
    wait_for 60 "fleet_gone alpha"
'

test_done
