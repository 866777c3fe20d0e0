#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A mount holds at most 1000 claims (one channel each, doc/claims.md): the
# 1001st mkdir fails ENOSPC with a log line and nothing more is held on
# the broker; after a release the next take works. The broker's count of
# held locks is rabbitmqctl's (consumers per queue), never fleetfs's word.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1105
new_vhost $FLEET_VHOST
held_locks() {
  rmqctl list_queues -q -p $FLEET_VHOST name consumers |
    awk '$1 ~ /^fleet\.claim\./ && $2 == 1' | wc -l
}

test_expect_success 'alpha takes 1000 claims: the broker shows 1000 locks held' '
    mount_fleet alpha &&
    wait_for 10 "grep -q \"claims: connected\" alpha.log" &&
    for i in $(seq 1000); do mkdir alpha/claims/c$i || exit 1; done &&
    test "$(held_locks)" = 1000
'

test_expect_success 'the 1001st: ENOSPC and a log line, nothing more held; a release makes room' '
    test_must_fail mkdir alpha/claims/one-more 2>err &&
    grep -q "No space left on device" err &&
    grep -q "claims: mkdir claims/one-more failed (ENOSPC)" alpha.log &&
    test "$(held_locks)" = 1000 &&
    rmdir alpha/claims/c1 &&
    mkdir alpha/claims/one-more &&
    test "$(held_locks)" = 1000
'

test_done
