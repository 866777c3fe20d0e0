#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A listing of 10 000 claims (doc/claims.md, "The listing"): tests/tools/
# claimhold holds them on the broker as a fleetfs holder would (an
# exclusive consumer on each lock, a take announced on fleet.claims); the
# mount lists exactly the names the broker shows held (rabbitmqctl's
# consumer counts, never fleetfs's word), the daemon's memory grows by a
# bounded amount, and a listing takes a bounded time.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: a bound on the daemon's resident memory, which ASan multiplies; the same table code runs under ASan in t1100" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1103
new_vhost $FLEET_VHOST
HOLD=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimhold
N=${FLEET_CLAIMS_MANY:-10000}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$(cat "$TEST_DIR/.harness/pid.alpha")/status"; }

test_expect_success 'alpha mounts; its claims connection is up' '
    mount_fleet alpha &&
    wait_for 10 "grep -q \"claims: connected\" alpha.log" &&
    rss_kib >rss.before
'

test_expect_success "$N claims held on the broker: alpha lists exactly the names the broker shows held" '
    mkfifo hold.in &&
    { "$HOLD" "$(broker_uri $FLEET_VHOST)" holderx c "$N" <hold.in >hold.out 2>hold.err & } &&
    { sleep 3600 >hold.in & echo $! >sleeper.pid; } &&
    t0=$(_test_now) &&
    wait_for 120 "grep -q ready hold.out" &&
    t1=$(_test_now) &&
    wait_for 60 "test \$(ls alpha/claims | wc -l) = $N" &&
    t2=$(_test_now) &&
    echo "# $N claims held by claimhold in $(((t1 - t0) / 1000)) ms; all listed $(((t2 - t1) / 1000)) ms later" >>measured &&
    rmqctl list_queues -q -p $FLEET_VHOST name consumers >q &&
    awk "\$1 ~ /^fleet\\.claim\\./ && \$2 == 1 { sub(/^fleet\\.claim\\./, \"\", \$1); print \$1 }" q | sort >broker.names &&
    test $(wc -l <broker.names) = $N &&
    ls alpha/claims | sort >alpha.names &&
    test_cmp broker.names alpha.names &&
    test "$(jq -r .holder alpha/claims/c4242/holder)" = holderx
'

test_expect_success "the daemon's memory grew by less than 32 MiB; a listing takes under 5 s" '
    after=$(rss_kib) && before=$(cat rss.before) &&
    echo "# $N claims listed: VmRSS $before KiB before, $after KiB after" >>measured &&
    test $((after - before)) -lt 32768 &&
    t0=$(_test_now) && ls -l alpha/claims >/dev/null && t1=$(_test_now) &&
    echo "# ls -l of $N claims: $(((t1 - t0) / 1000)) ms" >>measured &&
    test $((t1 - t0)) -lt 5000000
'

test_expect_success 'their holder gone: the broker frees them; a mkdir here takes one (token 1: claimhold wrote none)' '
    kill $(cat sleeper.pid) &&
    wait_for 30 "rmqctl list_queues -q -p $FLEET_VHOST name consumers | awk \"\\\$1 == \\\"fleet.claim.c7\\\" && \\\$2 == 0\" | grep -q ." &&
    wait_for 10 "mkdir alpha/claims/c7 2>/dev/null" &&
    test "$(jq -r .token alpha/claims/c7/holder)" = 1
'

[[ -s measured ]] && cat measured
test_done
