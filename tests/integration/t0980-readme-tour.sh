#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# doc/tour.md's "The long tour" (the README's tour until issue 46 moved it
# there; the README's one-minute tour is t0976's), run as printed
# (tests/tools/doc-tour): every
# command in order in one shell, from the source tree, with its own private
# broker as the tour starts one; what each prints is compared with what the
# document shows, times, msgIds, keys, ports, ages and names masked. So the
# tour's outputs cannot drift from what fleetfs does. Only the commands the
# tour runs "in two other terminals" (inotifywait, tail -f) are not run.
# The tour's /tmp paths become this test's own; its `make B=build/doc2`
# becomes the build under test.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: the README's printed outputs: the same operations run under ASan in t0100-t0730" ;; esac
command -v jq >/dev/null || test_skip_all "jq is not installed"

B=$(dirname "$FLEETFS")
export DOC_SKIP='^(inotifywait|tail -n 0 -f)'
# alpha's status is read right after beta's mount: whether beta's first
# heartbeat has come in by then (0 or 1 lead heard) is a race
export DOC_MASK='s/the whole fleet: [0-9]+ lead/the whole fleet: <n> lead/'
export DOC_START=$FLEET_ROOT
export DOC_SUBST="s|/tmp/docbroker2|$TEST_DIR/docbroker2|g; s|/tmp/tour|$TEST_DIR/tour|g; s|^make B=build/doc2 \&\& PATH=.*|PATH=$B:$B/tools:\$PATH src=\$PWD|"
export DOC_UNSUBST="s|$TEST_DIR/docbroker2|/tmp/docbroker2|g; s|$TEST_DIR/tour|/tmp/tour|g"
at_exit "for m in \$(awk -v d=$TEST_DIR/tour/ 'index(\$5, d) == 1 { print \$5 }' /proc/self/mountinfo); do fusermount3 -uz \$m; done; $FLEET_ROOT/scripts/broker kill --dir $TEST_DIR/docbroker2 >/dev/null 2>&1 || true"

test_expect_success 'the long tour prints what doc/tour.md shows' '
    { "$FLEET_ROOT/tests/tools/doc-tour" "$FLEET_ROOT/doc/tour.md" "^## The long tour\$" \
        "^## One write\\(2\\) is one message" "$TEST_DIR/run" >result; echo $? >result.rc; } &&
    cat result && test "$(cat result.rc)" = 0 &&
    test $(grep -c "^ok" result) -ge 80
'

# its Clean up unmounts every lead it mounted (it once left gamma mounted:
# an unmount a command does not make prints nothing, so the comparison
# above cannot see it)
test_expect_success 'after the tour'"'"'s Clean up nothing of the tour is mounted' '
    awk -v d="$TEST_DIR/tour/" "index(\$5, d) == 1 { print \$5 }" /proc/self/mountinfo >left &&
    cat left && test ! -s left
'

test_done
