#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Presence linear by default (issue 44 item 3; doc/presence.md "Whom a host
# hears", doc/scaling.md "Fourth pass"): fleet_view=auto, the default,
# hears the whole fleet (roster.#) while it hears at most view_limit leads;
# one more and it narrows, for the life of the mount, to what
# fleet_view=groups hears (its groups, its configured peers, the leads it
# addresses, and its own heartbeat every sixth beat through the s= word):
# the broker's own bindings say so. A lead out of view is still found by
# name (peers/<id>, hosts/<h>, agents/<gid>); a census (a write to census)
# hears the whole fleet once, rate-bounded by census_every, and lists it
# in the census file without adding anyone to peers/.
# Heartbeats every second here (-o heartbeat=1s).
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t1004
new_vhost $FLEET_VHOST

HB=heartbeat=1s
live() { presence_of "$1" "$2" | grep -q "^live ("; }
# the names in MOUNT/DIR, one line (ls: a lookup by name would address)
names_in() { ls "$1/$2" | tr '\n' ' '; }
ids_of() { jq -r .coord_id "$1" | tr '\n' ' '; }
took() { echo "$1: $(($(now_ms) - $2)) ms" | tee -a "$TEST_DIR/times"; }

test_expect_success 'the default is auto: a small fleet is heard whole, roster.# bound' '
    mount_fleet b inject=none $HB &&
    mount_fleet c inject=none $HB &&
    mount_fleet d inject=none agents=w1 $HB &&
    wait_for 10 "live b c && live b d && live c d" &&
    test_eq "peers_of b" "$(names_in b peers)" "c d " &&
    grep -q "^fleet_view: auto (the whole fleet: 2 lead(s) heard live, view_limit 100)$" b/status &&
    grep -q "^census: none yet" b/status &&
    roster_bindings_of b >got &&
    printf "%s\n" ask.b "roster.#" "roster.#.s=b.#" | sort >want &&
    test_cmp want got
'

test_expect_success 'hearing more than view_limit narrows: one log line, the peer stays, roster.# goes' '
    mount_fleet a inject=none peers=b view_limit=2 $HB &&
    wait_for 10 "grep -q \"more than view_limit=2 (fleet_view=auto)\" a.log" &&
    test $(grep -c "more than view_limit" a.log) = 1 &&
    grep "more than view_limit" a.log | grep -q "leads heard live" &&
    ! grep -q "out of view" a.log &&
    wait_for 5 "test \"\$(names_in a peers)\" = \"b \"" &&
    test_eq "hosts of a" "$(names_in a hosts)" "a b " &&
    test_eq "roster of a" "$(ids_of a/roster)" "a b " &&
    grep -q "^fleet_view: auto (narrowed at .*: 3 leads heard, more than view_limit 2; now hearing 0 group(s), 1 lead(s) configured or addressed" a/status &&
    wait_for 5 "roster_bindings_of a | grep -vqx \"roster.#\" && ! roster_bindings_of a | grep -qx \"roster.#\"" &&
    roster_bindings_of a >got &&
    printf "%s\n" ask.a "roster.#.b" "roster.#.s=a.#" | sort >want &&
    test_cmp want got &&
    wait_for 5 "live a b"
'

# its own heartbeats come back only through roster.#.s=a.#: one in six
# (every 6 s here), so its own line's age climbs past 3 s and falls to 0
test_expect_success 'its own line stays live on the s= word alone (every sixth heartbeat)' '
    sleep 3 &&
    for i in $(seq 16); do
        jq -r "select(.self) | [.ageSeconds, .presence] | @tsv" a/roster >>ages || exit 1
        sleep 0.5
    done &&
    cat ages &&
    ! grep -qv "	live$" ages &&
    test "$(cut -f1 ages | sort -n | head -n 1)" -le 1 &&
    test "$(cut -f1 ages | sort -n | tail -n 1)" -ge 3
'

