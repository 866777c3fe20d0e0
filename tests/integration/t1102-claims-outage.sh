#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Claims when the broker goes (doc/claims.md): its own private broker. The
# broker killed: the holder is told it lost its claim (log line,
# claims/NAME gone), a mkdir fails ENOTCONN with a log line, nothing is
# re-taken behind anyone's back after the restart, and the token survives
# the broker's kill -9 (durable, confirmed). The broker frozen (no answer,
# no FIN): the holder gives its claims up within the grace, before the
# broker could hand them to another. What the broker holds is read by
# tests/tools/claimpeek, never from fleetfs.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own
FLEET_VHOST=t1102
new_vhost $FLEET_VHOST
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
[[ ${FLEETFS_BUILD:-build} == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek
URI=$(broker_uri $FLEET_VHOST)
peek() { "$PEEK" "$URI" "$1"; }

test_expect_success 'alpha takes deploy (token 1), beta mounted too' '
    mount_fleet alpha &&
    mount_fleet beta &&
    wait_for 10 "mkdir alpha/claims/deploy 2>/dev/null" &&
    peek deploy >p && grep -q "^consumers 1 tokens 1 max 1 holder alpha$" p &&
    wait_for 10 "grep -q \"claims: connected\" beta.log"
'

test_expect_success 'the broker killed: alpha is told it lost deploy, claims/deploy goes; mkdir is ENOTCONN with a log line' '
    broker_kill &&
    wait_for 20 "grep -q \"claims: lost claim deploy (token 1)\" alpha.log" &&
    wait_for 5 "test_must_fail test -d alpha/claims/deploy" &&
    test_must_fail mkdir alpha/claims/other 2>err &&
    grep -q "Transport endpoint is not connected" err &&
    grep -q "claims: mkdir claims/other failed (ENOTCONN)" alpha.log
'

test_expect_success 'the broker back: deploy was not re-taken; beta takes it with token 2 (the token outlived the kill -9)' '
    broker_restart &&
    wait_for 30 "test \$(grep -c \"claims: connected\" alpha.log) -ge 2" &&
    wait_for 30 "test \$(grep -c \"claims: connected\" beta.log) -ge 2" &&
    peek deploy >p && grep -q "^consumers 0 tokens 1 max 1 holder alpha$" p &&
    wait_for 10 "mkdir beta/claims/deploy 2>/dev/null" &&
    peek deploy >p && grep -q "^consumers 1 tokens 1 max 2 holder beta$" p &&
    wait_for 10 "test \"\$(jq -r .holder alpha/claims/deploy/holder 2>/dev/null)\" = beta"
'

test_expect_success 'the broker frozen: beta gives deploy up within the grace, the broker frees it once back, alpha takes token 3' '
    t0=$(_test_now) &&
    broker_freeze &&
    wait_for 20 "grep -q \"claims: lost claim deploy (token 2)\" beta.log" &&
    t1=$(_test_now) &&
    test_must_fail test -d beta/claims/deploy &&
    broker_thaw &&
    wait_for 30 "peek deploy | grep -q \"^consumers 0 \"" &&
    wait_for 30 "mkdir alpha/claims/deploy 2>/dev/null" &&
    peek deploy >p && grep -q "^consumers 1 tokens 1 max 3 holder alpha$" p &&
    echo "# broker frozen at 0: beta gave deploy up at $(((t1 - t0) / 1000)) ms" >>measured
'

[[ -s measured ]] && cat measured
test_done
