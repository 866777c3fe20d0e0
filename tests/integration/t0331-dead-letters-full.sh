#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dead-letter reader's cap (issue 43 item 7, "the dead-letter reader's
# 10 000 cap dropping the head silently"). lead.X.dead holds at most 10000
# dead letters (fleet.dlq's arguments, doc/protocol.md section 4) and the
# broker then drops the oldest. shorty (message_ttl=4s) sends a message
# nobody reads and goes offline; the broker dead-letters it into
# lead.shorty.dead; then 10000 more copies (signed, but not shorty's
# messages) arrive there, so the broker drops the head: shorty's own dead
# letter. When shorty comes back it must say so: a warning in its log with
# what it means and what to do, and a count in its status (the code before
# it said nothing: it read 10000 foreign letters and its sent entry simply
# ended `expired` by its own clock). The sent entry ends `expired` by the
# sender's clock, never `dead-lettered` (its letter is gone), as the docs
# say; the broker's own count shows lead.shorty.dead emptied.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0331
new_vhost $FLEET_VHOST
BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
RAWPUB=$BIN/tools/rawpub
URI=$(broker_uri $FLEET_VHOST)
status_of() { sed -n "s/^$2: //p" "$1/status"; }
sent_of() { jq -r "select(.msgId == \"$1\") | .$2 // empty" shorty/leads/shorty/sent; }

test_expect_success 'shorty sends a message nobody reads and goes offline; it dies into lead.shorty.dead' '
    mount_fleet shorty peers=nobody inject=none message_ttl=4s &&
    wait_for 10 "grep -qx \"dead_letters: ok\" shorty/status" &&
    echo "nobody reads this" >shorty/peers/nobody/send &&
    last_sent_id shorty >id &&
    unmount_fleet shorty &&
    wait_for 20 "n=\$(broker_count lead.shorty.dead) && test \"\$n\" = 1"
'

test_expect_success 'ten thousand more dead letters: the broker drops the head (shorty'\''s own)' '
    "$RAWPUB" "$URI" lead.shorty.dead --sign "$TEST_DIR/keys/shorty.key" --from shorty \
        --to nobody --text "filler" --count 10000 >/dev/null &&
    n=$(broker_count lead.shorty.dead) && test "$n" = 10000
'

test_expect_success 'shorty comes back: its log and status say the queue was full, and what it means' '
    mount_fleet shorty peers=nobody inject=none message_ttl=4s &&
    wait_for 30 "n=\$(broker_count lead.shorty.dead) && test \"\$n\" = 0" &&
    wait_for 10 "test \"\$(status_of shorty dead_letters_foreign)\" = 10000" &&
    grep -q "dead letters: lead.shorty.dead held 10000 dead letters when consuming began, its cap" shorty.log &&
    test "$(grep -c "lead.shorty.dead held 10000 dead letters" shorty.log)" = 1 &&
    grep -qx "dead_letters: ok; found full (10000) 1 time: older dead letters may have been dropped by the broker" shorty/status
'

test_expect_success 'its message ends expired by its own clock, not dead-lettered' '
    { wait_for 20 "test \"\$(sent_of $(cat id) state)\" = expired" || { cat shorty/leads/shorty/sent; false; }; } &&
    test "$(sent_of $(cat id) expiredBy)" = sender
'

test_expect_success 'unmount cleanly' '
    unmount_fleet shorty
'

test_done
