#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fault tests' oracle (faults.sh's reconcile) must be able to fail:
# fed the logs of a run in which one thing
# went wrong (a message lost, shown again, delivered twice, typed and acked,
# a refusal that lied, every write failed, a dead letter, a message left in
# the mailbox, a missing fleet.dlq, too many uncertain, a failed write
# after the fault, a rejected counter), it must say NOT OK; fed a clean run
# it must pass. No broker and no mount: rabbitmqctl's answer is stubbed.
# Runs in seconds (the first file of tests/faults/run).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
QUEUES=$'lead.beta.inbox 0\nfleet.dlq 0'
FAULT_SETTLE_S=0
broker_queues() { printf '%s\n' "$QUEUES"; }
_dlq_sample() { :; }
mkdir -p alpha beta/leads/beta

# clean: writes 1..3 ok and 4 refused (ECOMM); the reader read 1..3 in pass
# 1 and its acks of them succeeded
clean() {
    printf '1 ok\n2 ok\n3 ok\n4 ECOMM\n' >T.writes && echo alpha >T.from &&
    printf '1\tid1\tT 1\n1\tid2\tT 2\n1\tid3\tT 3\n' >beta.read &&
    printf '1\tid1\tok\n1\tid2\tok\n1\tid3\tok\n' >beta.acked &&
    : >beta/leads/beta/history && rm -f T.after herdr.jsonl &&
    echo "rejected: 0" >beta/status && echo "rejected: 0" >alpha/status
}
# caught WHY: reconcile must fail and say WHY
caught() {
    if reconcile T beta --min-ok 3 "${@:2}" >out 2>&1; then cat out; return 1; fi
    cat out && grep -q "NOT OK: .*$1" out
}

test_expect_success 'a clean run passes' '
    clean && reconcile T beta --min-ok 3 &&
    grep -q "^sent-ok 3, failed 1 (ECOMM 1), delivered 3 (acked 3, typed 0), duplicates 0, lost 0" T.reconciled
'
test_expect_success 'a successful write never consumed: lost' '
    clean && sed -i 3d beta.acked && caught "1 successful write(s) never consumed: 3"
'
test_expect_success 'read again after its ack succeeded: shown twice' '
    clean && printf "2\tid3\tT 3\n" >>beta.read && caught "shown in the inbox again"
'
test_expect_success 'the same write consumed under a second msgId: duplicate' '
    clean && printf "2\tid9\tT 3\n" >>beta.read && printf "2\tid9\tok\n" >>beta.acked &&
    caught "extra consumption"
'
test_expect_success 'typed into the pane and acked by the reader: duplicate' '
    clean && HERDR_LOG=$TEST_DIR/herdr.jsonl &&
    jq -cn "{text: \"[fleet message from alpha, msgId 0123456789abcdef0123456789abcdef]\nT 2\"}" >herdr.jsonl &&
    caught "extra consumption"
'
test_expect_success 'a write refused with ECOMM, ENOSPC, ENXIO or ENOBUFS that arrived: a refusal that lied' '
    for e in ECOMM ENOSPC ENXIO ENOBUFS; do
        clean && sed -i "s/^4 ECOMM/4 $e/" T.writes &&
        printf "2\tid4\tT 4\n" >>beta.read && printf "2\tid4\tok\n" >>beta.acked &&
        caught "failed with $e .* but arrived" || exit 1
    done
'
test_expect_success 'an ETIMEDOUT write that arrived once is fine, twice is not' '
    clean && sed -i "s/^4 ECOMM/4 ETIMEDOUT/" T.writes &&
    printf "2\tid4\tT 4\n" >>beta.read && printf "2\tid4\tok\n" >>beta.acked &&
    reconcile T beta --min-ok 3 && grep -q "arrived after ETIMEDOUT 1" T.reconciled &&
    printf "3\tid5\tT 4\n" >>beta.read && printf "3\tid5\tok\n" >>beta.acked &&
    caught "extra consumption"
'
test_expect_success 'every write failed: too few successful writes' '
    clean && printf "1 ECOMM\n2 ECOMM\n3 ECOMM\n4 ECOMM\n" >T.writes && : >beta.read && : >beta.acked &&
    caught "only 0 successful writes"
'
test_expect_success 'an errno SPEC section 5 does not name' '
    clean && sed -i "s/^4 ECOMM/4 EIO/" T.writes && caught "errno SPEC section 5 does not name"
'
test_expect_success 'uncertain: one within --uncertain 1 passes, beyond it fails' '
    clean && sed -i 3d beta.acked &&
    echo "{\"consumed\":\"uncertain\",\"body\":\"T 3\"}" >beta/leads/beta/history &&
    reconcile T beta --min-ok 3 --uncertain 1 && caught "1 uncertain, at most 0"
'
test_expect_success 'read, and its ack cut off by the kill (ECONNABORTED, ENOTCONN): uncertain, within --uncertain' '
    for e in ECONNABORTED ENOTCONN; do
        clean && sed -i "3s/ok$/$e/" beta.acked &&
        reconcile T beta --min-ok 3 --uncertain 1 && grep -q "lost 0, uncertain 1" T.reconciled &&
        caught "1 uncertain, at most 0" || exit 1
    done
'
test_expect_success 'one ack write cut off by the kill is one uncertain however many it carried; two are two' '
    clean && sed -i "s/ok$/ECONNABORTED/" beta.acked &&
    reconcile T beta --min-ok 3 --uncertain 1 && grep -q "lost 0, uncertain 3" T.reconciled &&
    printf "1 ok\n2 ok\n3 ok\n4 ok\n" >T.writes &&
    printf "2\tid4\tT 4\n" >>beta.read && printf "2\tid4\tENOTCONN\n" >>beta.acked &&
    caught "2 uncertain, at most 1" --uncertain 1 && grep -q "4 message(s)" out
'
test_expect_success 'an ack that failed otherwise (EIO) leaves the message lost' '
    clean && sed -i "3s/ok$/EIO/" beta.acked && caught "1 successful write(s) never consumed: 3" --uncertain 1
'
test_expect_success 'a write after the fault that failed' '
    clean && echo "4 ECOMM" >T.after && caught "after the fault 1 write(s) failed"
'
test_expect_success 'a dead letter, a message left in the mailbox, a missing fleet.dlq' '
    clean && QUEUES=$(printf "lead.beta.inbox 2\nfleet.dlq 1") &&
    caught "lead.beta.inbox in the broker holds 2" && grep -q "fleet.dlq holds 1" out &&
    QUEUES="lead.beta.inbox 0" && caught "fleet.dlq holds missing"
'
test_expect_success 'a rejected counter on either side' '
    clean && echo "rejected: 2" >alpha/status && caught "rejected: 2 in all"
'
test_done
