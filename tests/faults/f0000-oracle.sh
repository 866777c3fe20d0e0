#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The fault tests' oracle (faults.sh's reconcile) must be able to fail:
# fed the logs of a run in which one thing
# went wrong (a message lost, shown again, delivered twice, typed and acked,
# a refusal that lied, every write failed, a dead letter, a message left in
# the mailbox, a missing fleet.dlq, too many uncertain, a failed write
# after the fault, a rejected counter; and issue 36's holes: stream writes
# counted apart from after_fault's, an ETIMEDOUT write never consumed or
# more of them than faults, an uncertain the test's logs do not show in
# flight at a kill, a body with trailing junk, a second copy whose ack
# failed, a late duplicate, typed twice, acked twice, a stray, a missing
# mailbox queue or failed broker query, tags r1/r10; a dead letter of the
# sender left in its lead.<host>.dead, that queue missing, a sent entry
# dead-lettered beyond what fleet.dlq holds), it must say NOT OK;
# after_fault must not resend an ETIMEDOUT write the receiver consumed,
# nor any before its fate is known (consumed, or the mailbox empty);
# fed a clean run it must pass. No broker and no mount: rabbitmqctl's answer is stubbed.
# Runs in seconds (the first file of tests/faults/run).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
QUEUES=$'lead.beta.inbox 0\nfleet.dlq 0\nlead.alpha.dead 0'
FAULT_SETTLE_S=0
FAULT_LATE_S=0
broker_queues() { printf '%s\n' "$QUEUES"; }
_dlq_sample() { :; }
# what rawpub --take would find in fleet.dlq: DLQ_TAKEN's lines
_torn_copies() { printf '%s' "${DLQ_TAKEN:-}" | grep . >"$TEST_DIR/$1.dlq"; awk -F '\t' '$4 == "torn"' "$TEST_DIR/$1.dlq"; }
mkdir -p alpha beta/leads/beta

