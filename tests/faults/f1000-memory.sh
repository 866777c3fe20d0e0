#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Memory stays bounded (issue 8 defect 11): a `tail -f` of beta's inbox
# stays open across 2000 arrivals and acks (20000 with FAULT_SCALE=10),
# then 5000 messages (50000) wait while a slow reader reads the inbox; the
# daemon's resident set stays under 32 MiB throughout; then a reader
# script consumes every waiting message, each once by its own count, the
# mailbox ends empty, fleet.dlq empty, and both sides work. Plain build only
# (a sanitizer build's shadow memory is not the daemon's).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "RSS is not meaningful under a sanitizer" ;; esac
broker_start_own
ARRIVALS=$(scaled 2000)
WAITING=$(scaled 5000)
LIMIT_KB=$((32 * 1024))

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$(cat "$TEST_DIR/.harness/pid.$1")/status"; }
# watch_rss NAME: record the daemon's peak RSS (kB) in NAME.peak, every
# 0.2 s; in bash alone (a fork costs about 8 ms of CPU here: five a tick
# were a fifth of a core for the whole file)
watch_rss() {
    ( pid=$(cat "$TEST_DIR/.harness/pid.$1") && p=0 &&
      while [[ -r /proc/$pid/status ]]; do
          r=
          while read -r k v _; do [[ $k == VmRSS: ]] && r=$v && break; done </proc/$pid/status
          [[ -n $r ]] || break
          ((r > p)) && p=$r && echo "$r" >"$TEST_DIR/$1.peak"
          _nap 0.2
      done ) </dev/null >/dev/null 2>&1 &
    echo $! >"$TEST_DIR/.harness/watch.$1"
    at_exit "kill \$(cat $TEST_DIR/.harness/watch.$1) 2>/dev/null || true"
}

test_expect_success 'alpha and beta mount; beta'"'"'s RSS is watched' '
    mount_fleet alpha peers=beta max_length=100000 &&
    mount_fleet beta peers=alpha max_length=100000 &&
    watch_rss beta &&
    echo "beta at start: $(rss_kb beta) kB"
'

test_expect_success "a tail -f of the inbox open across $ARRIVALS arrivals and acks" '
    { tail -f beta/leads/beta/inbox >tailed 2>/dev/null & echo $! >tail.pid; } &&
    reader_start beta &&
    { for i in $(seq 1 '$ARRIVALS'); do echo "arrival $i"; done; } >alpha/peers/beta/send &&
    stream_written arrival alpha '$ARRIVALS' &&
    wait_for '$(scaled 120)' "test \$(grep -c \"	ok\$\" beta.acked) -ge '$ARRIVALS'" &&
    reconcile arrival beta --min-ok '$ARRIVALS' &&
    reader_stop beta &&
    wait_for 30 "grep -q \"arrival '$ARRIVALS'\\\"\" tailed" &&
    seq 1 '$ARRIVALS' | sed "s/^/arrival /" | sort >want &&
    jq -r .body tailed | sort >got && test_cmp want got &&
    echo "beta peak so far: $(cat beta.peak) kB, now $(rss_kb beta) kB" &&
    test $(cat beta.peak) -lt '$LIMIT_KB' &&
    kill $(cat tail.pid)
'

test_expect_success "$WAITING messages waiting, a slow reader reading the inbox" '
    { for i in $(seq 1 '$WAITING'); do echo "waiting $i"; done; } >alpha/peers/beta/send &&
    stream_written waiting alpha '$WAITING' &&
    { (while :; do
           while read -r l; do sleep 0.001; done <beta/leads/beta/inbox
           echo pass >>passes
       done) </dev/null >/dev/null 2>&1 & echo $! >reader.pid; } &&
    wait_for 60 "grep -q \"^held: 64$\" beta/leads/beta/status" &&
    wait_for 120 "test \$(wc -l <passes) -ge 20" &&
    kill $(cat reader.pid) &&
    echo "beta peak: $(cat beta.peak) kB, now $(rss_kb beta) kB" &&
    test $(cat beta.peak) -lt '$LIMIT_KB'
'

[[ -f $TEST_DIR/beta.peak ]] && echo "# f1000: beta's peak RSS $(cat "$TEST_DIR/beta.peak") kB (limit $LIMIT_KB kB)"

test_expect_success "the reader script consumes the $WAITING waiting, each once; fleet.dlq empty; both sides work" '
    reader_start beta 0.05 &&
    wait_for '$(( $(scaled 600) > 3000 ? 3000 : $(scaled 600) ))' "test \$(grep -c \"	ok\$\" beta.acked) -ge $((ARRIVALS + WAITING))" &&
    reconcile waiting beta --min-ok '$WAITING' &&
    reconcile arrival beta --min-ok '$ARRIVALS' &&
    reader_stop beta &&
    fault_end f1000 alpha beta
'
for t in arrival waiting; do [[ -f $TEST_DIR/$t.reconciled ]] && sed "s/^/# f1000 $t: /" "$TEST_DIR/$t.reconciled"; done
[[ -f $TEST_DIR/f1000.reconciled ]] && sed "s/^/# f1000: /" "$TEST_DIR/f1000.reconciled"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_done
