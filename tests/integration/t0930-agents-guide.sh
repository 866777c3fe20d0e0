#!/usr/bin/env bash
# doc/agents.md, run as written: every ```sh block of the guide, in order,
# in one shell (as an agent would), against two real mounts, mac (the
# agent) and fleet01 (a peer); then what each block should have done is
# checked. A block added to the guide without a check here fails the
# test, so the guide and the test cannot drift apart. The error table's
# messages are checked against strerror and, where cheap, provoked.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: the guide's shell blocks: the same tree operations run under ASan in t0100-t0730" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0930
new_vhost $FLEET_VHOST
GUIDE=$FLEET_ROOT/doc/agents.md

# the blocks, each in blocks/NN; its first line "# label" names it
mkdir -p blocks out rc
awk -v dir="$TEST_DIR/blocks" '
    /^```sh$/ { n++; f = sprintf("%s/%02d", dir, n); inb = 1; next }
    /^```$/ && inb { inb = 0; close(f); next }
    inb { print > f }' "$GUIDE"

label() { head -n 1 "$1" | sed 's/^# //'; }

test_expect_success 'the guide has exactly the blocks this test checks, each labelled' '
    for f in blocks/*; do label "$f"; done >labels &&
    cat >want <<-EOT &&
	find the mount
	list the peers
	send a message
	send several lines as one message
	what happened to my messages
	read the inbox
	wait for a message
	acknowledge one message
	acknowledge all
	what I consumed
	reply to a message
	resend an unconfirmed message
	is the fleet connected
	EOT
    test_cmp want labels
'

test_expect_success 'set-up: mac (the agent) and fleet01 (a peer), nothing typed (inject=none)' '
    mount_fleet mac peers=fleet01 inject=none &&
    mount_fleet fleet01 peers=mac inject=none
'

# What the test does between blocks, as the rest of the fleet would.
cat >hooks.sh <<EOT
hook_before() {
    case \$1 in
    "read the inbox")
        echo "review my lexer please" >$TEST_DIR/fleet01/peers/mac/send &&
        echo "and the tokens file" >$TEST_DIR/fleet01/peers/mac/send ;;
    "wait for a message")
        ( sleep 1.5; echo "ping from fleet01" >$TEST_DIR/fleet01/peers/mac/send ) & ;;
    esac
}
EOT

test_expect_success 'every block of the guide runs, in order, in one shell' '
    {
        echo ". $TEST_DIR/hooks.sh"
        for f in blocks/*; do
            l=$(label "$f")
            echo "hook_before \"$l\""
            echo "{"
            cat "$f"
            echo "} >\"$TEST_DIR/out/$l\" 2>&1; echo \$? >\"$TEST_DIR/rc/$l\""
        done
    } >guide.sh &&
    FLEET=$TEST_DIR/mac timeout 120 bash guide.sh &&
    for f in blocks/*; do
        l=$(label "$f")
        echo "--- $l: exit $(cat "rc/$l")"; cat "out/$l"
        test "$(cat "rc/$l")" = 0 || exit 1
    done
'

test_expect_success 'find the mount: findmnt lists it, self names the lead' '
    grep -q "^$TEST_DIR/mac *fleetfs$" "out/find the mount" &&
    grep -qx "I am mac" "out/find the mount"
'

test_expect_success 'list the peers: fleet01, and its status says reading' '
    grep -qx fleet01 "out/list the peers" &&
    grep -qx "state: reading" "out/list the peers"
'

test_expect_success 'the two sends arrived at fleet01 as two messages, the lines kept together' '
    jq -r .body fleet01/leads/fleet01/inbox >bodies &&
    head -n 1 bodies | grep -q "^I take the parser, you take codegen" &&
    jq -s "map(select(.replyTo == null)) | length" fleet01/leads/fleet01/inbox >n && test "$(cat n)" = 2 &&
    jq -r "select(.body | startswith(\"Parser status\")) | .body" fleet01/leads/fleet01/inbox >multi &&
    printf "Parser status:\n- lexer done, tests green\n- grammar: expressions left\n" >want &&
    test_cmp want multi
'

test_expect_success 'what happened to my messages: two published' '
    test "$(tail -n 1 "out/what happened to my messages")" = 2 &&
    grep -c "\"to\":\"fleet01\"" "out/what happened to my messages" >c && test "$(cat c)" = 2
'

test_expect_success 'read the inbox, wait for a message: what fleet01 sent, in order' '
    jq -r .body "out/read the inbox" >got &&
    printf "review my lexer please\nand the tokens file\n" >want && test_cmp want got &&
    jq -r .body "out/wait for a message" >got &&
    echo "ping from fleet01" >want && test_cmp want got
'

test_expect_success 'acknowledge one, then all: the inbox is empty, history says acked' '
    test ! -s mac/leads/mac/inbox &&
    jq -r .body mac/leads/mac/history >h &&
    printf "review my lexer please\nand the tokens file\nping from fleet01\n" >want && test_cmp want h &&
    jq -r .consumed "out/what I consumed" | sort -u >how && echo acked >acked && test_cmp acked how &&
    jq -r .body "out/what I consumed" >h3 && test_cmp h h3
'

test_expect_success 'reply to a message: fleet01 gets the answer, with replyTo naming its message' '
    grep -qx "$(msgids mac/leads/mac/history | tail -n 1)" "out/reply to a message" &&
    q=$(msgids mac/leads/mac/history | tail -n 1) &&
    wait_for 5 "grep -q \"one nit in the tokens file\" fleet01/leads/fleet01/inbox" &&
    grep "one nit in the tokens file" fleet01/leads/fleet01/inbox | jq -e ".replyTo == \"$q\" and .from == \"mac\""
'

test_expect_success 'resend: nothing unconfirmed, nothing sent again' '
    test ! -s "out/resend an unconfirmed message" &&
    ! grep -q "\"state\":\"unconfirmed\"" mac/leads/mac/sent &&
    jq -s "length" fleet01/leads/fleet01/inbox >n && test "$(cat n)" = 3
'

test_expect_success 'is the fleet connected: broker: connected' '
    test "$(cat "out/is the fleet connected")" = "broker: connected"
'

test_expect_success 'the error table: each message is the strerror of its errno' '
    sed -n "s/^| \`\([^\`]*\)\` | \(E[A-Z]*\) |.*/\2 \1/p" "$GUIDE" >table &&
    test $(wc -l <table) = 9 &&
    python3 -c "
