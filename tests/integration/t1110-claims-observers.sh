#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A claim taken and released over and over by one mount while other mounts
# watch (as in make bench's rounds, whose sink mount listens to claims):
# every take and release of alpha's must succeed, and nobody else may ever
# hold the name. The observers' notifier makes a real mkdir and rmdir of
# claims/NAME through their own mount for each take and release they hear
# of (so that inotify sees IN_CREATE / IN_DELETE); a mkdir of theirs that
# came after the release was heard once reached the claims code and took
# the name for the observer, which then held it for good (alpha's takes
# failed EEXIST from then on). Counted on the broker (tests/tools/
# claimpeek: the largest token and whom it was granted to), never from
# fleetfs. A take refused by the broker is never silent: a log line.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1110
new_vhost $FLEET_VHOST
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
HOLD=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimhold
[[ $FLEETFS_BUILD == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek HOLD=$FLEETFS_BUILD/tools/claimhold
URI=$(broker_uri $FLEET_VHOST)
ROUNDS=100

test_expect_success 'alpha, beta and gamma mount, their claims connections up' '
    mount_fleet alpha &&
    mount_fleet beta &&
    mount_fleet gamma &&
    for h in alpha beta gamma; do
        wait_for 10 "grep -q \"claims: connected\" $h.log" || exit 1
    done
'

# Beta's poker (its only child process) stopped, so that its mkdir of
# claims/late comes after alpha's take and release of it were both heard
# and the announcement has lapsed (notify.c ENTRY_PENDING_US, 2 s: the
# 3 s wait is a lower bound, longer only makes it surer); then let go. A
# marker taken after it shows the poker got through (its pipe is in order).
test_expect_success "beta's poker held back while alpha takes and releases a name; let go, it takes nothing" '
    poker=$(pgrep -P "$(cat .harness/pid.beta)") && test "$(echo $poker | wc -w)" = 1 &&
    at_exit "kill -CONT $poker 2>/dev/null" &&
    kill -STOP $poker &&
    mkdir alpha/claims/late &&
    wait_for 10 "ls beta/claims | grep -qx late" &&
    rmdir alpha/claims/late &&
    wait_for 10 "! ls beta/claims | grep -qx late" &&
    _nap 3 &&
    { inotifywait -m -e create beta/claims >ino 2>&1 & } &&
    at_exit "kill $! 2>/dev/null" &&
    wait_for 10 "grep -q \"Watches established\" ino" &&
    kill -CONT $poker &&
    mkdir alpha/claims/marker &&
    wait_for 10 "grep -q \"CREATE,ISDIR marker\" ino" &&
    rmdir alpha/claims/marker &&
    "$PEEK" "$URI" late >peek && cat peek &&
    grep -q "^consumers 0 tokens 1 max 1 holder alpha$" peek &&
    test_must_fail grep "claims: took late" beta.log
'

test_expect_success "alpha: $ROUNDS rounds of mkdir then rmdir of one name, back to back, beta and gamma listening: every one succeeds" '
    fails=0 &&
    for i in $(seq $ROUNDS); do
        mkdir alpha/claims/again 2>>err || fails=$((fails + 1))
        rmdir alpha/claims/again 2>>err || fails=$((fails + 1))
    done &&
    echo "# failed calls: $fails of $((2 * ROUNDS)) ($(sort err | uniq -c | head -n 3))" &&
    test $fails = 0
'

test_expect_success "the broker granted it $ROUNDS times, the last to alpha, and holds it no more" '
    "$PEEK" "$URI" again >peek &&
    cat peek &&
    grep -q "^consumers 0 tokens 1 max $ROUNDS holder alpha$" peek
'

test_expect_success 'nobody but alpha took it (the daemons logs), and no mount lists it' '
    test_must_fail grep "claims: took again" beta.log gamma.log &&
    for h in alpha beta gamma; do
        wait_for 10 "test -z \"\$(ls $h/claims)\"" || exit 1
    done
'

test_expect_success 'a take the broker refuses is logged: alpha mkdir of a name held elsewhere (on the broker, unannounced to alpha)' '
    mkfifo hold.in &&
    { "$HOLD" "$URI" alpha held 1 <hold.in >hold.out 2>&1 & } &&
    exec 7>hold.in &&
    wait_for 10 "grep -q ready hold.out" &&
    test_must_fail mkdir alpha/claims/held0 2>err && grep -q "File exists" err &&
    grep "claims: mkdir claims/held0 failed (EEXIST)" alpha.log &&
    exec 7>&- &&
    wait_for 10 "\"$PEEK\" \"$URI\" held0 | grep -q \"^consumers 0\""
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet gamma
'

test_done