test_expect_success 'a lead out of view is found by name: peers/c, hosts/d, agents/w1@d' '
    t0=$(now_ms) &&
    test -d a/hosts/d &&
    took "hosts/d" $t0 &&
    t0=$(now_ms) &&
    test -d a/peers/c &&
    took "peers/c" $t0 &&
    wait_for 5 "live a c" &&
    test_eq "peers of a" "$(names_in a peers)" "b c d " &&
    test_must_fail stat a/hosts/nobody 2>err &&
    grep -q "No such file" err &&
    test_must_fail stat a/agents/w9@d 2>err &&
    grep -q "No such file" err
'

test_expect_success 'an agent of a host out of view is found by name too' '
    mount_fleet e inject=none agents=w2 $HB &&
    sleep 2 &&
    test_eq "peers of a" "$(names_in a peers)" "b c d " &&
    t0=$(now_ms) &&
    test -d a/agents/w2@e &&
    took "agents/w2@e" $t0 &&
    grep -q "^host: e$" a/agents/w2@e/status
'

# f shares nothing with a, which neither configured nor addressed it: only
# roster.#, bound for the census, brings a its heartbeat (the binding is
# there for 3 s: too short to catch with rabbitmqctl on a loaded machine)
test_expect_success 'a census hears the whole fleet once: the census file lists it, peers/ is unchanged' '
    mount_fleet f inject=none $HB &&
    sleep 2 &&
    test_eq "peers of a" "$(names_in a peers)" "b c d e " &&
    t0=$(now_ms) &&
    { echo >a/census & } &&
    wpid=$! &&
    wait_for 5 "grep -q \"^census: running\" a/status" &&
    wait $wpid &&
    took "census" $t0 &&
    test_eq "census ids" "$(ids_of a/census)" "a b c d e f " &&
    test_eq "f in the census" "$(jq -r "select(.coord_id == \"f\") | [.inPeers, .presence] | @tsv" a/census)" "false	live" &&
    test_eq "peers of a" "$(names_in a peers)" "b c d e " &&
    ! grep -q "discovered lead f" a.log &&
    grep -q "census done: 5 lead(s) heard besides this one" a.log &&
    grep -q "^census: .*Z: 5 lead(s) heard besides this one$" a/status &&
    wait_for 5 "! roster_bindings_of a | grep -qx \"roster.#\"" &&
    grep -q "^fleet_view: auto (narrowed" a/status
'

test_expect_success 'a second census within census_every: EAGAIN, logged, nothing bound, the last one kept' '
    cp a/census before &&
    test_must_fail bash -c "echo >a/census" 2>err &&
    grep -q "Resource temporarily unavailable" err &&
    grep -q "census refused: the last one started .* census_every=60s; the next may start in" a.log &&
    ! roster_bindings_of a | grep -qx "roster.#" &&
    test_cmp before a/census
'

test_expect_success 'a wide host s census is its roster now, however often' '
    t0=$(now_ms) &&
    echo >b/census &&
    echo >b/census &&
    took "census on b" $t0 &&
    wait_for 5 "test \"\$(ids_of b/roster)\" = \"a b c d e f \"" &&
    echo >b/census &&
    test_eq "b census" "$(ids_of b/census)" "a b c d e f " &&
    grep -q "^fleet_view: auto (the whole fleet" b/status
'

test_expect_success 'no roster connection: a census is refused ENOTCONN, logged' '
    FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:1/ mount_fleet away inject=none $HB &&
    test_must_fail bash -c "echo >away/census" 2>err &&
    grep -q "Transport endpoint is not connected" err &&
    grep -q "census: refused: this host.s roster connection is not up" away.log &&
    test_eq "away census" "$(cat away/census)" ""
'

test_expect_success 'bad values: view_limit=0 and fleet_view=some exit 2 and say what is allowed' '
    test_must_fail "$FLEETFS" "$TEST_DIR/bad" -f -o coord_id=bad,view_limit=0 2>err &&
    grep -q "view_limit.*a whole number 1..100000" err &&
    test_must_fail "$FLEETFS" "$TEST_DIR/bad" -f -o coord_id=bad,fleet_view=some 2>err &&
    grep -q "fleet_view.*auto, all or groups" err
'

test_done
