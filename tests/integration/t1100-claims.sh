#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Claims (doc/claims.md) through two real mounts on one broker: mkdir takes
# a name for the whole fleet, the other gets EEXIST; the holder file, the
# note, rmdir by the holder only; the lock-directory idiom with inotifywait
# waits for the release; a holder killed -9 frees the claim and the token
# grows; bad names. What the broker holds is read by tests/tools/claimpeek
# (the lock's consumers, the largest token and whom it was granted to),
# never from fleetfs.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1100
new_vhost $FLEET_VHOST
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
[[ $FLEETFS_BUILD == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek
URI=$(broker_uri $FLEET_VHOST)
peek() { "$PEEK" "$URI" "$1"; }
holder_of() { jq -r "$2" "$1" 2>/dev/null; }
# the lock-directory idiom, word for word as doc/claims.md shows it (the
# -t bounds one wait, should the release come before inotifywait watches)
idiom() {
  until mkdir "$1" 2>/dev/null; do inotifywait -qq -t 5 -e delete "${1%/*}"; done
  echo got
}

test_expect_success 'alpha and beta mount; claims/ is empty on both' '
    mount_fleet alpha &&
    mount_fleet beta &&
    ls alpha/claims >a && test_must_fail test -s a &&
    ls beta/claims >b && test_must_fail test -s b
'

test_expect_success 'alpha takes deploy: the broker shows one consumer on its lock and token 1 granted to alpha' '
    wait_for 10 "mkdir alpha/claims/deploy 2>/dev/null" &&
    peek deploy >p && grep -q "^consumers 1 tokens 1 max 1 holder alpha$" p &&
    test "$(holder_of alpha/claims/deploy/holder .holder)" = alpha &&
    test "$(holder_of alpha/claims/deploy/holder .token)" = 1 &&
    test "$(holder_of alpha/claims/deploy/holder .mine)" = true
'

test_expect_success 'beta: mkdir deploy fails EEXIST; beta lists it with alpha as holder' '
    test_must_fail mkdir beta/claims/deploy 2>err && grep -q "File exists" err &&
    wait_for 10 "test \"\$(holder_of beta/claims/deploy/holder .holder)\" = alpha" &&
    test "$(holder_of beta/claims/deploy/holder .mine)" = false &&
    ls beta/claims >b && echo deploy >want && test_cmp want b &&
    peek deploy >p && grep -q "^consumers 1 tokens 1 max 1 holder alpha$" p
'

test_expect_success 'the note: the holder writes it, every host reads it; another host gets EPERM' '
    echo "migrating the db" >alpha/claims/deploy/note &&
    test "$(holder_of alpha/claims/deploy/holder .note)" = "migrating the db" &&
    wait_for 10 "test \"\$(holder_of beta/claims/deploy/holder .note)\" = \"migrating the db\"" &&
    test_must_fail bash -c "echo mine >beta/claims/deploy/note" 2>err &&
    grep -q "Operation not permitted" err
'

test_expect_success 'rmdir by another host: EPERM, and the broker still shows alpha holding it' '
    test_must_fail rmdir beta/claims/deploy 2>err && grep -q "Operation not permitted" err &&
    peek deploy >p && grep -q "^consumers 1 " p
'

test_expect_success 'the idiom: beta waits with inotifywait, alpha releases, beta has it with token 2' '
    { idiom beta/claims/deploy >idiom.done & } &&
    rmdir alpha/claims/deploy &&
    wait_for 20 "test -s idiom.done" &&
    peek deploy >p && grep -q "^consumers 1 tokens 1 max 2 holder beta$" p &&
    test "$(holder_of beta/claims/deploy/holder .token)" = 2 &&
    wait_for 10 "test \"\$(holder_of alpha/claims/deploy/holder .holder)\" = beta"
'

test_expect_success 'rmdir by alpha of what it no longer holds: EPERM; ls on both agrees with the broker' '
    test_must_fail rmdir alpha/claims/deploy 2>err && grep -q "Operation not permitted" err &&
    ls alpha/claims >a && ls beta/claims >b && echo deploy >want &&
    test_cmp want a && test_cmp want b
'

test_expect_success 'inotify: a release on beta is IN_DELETE in alpha/claims/' '
    mkdir beta/claims/build &&
    wait_for 10 "test -d alpha/claims/build" &&
    { inotifywait -m -e delete alpha/claims >events 2>ino.err & } &&
    echo $! >ino.pid &&
    wait_for 5 "grep -q \"Watches established\" ino.err" &&
    rmdir beta/claims/build &&
    wait_for 10 "grep -q \"DELETE,ISDIR build\" events" &&
    kill $(cat ino.pid) &&
    peek build >p && grep -q "^consumers 0 tokens 1 max 1 holder beta$" p
'

test_expect_success 'fleetfs claim: prints the token; exit 3 when held; --wait takes it once released' '
    "$FLEETFS" claim "$TEST_DIR/alpha" ship --note "release 1.2" >tok && echo 1 >want && test_cmp want tok &&
    test "$(jq -r .note alpha/claims/ship/holder)" = "release 1.2" &&
    { "$FLEETFS" claim "$TEST_DIR/beta" ship 2>err; rc=$?; } &&
    test $rc = 3 && grep -q "ship is held by alpha" err &&
    { "$FLEETFS" claim "$TEST_DIR/beta" Ship 2>err; rc=$?; } &&
    test $rc = 2 && grep -q "not a claim name" err &&
    { "$FLEETFS" claim "$TEST_DIR/beta" ship --wait 30 >tok2 2>err2 & } &&
    wait_for 10 "test \"\$(jq -r .holder beta/claims/ship/holder 2>/dev/null)\" = alpha" &&
    rmdir alpha/claims/ship &&
    wait_for 20 "test -s tok2" && echo 2 >want && test_cmp want tok2 &&
    peek ship >p && grep -q "^consumers 1 tokens 1 max 2 holder beta$" p &&
    rmdir beta/claims/ship
'

mcp_line() {
  printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' "$2" "$3" |
    timeout 60 "$FLEETFS" mcp "$TEST_DIR/$1"
}

test_expect_success 'MCP: fleet_claim, fleet_claims, fleet_release with the same meanings and errors' '
    mcp_line alpha fleet_claim "{\"name\":\"tool\",\"note\":\"via mcp\"}" >r &&
    test "$(jq -r .result.structuredContent.token r)" = 1 &&
    test "$(jq -r .result.structuredContent.note r)" = "via mcp" &&
    peek tool >p && grep -q "^consumers 1 tokens 1 max 1 holder alpha$" p &&
    mcp_line beta fleet_claim "{\"name\":\"tool\"}" >r &&
    test "$(jq -r .result.isError r)" = true && jq -r ".result.content[0].text" r | grep -q "held by another" &&
    wait_for 10 "mcp_line beta fleet_claims {} | jq -e \".result.structuredContent.claims[] | select(.name == \\\"tool\\\" and .holder == \\\"alpha\\\")\" >/dev/null" &&
    mcp_line beta fleet_release "{\"name\":\"tool\"}" >r &&
    test "$(jq -r .result.isError r)" = true && jq -r ".result.content[0].text" r | grep -q "only its holder" &&
    mcp_line alpha fleet_release "{\"name\":\"tool\"}" >r &&
    test "$(jq -r .result.structuredContent.released r)" = true &&
    peek tool >p && grep -q "^consumers 0 tokens 1 max 1 holder alpha$" p
'

test_expect_success 'beta (the holder) killed -9: the broker frees deploy, alpha takes it with token 3' '
    kill_fleet beta &&
    wait_for 15 "peek deploy | grep -q \"^consumers 0 \"" &&
    wait_for 10 "mkdir alpha/claims/deploy 2>/dev/null" &&
    peek deploy >p && grep -q "^consumers 1 tokens 1 max 3 holder alpha$" p &&
    test "$(holder_of alpha/claims/deploy/holder .token)" = 3
'

test_expect_success 'the lock deleted under its holder: the broker cancels the consumer, alpha is told it lost the claim' '
    mkdir alpha/claims/gone &&
    "$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/amqptry" "$URI" delete-queue fleet.claim.gone >out &&
    grep -q "^ok$" out &&
    wait_for 10 "grep -q \"claims: lost claim gone (token 1)\" alpha.log" &&
    wait_for 5 "test_must_fail test -d alpha/claims/gone"
'

test_expect_success 'bad names: EINVAL and a log line; nothing on the broker' '
    for n in Deploy "a b" -x .hidden "$(printf "x%.0s" $(seq 70))"; do
        test_must_fail mkdir "alpha/claims/$n" 2>err && grep -q "Invalid argument" err || exit 1
    done &&
    grep -q "claims: mkdir claims/Deploy refused (EINVAL)" alpha.log &&
    test_must_fail peek Deploy >/dev/null
'

test_expect_success 'an unmount releases: the broker shows no consumer on deploy after alpha unmounts' '
    unmount_fleet alpha &&
    wait_for 10 "peek deploy | grep -q \"^consumers 0 tokens 1 max 3 \""
'

test_done
