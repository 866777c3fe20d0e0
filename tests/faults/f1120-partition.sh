#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A silent partition (issue 9): beta's link (its own network namespace) is
# dropped for 20 s — no FIN, no RST — while alpha keeps sending to it. beta
# notices through AMQP heartbeats (status no longer "connected" within
# about two heartbeat intervals), its sends fail fast meanwhile, and it
# reconnects by itself within 5 s of the link returning; every message
# alpha sent is consumed by beta exactly once. The times are printed.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/netns.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
netns_require
netns_setup || { echo "# netns_setup failed" >&2; exit 1; }
TAG=f1120
CUT_S=$(( $(scaled 20) > 60 ? 60 : $(scaled 20) ))   # 20 s; 60 s in soak
DETECT_MAX_S=${DETECT_MAX_S:-25}   # two 10 s heartbeat intervals, and a little
RECONNECT_MAX_S=${RECONNECT_MAX_S:-5}

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

test_expect_success 'alpha and beta, each in its own namespace' '
    netns_host alpha && netns_host beta &&
    host_mount alpha peers=beta &&
    host_mount beta peers=alpha &&
    reader_start beta
'

test_expect_success "beta's link dropped silently for $CUT_S s while alpha sends: detected, then reconnected" '
    STREAM_PACE=0.05 stream_start alpha beta 600 '$TAG' &&
    wait_for 30 "test \$(stream_progress '$TAG') -ge 20" &&
    t0=$(date +%s%N) && link_cut beta &&
    wait_for 90 "! grep -q \"^broker: connected$\" beta/status" &&
    detect=$(ms_since $t0) &&
    grep "^broker:" beta/status &&
    start=$(date +%s%N) &&
    test_must_fail bash -c "echo during the cut >beta/peers/alpha/send" 2>err &&
    fail_ms=$(ms_since $start) && cat err &&
    while test $(ms_since $t0) -lt $(('$CUT_S' * 1000)); do sleep 0.2; done &&
    t1=$(date +%s%N) && link_restore beta &&
    wait_for 60 "grep -q \"^broker: connected$\" beta/status" &&
    reconnect=$(ms_since $t1) &&
    echo "silent partition -> beta status not connected: $detect ms; a send during it failed in $fail_ms ms; link back -> reconnected: $reconnect ms" | tee times &&
    test $detect -le $(('$DETECT_MAX_S' * 1000)) &&
    test $fail_ms -le 3000 &&
    test $reconnect -le $(('$RECONNECT_MAX_S' * 1000))
'
[[ -f $TEST_DIR/times ]] && sed "s/^/# $TAG: /" "$TEST_DIR/times"

test_expect_success 'everything alpha sent arrived once; both sides work after the cut' '
    stream_wait '$TAG' 300 &&
    after_fault alpha beta '$TAG' &&
    { wait_for 90 "settled '$TAG' beta" || true; } &&
    reconcile '$TAG' beta --min-ok 600 &&
    both_sides_work beta alpha hand
'
[[ -f $TEST_DIR/$TAG.reconciled ]] && sed "s/^/# $TAG: /" "$TEST_DIR/$TAG.reconciled"

test_expect_success 'unmount cleanly' '
    reader_stop beta && unmount_fleet alpha && unmount_fleet beta
'

test_done
