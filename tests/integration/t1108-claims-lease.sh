#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The lease lifetime of a claim (doc/claims.md, "A lease lifetime"): a
# claim taken with a lease (fleetfs claim --lease, or a write of
# claims/NAME/lease) stays held while it is renewed within that time, and
# is given up by its holder when nobody renewed it: the log line, the
# listing on both hosts, the broker's lock free (claimpeek), the next
# take the next token; an agent's lease that runs out is told to the
# agent in its inbox; bad leases and another's renewal are refused.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1108
new_vhost $FLEET_VHOST
PEEK=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/claimpeek
[[ $FLEETFS_BUILD == /* ]] && PEEK=$FLEETFS_BUILD/tools/claimpeek
URI=$(broker_uri $FLEET_VHOST)
peek() { "$PEEK" "$URI" "$1"; }
W1=alpha/agents/w1@alpha

test_expect_success 'alpha (with agent w1) and beta; alpha takes deploy with a lease of 5 s' '
    mount_fleet alpha peers=beta inject=none agents=w1 &&
    mount_fleet beta peers=alpha inject=none &&
    wait_for 10 "grep -q \"claims: connected\" alpha.log && grep -q \"claims: connected\" beta.log" &&
    "$FLEETFS" claim "$TEST_DIR/alpha" deploy --lease 5 >tok && echo 1 >want && test_cmp want tok &&
    jq -e ".lease == 5 and (.leaseEnds | type) == \"string\" and .mine" alpha/claims/deploy/holder &&
    wait_for 10 "jq -e \".lease == 5\" beta/claims/deploy/holder"
'

test_expect_success 'bad leases are EINVAL; beta cannot renew it (EPERM)' '
    test_must_fail bash -c "echo 0 >alpha/claims/deploy/lease" 2>err && grep -q "Invalid argument" err &&
    test_must_fail bash -c "echo soon >alpha/claims/deploy/lease" 2>err && grep -q "Invalid argument" err &&
    test_must_fail bash -c "echo 2d >alpha/claims/deploy/lease" 2>err && grep -q "Invalid argument" err &&
    test_must_fail bash -c "echo 5 >beta/claims/deploy/lease" 2>err &&
    grep -q "Operation not permitted" err
'

test_expect_success 'renewed every second for 8 s (the lease is 5 s): still held, same token' '
    for i in 1 2 3 4 5 6 7 8; do
        sleep 1 && echo 5s >alpha/claims/deploy/lease || return 1
    done &&
    "$FLEETFS" claim "$TEST_DIR/alpha" deploy --lease 5 >tok && test_cmp want tok &&
    peek deploy | grep -qx "consumers 1 tokens 1 max 1 holder alpha" &&
    ! grep -q "lost claim deploy" alpha.log
'

test_expect_success 'nobody renews it: alpha gives it up (log line), both listings drop it, beta takes token 2' '
    wait_for 20 "grep -q \"claims: lost claim deploy (token 1): its lease of 5000 ms ran out without a renewal\" alpha.log" &&
    peek deploy | grep -q "^consumers 0 " &&
    test_must_fail test -d alpha/claims/deploy &&
    wait_for 10 "test_must_fail test -d beta/claims/deploy" &&
    mkdir beta/claims/deploy &&
    peek deploy | grep -qx "consumers 1 tokens 1 max 2 holder beta" &&
    jq -e ".lease == null" beta/claims/deploy/holder
'

test_expect_success 'w1 takes build with a lease of 2 s and does not renew it: w1 is told once in its inbox' '
    mkdir $W1/claims/build && echo 2 >$W1/claims/build/lease &&
    wait_for 20 "grep -q \"claims: lost claim build (token 1, taken by w1@alpha): its lease of 2000 ms ran out\" alpha.log" &&
    wait_for 10 "test \$(grep -c \"claim build (token 1) is no longer yours: its lease of 2000 ms ran out\" $W1/inbox) = 1" &&
    peek build | grep -q "^consumers 0 "
'

test_done
