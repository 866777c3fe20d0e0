#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `fleetfs mcp` when the broker does not confirm: fleet_send returns within
# its bound with isError, says ETIMEDOUT (may or may not be there, never
# send anew) and gives the msgId; resending that msgId through the file
# gets it to beta exactly once. Uses its own broker: it freezes it, then
# kills it, so the publish is lost for sure (as t0730 does).
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only (t0940 runs the MCP server under ASan; this one restarts a broker)" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
broker_start_own

. "$FLEET_ROOT/tests/mcp.sh"
SDK_DIR=$MCP_SDK_DIR

# probe_timeout=30s: alpha's status probes (on its consuming connection, one
# a second) would otherwise time out 2 s into the freeze and drop both its
# connections, failing the send ECOMM (truly: nothing was published yet) if
# that comes before the send's own 2 s deadline, which a slow node start
# decides. The subject here is the send that timed out.
test_expect_success 'the SDK client (installed here too: with FLEET_TEST_JOBS this file may run before t0940); alpha and beta mount' '
    mcp_sdk_install &&
    mount_fleet alpha peers=beta inject=none send_timeout=2s probe_timeout=30s &&
    mount_fleet beta peers=alpha inject=none
'

test_expect_success 'a send into a frozen broker: isError, ETIMEDOUT, and the msgId to resend' '
    broker_freeze &&
    { timeout 60 node "$SDK_DIR/mcp_client.mjs" "$FLEETFS" "$TEST_DIR/alpha" call fleet_send \
        "{\"to\":\"beta\",\"body\":\"lost in the freeze\"}" >r; rc=$?; } &&
    broker_kill && broker_restart &&
    test $rc = 0 &&
    jq -e ".isError == true" r &&
    jq -r .text r >text &&
    grep "ETIMEDOUT" text &&
    grep "Never send the text anew" text &&
    id=$(sed -n "s/.*Its msgId: \([0-9a-f]\{32\}\).*/\1/p" text) &&
    test ${#id} = 32 &&
    wait_for 30 "grep -q \"^broker: connected\" alpha/status" &&
    wait_for 30 "grep -q \"^broker: connected\" beta/status" &&
    grep $id alpha/leads/alpha/sent | jq -e ".state == \"unconfirmed\"" &&
    echo $id >lost.id
'

test_expect_success 'fleet_resend of that msgId: beta holds it once; a second resend is refused, nothing sent' '
    id=$(cat lost.id) &&
    timeout 60 node "$SDK_DIR/mcp_client.mjs" "$FLEETFS" "$TEST_DIR/alpha" call fleet_resend \
        "{\"msgId\":\"$id\"}" >r &&
    jq -e ".isError == false and .structured.resent == true and .structured.msgId == \"$id\"" r &&
    wait_for 10 "grep -q $id beta/leads/beta/inbox" &&
    test "$(grep -c $id beta/leads/beta/inbox)" = 1 &&
    wait_for 10 "test \"\$(grep $id alpha/leads/alpha/sent | jq -r .state)\" != unconfirmed" &&
    timeout 60 node "$SDK_DIR/mcp_client.mjs" "$FLEETFS" "$TEST_DIR/alpha" call fleet_resend \
        "{\"msgId\":\"$id\"}" fleet_resend "{\"msgId\":\"0123456789abcdef0123456789abcdef\"}" >r2 &&
    sed -n 1p r2 | jq -e ".isError == true" &&
    sed -n 1p r2 | jq -r .text | grep "not unconfirmed, so there is nothing to resend" &&
    sed -n 2p r2 | jq -e ".isError == true" &&
    sed -n 2p r2 | jq -r .text | grep "no message 0123456789abcdef0123456789abcdef in your sent log" &&
    test "$(grep -c $id beta/leads/beta/inbox)" = 1
'

test_done
