#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fates at the edges (issue 43), counted by the oracle (faults.sh's fates)
# from what observers saw, against what alpha's sent says, through real
# mounts in seconds:
#   - shown, then expired: delta's reader reads three messages (5 s
#     lifetimes) and never acks; a second copy of the first (same msgId,
#     signed with alpha's key: the safe resend) reaches delta while the
#     first is held and is refused as a duplicate, not a death;
#   - crash while typing, back after expiry: beta is killed -9 while the
#     fake herdr hangs on the prompt (a 20 s lifetime: it is typed after
#     the first one's turn hold), and mounted again after the message's
#     expiresAt; plus one typed normally;
#   - an ask refused at once: carol does not trust alpha's key; `fleetfs
#     ask --timeout 60s` must end with exit 5 within seconds.
# fates then finds for delta: shown-then-expired 3, no dead letter; for
# beta: typed 2 (one uncertain), nothing dead-lettered or expired; for
# carol: the ask refused at once.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/herdr.sh"
. "$FLEET_ROOT/tests/faults/faults.sh"
broker_start_own
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD

AGENT='{"pane_id":"w1:p2","workspace_id":"w1","tab_id":"w1:t1","agent":"claude","name":"beta","agent_status":"idle"}'
herdr_state "{\"version\":\"0.8.2\",\"protocol\":20,\"panes\":[$AGENT],\"after_prompt_status\":\"idle\"}"
field() { jq -r "select(.msgId == \"$1\") | .$2 // empty" alpha/leads/alpha/sent; }
past_expiry() { test "$(date +%s%N)" -gt "$(date -d "$(field "$1" expiresAt)" +%s%N)"; }
# sendx TO BODY SECONDS: alpha sends BODY to TO with that lifetime; prints its msgId
sendx() {
    echo "{\"body\":\"$2\",\"expiresIn\":\"$3s\"}" >alpha/peers/$1/send.json &&
        tail -n1 alpha/leads/alpha/sent | jq -r .msgId
}
# final TO: every entry of alpha's sent to TO has a fate
final() {
    ! jq -e --arg to "$1" 'select(.to == $to) | select(.state == "unconfirmed" or .state == "published" or .state == "published-unread")' \
        alpha/leads/alpha/sent >/dev/null
}

test_expect_success 'alpha, beta (types through herdr), delta (a reader that only reads), carol (does not trust alpha)' '
    herdr_start &&
    mount_fleet alpha peers=beta:carol:delta inject=none &&
    mount_fleet beta peers=alpha inject=herdr &&
    mount_fleet delta peers=alpha inject=none &&
    fleet_key carol && mkdir -p trust.carol &&
    mount_fleet carol peers=alpha inject=none key="$TEST_DIR/keys/carol.key" trusted_keys="$TEST_DIR/trust.carol" &&
    wait_for 10 "grep -qx \"dead_letters: ok\" alpha/status" &&
    wait_for 5 "grep -q \"^injector: ready\" beta/leads/beta/status"
'

test_expect_success 'shown, then expired; a second copy of one while it is held is a duplicate' '
    reader_start delta 0.2 show &&
    for i in 1 2 3; do sendx delta "F $i" 5 >>delta.ids || return 1; done &&
    wait_for 10 "test \$(cut -f2 delta.read | sort -u | wc -l) = 3" &&
    "$BIN/tools/rawpub" "$(broker_uri)" lead.delta.inbox --sign "$TEST_DIR/keys/alpha.key" --from alpha \
        --to delta --msgid "$(head -n1 delta.ids)" --text "F 1" >/dev/null &&
    wait_for 10 "grep -q \"^rejected_duplicate: 1$\" delta/status" &&
    wait_for 30 "final delta" &&
    reader_stop delta
'

test_expect_success 'typed once; then killed while typing, back after expiry' '
    id=$(sendx beta "typed plainly" 30) &&
    wait_for 10 "test \$(prompts) = 1" &&
    herdr_set ".behaviour.prompt=\"slow:60000\"" &&
    id=$(sendx beta "caught mid-typing" 20) &&
    wait_for 20 "test \$(prompts) = 2" &&
    kill_fleet beta &&
    herdr_set "del(.behaviour)" &&
    wait_for 40 "past_expiry $id && test \"\$(broker_count lead.beta.inbox)\" = 0" &&
    mount_fleet beta peers=alpha inject=herdr &&
    wait_for 30 "final beta && test \"\$(field $id state)\" != dead-lettered" &&
    test "$(prompts)" = 2
'

test_expect_success 'an ask carol refuses ends at once' '
    ask_timed Fc alpha carol 60s "do you trust me?" &&
    wait_for 10 "final carol"
'

test_expect_success 'the oracle: each sender'"'"'s sent against what the observers saw' '
    fates Fd alpha delta &&
    grep -q "shown-then-expired 3, unseen 0 .*disagreements 0" Fd.fates &&
    fates Fb alpha beta --killed &&
    grep -q "typed 2 (injected [0-9], confirmed [0-9], uncertain 1).*disagreements 0" Fb.fates &&
    fates Fc alpha carol &&
    grep -q "asks 1 (refused at once 1); disagreements 0" Fc.fates
'
cat "$TEST_DIR"/F[dbc].fates 2>/dev/null | sed "s/^/# f1300: /"

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet delta && unmount_fleet carol
'

test_done