# clean: writes 1..3 ok and 4 refused (ECOMM); the reader read 1..3 in pass
# 1 and its acks of them succeeded
clean() {
    printf '1 ok\n2 ok\n3 ok\n4 ECOMM\n' >T.writes && echo alpha >T.from &&
    printf '1\tid1\tT 1\n1\tid2\tT 2\n1\tid3\tT 3\n' >beta.read &&
    printf '1\tid1\tok\n1\tid2\tok\n1\tid3\tok\n' >beta.acked &&
    : >beta/leads/beta/history && rm -f T.after T.resent T.kills herdr.jsonl .harness/torn &&
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
# typed_copy N [REST]: the fake herdr typed "T N" (REST: more of the body)
typed_copy() {
    HERDR_LOG=$TEST_DIR/herdr.jsonl &&
    jq -cn --arg b "T $1${2:-}" "{text: (\"[fleet message from alpha, msgId 0123456789abcdef0123456789abcdef]\n\" + \$b)}" >>herdr.jsonl
}

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
    echo "0 2 3" >T.kills &&
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
test_expect_success 'torn copies (a broker killed mid-write): counted apart, at most two a fault, each rejected' '
    clean && rm -f .harness/torn && TORN=$(printf "id9\t120\t40\ttorn\n") &&
    QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 1\nlead.alpha.dead 0") && echo "rejected: 1" >beta/status &&
    DLQ_TAKEN=$TORN reconcile T beta --min-ok 3 && grep -q "^torn copies 1" T.reconciled &&
    DLQ_TAKEN=$TORN && export DLQ_TAKEN &&
    rm -f .harness/torn && echo "rejected: 0" >beta/status && caught "rejected: 0 in all (want 1, 1 of them torn" &&
    rm -f .harness/torn && echo "rejected: 1" >alpha/status && echo "rejected: 1" >beta/status &&
    caught "rejected: 2 in all (want 1, 1 of them torn" &&
    rm -f .harness/torn && echo "rejected: 0" >alpha/status && echo "rejected: 2" >beta/status &&
    QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 2\nlead.alpha.dead 0") &&
    DLQ_TAKEN=$(printf "id9\t120\t40\ttorn\nid8\t120\t-1\twhole\n") && caught "fleet.dlq holds 2 (want 0, and 1 torn)" &&
    rm -f .harness/torn && echo "rejected: 3" >beta/status && QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 3\nlead.alpha.dead 0") &&
    DLQ_TAKEN=$(printf "a\t9\t4\ttorn\nb\t9\t4\ttorn\n-\t0\t-1\ttorn\n") && caught "3 torn copies, more than the 1 fault"
'
test_expect_success 'a rejected counter on either side' '
    clean && echo "rejected: 2" >alpha/status && caught "rejected: 2 in all"
'

# --- the holes of issue 36, each a case the oracle before it passed
test_expect_success '--min-ok counts the stream'"'"'s writes, not after_fault'"'"'s' '
    clean && printf "1 ECOMM\n2 ECOMM\n3 ok\n4 ECOMM\n5 ok\n6 ok\n7 ok\n" >T.writes &&
    printf "5 ok\n6 ok\n7 ok\n" >T.after &&
    printf "1\tid3\tT 3\n1\tid5\tT 5\n1\tid6\tT 6\n1\tid7\tT 7\n" >beta.read &&
    printf "1\tid3\tok\n1\tid5\tok\n1\tid6\tok\n1\tid7\tok\n" >beta.acked &&
    caught "only 1 successful writes of the stream"
'
test_expect_success 'an ETIMEDOUT write never consumed is lost (after_fault resent it by its msgId)' '
    clean && sed -i "s/^4 ECOMM/4 ETIMEDOUT 0123456789abcdef0123456789abcdef/" T.writes &&
    caught "never consumed: 4(ETIMEDOUT)"
'
test_expect_success 'after_fault resends every ETIMEDOUT write under its msgId (self/resend), one write each' '
    clean && mkdir -p alpha/leads/alpha && : >alpha/leads/alpha/resend &&
    printf "1 ok\n2 ETIMEDOUT 0123456789abcdef0123456789abcdef\n3 ok\n4 ETIMEDOUT -\n" >T.writes && echo done >T.done &&
    after_fault() { resend_timedout "$3"; } && after_fault alpha beta T &&
    unset -f after_fault && . "$FLEET_ROOT/tests/faults/faults.sh" &&
    echo 0123456789abcdef0123456789abcdef >want && test_cmp want alpha/leads/alpha/resend &&
    printf "2 ok\n4 no-msgId\n" >want && test_cmp want T.resent
'
test_expect_success 'after_fault resends no ETIMEDOUT write the receiver consumed (a second copy is a dead letter)' '
    clean && mkdir -p alpha/leads/alpha && : >alpha/leads/alpha/resend &&
    printf "1 ok\n2 ETIMEDOUT 0123456789abcdef0123456789abcdef\n3 ok\n4 ETIMEDOUT 4444444444444444444444444444444a\n" >T.writes &&
    resend_timedout T beta &&
    echo 4444444444444444444444444444444a >want && test_cmp want alpha/leads/alpha/resend &&
    printf "2 consumed\n4 ok\n" >want && test_cmp want T.resent
'
test_expect_success 'after_fault waits for the fate of an ETIMEDOUT write: consumed, or the mailbox empty at two looks' '
    clean && printf "1 ok\n2 ok\n3 ok\n4 ETIMEDOUT 0123456789abcdef0123456789abcdef\n" >T.writes &&
    QUEUES=$(printf "lead.beta.inbox 1\nfleet.dlq 0") &&
    FAULT_FATE_S=2 test_must_fail _fate_known T beta &&
    QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 0") && _fate_known T beta &&
    QUEUES=$(printf "lead.beta.inbox 1\nfleet.dlq 0") &&
    printf "2\tid4\tT 4\n" >>beta.read && printf "2\tid4\tok\n" >>beta.acked && _fate_known T beta
'
test_expect_success 'more ETIMEDOUT writes than the faults explain (one each)' '
    clean && printf "1 ok\n2 ETIMEDOUT a\n3 ok\n4 ETIMEDOUT b\n" >T.writes &&
    printf "1\tid4\tT 4\n" >>beta.read && printf "1\tid4\tok\n" >>beta.acked &&
    reconcile T beta --min-ok 2 --faults 2 &&
    caught "2 write(s) failed ETIMEDOUT, more than the 1 fault" --min-ok 2
'
test_expect_success 'uncertain in the history excuses only the message in flight at a kill, by the test'"'"'s own logs' '
    clean && sed -i 3d beta.acked &&
    echo "{\"consumed\":\"uncertain\",\"body\":\"T 3\"}" >beta/leads/beta/history &&
    caught "not the message in flight at a kill" --uncertain 1 &&
    echo "0 1 3" >T.kills && caught "not the message in flight at a kill" --uncertain 1 &&
    echo "0 2 3" >T.kills && reconcile T beta --min-ok 3 --uncertain 1 && grep -q "lost 0, uncertain 1" T.reconciled
'
test_expect_success 'a body is matched whole: trailing junk is not message 3 (read or typed)' '
    clean && sed -i "3s/T 3$/T 3 junk/" beta.read && caught "never consumed: 3" &&
    grep -q "1 consumed message(s) that no write sent" out &&
    clean && sed -i 3d beta.acked && typed_copy 3 "
and more" && caught "never consumed: 3"
'
test_expect_success 'a second copy shown under another msgId whose ack failed is shown twice' '
    clean && printf "2\tid9\tT 3\n" >>beta.read && printf "2\tid9\tENOENT\n" >>beta.acked &&
    caught "shown in the inbox again"
'
test_expect_success 'a duplicate that arrives after the settle window is looked for again' '
    clean && _late_look() { printf "3\tid8\tT 2\n" >>beta.read; printf "3\tid8\tok\n" >>beta.acked; } &&
    caught "seen only in the look after the settle window"; rc=$?
    _late_look() { :; }; return $rc
'
test_expect_success 'typed twice' '
    clean && sed -i 2d beta.acked && typed_copy 2 && typed_copy 2 && caught "extra consumption"
'
test_expect_success 'one msgId acked twice' '
    clean && printf "2\tid2\tok\n" >>beta.acked && caught "extra consumption"
'
test_expect_success 'a stray: consumed, but no write sent it' '
    clean && printf "2\tid9\tT 9\n" >>beta.read && printf "2\tid9\tok\n" >>beta.acked &&
    caught "1 consumed message(s) that no write sent"
'
test_expect_success 'a successful write after the fault never consumed' '
    clean && echo "5 ok" >>T.writes && echo "5 ok" >T.after && caught "after the fault 0 write(s) failed and 1 were not consumed"
'
test_expect_success 'the mailbox queue missing; the broker query failing' '
    clean && QUEUES="fleet.dlq 0" && caught "lead.beta.inbox in the broker holds missing" &&
    broker_queues() { return 1; } && caught "queue counts could not be read"; rc=$?
    broker_queues() { printf "%s\n" "$QUEUES"; }; QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 0\nlead.alpha.dead 0"); return $rc
'
# --- dead letters home (issue 36 part 3): the sender takes its own
test_expect_success 'dead letters home: one left in lead.alpha.dead, that queue missing, a sent entry dead-lettered beyond fleet.dlq' '
    clean && QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 0\nlead.alpha.dead 1") &&
    caught "lead.alpha.dead in the broker holds 1" &&
    QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 0") && caught "lead.alpha.dead in the broker holds missing" &&
    QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 0\nlead.alpha.dead 0") &&
    mkdir -p alpha/leads/alpha && echo "{\"msgId\":\"x\",\"state\":\"dead-lettered\"}" >alpha/leads/alpha/sent &&
    caught "1 of alpha.s sent entries say dead-lettered, but fleet.dlq holds 0"; rc=$?
    rm -f alpha/leads/alpha/sent; return $rc
'
test_expect_success 'streams r1 and r10: neither counts the other'"'"'s messages' '
    clean && printf "1 ok\n2 ok\n" >Tr1.writes && printf "1 ok\n2 ok\n" >Tr10.writes && echo alpha >Tr1.from && echo alpha >Tr10.from &&
    printf "1\ta1\tTr1 1\n1\ta2\tTr10 1\n1\ta3\tTr10 2\n" >beta.read && printf "1\ta1\tok\n1\ta2\tok\n1\ta3\tok\n" >beta.acked &&
    reconcile Tr10 beta --min-ok 2 && grep -q "delivered 2 (acked 2" Tr10.reconciled &&
    ! reconcile Tr1 beta --min-ok 1 && grep -q "delivered 1 (acked 1" Tr1.reconciled && grep -q "never consumed: 2$" Tr1.reconciled
'
# --- fates at the edges (issue 43): each sender's sent against what an observer saw
I1=00000000000000000000000000000001 I2=00000000000000000000000000000002 I3=00000000000000000000000000000003
I4=00000000000000000000000000000004 I5=00000000000000000000000000000005 I6=00000000000000000000000000000006
# fclean: alpha sent beta six messages: I1 acked by the reader, I2 typed,
# I3 read and never acked then expired, I4 and I5 never seen (dead-lettered,
# expired unread), I6 an ask refused at once (exit 5 in 800 ms); one to
# gamma, dead-lettered, is not beta's
fclean() {
    mkdir -p alpha/leads/alpha .harness && rm -f F.asks && HERDR_LOG=$TEST_DIR/herdr.jsonl &&
    {
        echo "{\"msgId\":\"$I1\",\"to\":\"beta\",\"state\":\"acked\"}"
        echo "{\"msgId\":\"$I2\",\"to\":\"beta\",\"state\":\"injected\",\"detail\":\"typed into agent beta\"}"
        echo "{\"msgId\":\"$I3\",\"to\":\"beta\",\"state\":\"expired\",\"detail\":\"shown, then expired: a reader of beta inbox read it\"}"
        echo "{\"msgId\":\"$I4\",\"to\":\"beta\",\"state\":\"dead-lettered\",\"detail\":\"expired in lead.beta.inbox\"}"
        echo "{\"msgId\":\"$I5\",\"to\":\"beta\",\"state\":\"expired\",\"detail\":\"dropped unread by beta\"}"
        echo "{\"msgId\":\"$I6\",\"to\":\"beta\",\"state\":\"dead-lettered\",\"detail\":\"rejected by the reader of lead.beta.inbox\"}"
        echo "{\"msgId\":\"$I5\",\"to\":\"gamma\",\"state\":\"dead-lettered\"}"
    } >alpha/leads/alpha/sent &&
    printf "1\t$I1\tF 1\n1\t$I3\tF 3\n" >beta.read && printf "1\t$I1\tok\n" >beta.acked &&
    jq -cn --arg t "[fleet message from alpha, msgId $I2]
F 2" "{text: \$t}" >herdr.jsonl &&
    echo "$I6 5 800" >F.asks &&
    QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 2\nlead.alpha.dead 0")
}
# fcaught WHY [ARG]: fates must fail and say WHY
fcaught() {
    if fates F alpha beta ${2:-} >out 2>&1; then cat out; return 1; fi
    cat out && grep -q "NOT OK: .*$1" out
}
test_expect_success 'fates: a clean run passes, each outcome counted from the observers' '
    fclean && fates F alpha beta &&
    grep -qx "fates alpha -> beta: 6 sent; acked 1, typed 1 (injected 1, confirmed 0, uncertain 0), shown-then-expired 1, unseen 3 (expired 1, dead-lettered 2, rejected 0, uncertain 0); asks 1 (refused at once 1); disagreements 0" F.fates
'
test_expect_success 'fates: read by the reader, then receipted "dropped unread"' '
    fclean && sed -i "s/shown, then expired: a reader of beta inbox read it/dropped unread by beta/" alpha/leads/alpha/sent &&
    fcaught "$I3: alpha.s sent says expired (dropped unread by beta), but beta.s reader read it"
'
test_expect_success 'fates: a refused duplicate told as a death (acked by the reader, sent says dead-lettered)' '
    fclean && sed -i "s/\"$I1\",\"to\":\"beta\",\"state\":\"acked\"/\"$I1\",\"to\":\"beta\",\"state\":\"dead-lettered\"/" alpha/leads/alpha/sent &&
    fcaught "$I1: alpha.s sent says dead-lettered .*its ack by beta.s reader succeeded"
'
test_expect_success 'fates: typed, then the receiver crashed and the message expired: never dead-lettered or expired' '
    for st in dead-lettered expired; do
        fclean && sed -i "s/\"$I2\",\"to\":\"beta\",\"state\":\"injected\"/\"$I2\",\"to\":\"beta\",\"state\":\"$st\"/" alpha/leads/alpha/sent &&
        fcaught "$I2: alpha.s sent says $st .*the fake herdr typed it" || return 1
    done
'
test_expect_success 'fates: uncertain with nothing typed only when the receiver was killed' '
    fclean && sed -i "s/\"$I4\",\"to\":\"beta\",\"state\":\"dead-lettered\"/\"$I4\",\"to\":\"beta\",\"state\":\"uncertain\"/" alpha/leads/alpha/sent &&
    fcaught "$I4: alpha.s sent says uncertain" &&
    fates F alpha beta --killed && grep -q "unseen 3 (expired 1, dead-lettered 1, rejected 0, uncertain 1)" F.fates
'
test_expect_success 'fates: an ask refused but waited out (exit 4 after its whole lifetime)' '
    fclean && echo "$I6 4 60800" >F.asks && fcaught "ask $I6: refused (dead-lettered) but the ask ended with exit 4 after 60800 ms"
'
test_expect_success 'fates: told consumed with no observer; a state short of a fate' '
    fclean && sed -i "s/\"$I5\",\"to\":\"beta\",\"state\":\"expired\"/\"$I5\",\"to\":\"beta\",\"state\":\"acked\"/" alpha/leads/alpha/sent &&
    fcaught "$I5: alpha.s sent says acked .*no observer saw it" &&
    fclean && sed -i "s/\"$I5\",\"to\":\"beta\",\"state\":\"expired\"/\"$I5\",\"to\":\"beta\",\"state\":\"published\"/" alpha/leads/alpha/sent &&
    fcaught "$I5: alpha.s sent says published"
'
test_expect_success 'fates: dead-lettered beyond what fleet.dlq holds, or fleet.dlq missing' '
    fclean && QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 1") &&
    fcaught "2 of alpha.s sent entries to beta say dead-lettered, but fleet.dlq holds 1" &&
    QUEUES=$(printf "lead.beta.inbox 0") && fcaught "but fleet.dlq holds nothing" &&
    broker_queues() { return 1; } && fcaught "queue counts could not be read"; rc=$?
    broker_queues() { printf "%s\n" "$QUEUES"; }; QUEUES=$(printf "lead.beta.inbox 0\nfleet.dlq 0\nlead.alpha.dead 0"); return $rc
'

test_done