import errno, os, sys
for line in open(\"table\"):
    name, msg = line.rstrip(\"\n\").split(\" \", 1)
    want = os.strerror(getattr(errno, name))
    print(name, repr(msg), repr(want))
    if msg != want: sys.exit(1)
"
'

test_expect_success 'the errors the table names, provoked through the mount, read as it says' '
    msg() { sed -n "s/^| \`\([^\`]*\)\` | $1 |.*/\1/p" "$GUIDE"; } &&
    test_must_fail bash -c "echo hi >mac/peers/nobody/send" 2>err && grep -q "$(msg ENOENT)" err &&
    test_must_fail bash -c "printf \"\\xff\\xfe\" >mac/peers/fleet01/send" 2>err && grep -q "$(msg EINVAL)" err &&
    head -c 70000 /dev/zero | tr "\0" a >big &&
    test_must_fail bash -c "cat big >mac/peers/fleet01/send" 2>err &&
    grep -q "$(msg EMSGSIZE)" err &&
    FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:1/ mount_fleet away peers=fleet01 &&
    test_must_fail bash -c "echo hi >away/peers/fleet01/send" 2>err && grep -q "$(msg ECOMM)" err &&
    grep "^broker:" away/status | grep -q unreachable
'

test_expect_success 'unmount' '
    unmount_fleet mac && unmount_fleet fleet01 && unmount_fleet away
'

test_done
