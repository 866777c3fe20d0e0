#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# doc/agents.md, run as written: every ```sh block of the guide, in order,
# in one shell (as an agent would), against two real mounts, mac (the
# agent) and fleet01 (a peer); then what each block should have done is
# checked. The guide's other blocks (indented, or fenced as json) are
# listed here: run and checked too (the agents, groups, roster and to/
# blocks, after the sh blocks, with agents on both mounts; the .mcp.json)
# or not run, with the reason (a typed header, a spawn that needs a pane,
# Claude Code's CLI). A block added to the guide without a check or a
# reason here fails the test, so the guide and the test cannot drift
# apart. The error table's messages are checked against strerror and,
# where cheap, provoked.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: the guide's shell blocks: the same tree operations run under ASan in t0100-t0730" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0930
new_vhost $FLEET_VHOST
GUIDE=$FLEET_ROOT/doc/agents.md

# Every block of the guide, in order, in blocks/NN, and in index one line
# each: NN<TAB>kind<TAB>its lines joined by spaces. kind is sh, json (a
# fenced block's language) or indented (4 spaces after a blank line,
# outside a fence; split at blank lines). An sh block's first line
# "# label" names it.
mkdir -p blocks out rc
awk -v dir="$TEST_DIR/blocks" -v index_file="$TEST_DIR/index" '
    function start(k) { n++; f = sprintf("%s/%02d", dir, n); kind[n] = k; printf "" > f; open = 1 }
    function stop() { if (open) close(f); open = 0 }
    function add(t) { sub(/^ +/, "", t); text[n] = text[n] (text[n] == "" ? "" : " ") t }
    fence { if ($0 ~ /^```$/) { stop(); fence = 0 } else { print > f; add($0) } next }
    /^```/ { stop(); k = substr($0, 4); start(k == "" ? "text" : k); fence = 1; next }
    /^ *$/ { stop(); blank = 1; next }
    /^    / && (blank || open) {
        if (!open) start("indented")
        l = $0; sub(/^    /, "", l); print l > f; add(l)
        blank = 0; next
    }
    { stop(); blank = 0 }
    END { for (i = 1; i <= n; i++) printf "%02d\t%s\t%s\n", i, kind[i], text[i] > index_file }' "$GUIDE"
awk -F'\t' '$2 == "sh" { print "blocks/" $1 }' index >sh_blocks

label() { head -n 1 "$1" | sed 's/^# //'; }

# The guide's blocks that are not sh, by the start of their text (an ERE
# on its lines joined by spaces): "run" and the label it is run and
# checked under, or "skip" and the reason it is not run here.
cat >known <<'EOT'
^\[fleet message from fleet01, msgId <id> - reply:|skip|a header as typed into a lead's pane, not a command: t0700 checks the typed header and its reply path
^fleetfs ask "\$FLEET" fleet01 |skip|the asker waits for the peer's answer, which this test's one shell cannot give meanwhile: t0319 runs fleetfs ask end to end (answered, and exit statuses 3, 4, 5, 6)
^ls "\$FLEET/agents"|run|agents on other hosts
^ls "\$FLEET/groups"|run|groups
^jq -r '\.agents\[\]\?\.gid' "\$FLEET/roster"|run|the roster
^\[fleet message from w1@fleet01, msgId <id> - reply:|skip|a header as typed into the lead's pane, not a command: t1020 checks an agent's message header and its reply path
^me=w1@mac|run|send as an agent
^ls "\$FLEET/hosts"|skip|a spawn needs the profile's program started in a pane (tmux or herdr), and these mounts type nothing (inject=none): t1046 writes hosts/<h>/spawn, reads spawns and stops the agent end to end
^echo w3@fleet01 > "\$FLEET/hosts/fleet01/stop"$|skip|stops the agent the spawn block starts, which is not run here: t1046 stops one through hosts/<h>/stop
^claude mcp add fleet -- fleetfs mcp /fleet$|skip|needs Claude Code's CLI; t0940 runs fleetfs mcp MOUNT (the command it registers) through the MCP SDK's client
^\{ "mcpServers": \{|run|the .mcp.json
^claude mcp add fleet -- fleetfs mcp /fleet --as w1@mac$|skip|needs Claude Code's CLI; t0942 runs fleetfs mcp MOUNT --as GID through the MCP SDK's client
^\{ "hooks": \{ "UserPromptSubmit"|run|the prompt-submit hook settings
EOT

test_expect_success 'every block of the guide is run here or listed as not run, with the reason' '
    test -s index &&
    awk -F"\t" "\$2 == \"sh\" { print \"block \" \$1 \" (sh): \" \$3 }" index | cut -c1-80 &&
    awk -F"\t" -v OFS="\t" "\$2 != \"sh\" { print \"block \" \$1 \" (\" \$2 \")\", \$3 }" index >others &&
    doc_blocks_listed agents.md others known
'

# the blocks not run here, each as a planned skip with its reason
while IFS="|" read -r pat kind why; do
    [[ $kind == skip ]] || continue
    nn=$(awk -F'\t' -v p="$pat" '$2 != "sh" && $3 ~ p { print $1; exit }' index)
    test_skip_planned "agents.md block ${nn:-?}: ${pat//\\/}" "$why"
done <known

# block_of LABEL: the file of the block the table runs as LABEL
block_of() {
    local pat
    pat=$(awk -F"|" -v l="$1" '$2 == "run" && $3 == l { print $1; exit }' known)
    echo "blocks/$(awk -F'\t' -v p="$pat" '$2 != "sh" && $3 ~ p { print $1; exit }' index)"
}

test_expect_success 'the guide has exactly the sh blocks this test checks, each labelled' '
    while read -r f; do label "$f"; done <sh_blocks >labels &&
    cat >want <<-EOT &&
	find the mount
	list the peers
	send a message
	send several lines as one message
	what happened to my messages
	read the inbox
	wait for a message
	acknowledge one message
	acknowledge what you read, and only that
	what I consumed
	reply to a message
	resend an unconfirmed message
	is the fleet connected
	EOT
    test_cmp want labels
'

test_expect_success 'set-up: mac (the agent; agent w1) and fleet01 (a peer; agents w1, w2 in group backend), nothing typed (inject=none)' '
    mount_fleet mac peers=fleet01 inject=none agents=w1 heartbeat=1s &&
    mount_fleet fleet01 peers=mac inject=none agents=w1:w2 groups=backend heartbeat=1s
'

# What the test does between blocks, as the rest of the fleet would.
cat >hooks.sh <<EOT
hook_before() {
    case \$1 in
    "read the inbox")
        echo "review my lexer please" >$TEST_DIR/fleet01/peers/mac/send &&
        echo "and the tokens file" >$TEST_DIR/fleet01/peers/mac/send &&
        # sent is not arrived: wait until mac holds both, as a reader would
        for i in \$(seq 100); do
            test "\$(wc -l <$TEST_DIR/mac/leads/mac/inbox)" -ge 2 && break; sleep 0.1
        done ;;
    "wait for a message")
        ( sleep 1.5; echo "ping from fleet01" >$TEST_DIR/fleet01/peers/mac/send ) & ;;
    esac
}
EOT

test_expect_success 'every block of the guide runs, in order, in one shell' '
    {
        echo ". $TEST_DIR/hooks.sh"
        while read -r f; do
            l=$(label "$f")
            echo "hook_before \"$l\""
            echo "{"
            cat "$f"
            echo "} >\"$TEST_DIR/out/$l\" 2>&1; echo \$? >\"$TEST_DIR/rc/$l\""
        done <sh_blocks
    } >guide.sh &&
    FLEET=$TEST_DIR/mac timeout 120 bash guide.sh &&
    while read -r f; do
        l=$(label "$f")
        echo "--- $l: exit $(cat "rc/$l")"; cat "out/$l"
        test "$(cat "rc/$l")" = 0 || exit 1
    done <sh_blocks
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

test_expect_success 'acknowledge one, then the msgIds read: the inbox is empty, history says acked' '
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

# "Agents on other hosts, and groups": its blocks run in order in one
# shell, once presence has listed fleet01's agents on mac, after the sh
# blocks' checks (they send to mac's inbox, which those check empty)
test_expect_success 'the agents, groups, roster and to/ blocks run, in order, in one shell' '
    wait_for 20 "test -d mac/agents/w1@fleet01 && test -d mac/agents/w2@fleet01 && test -d mac/groups/backend" &&
    {
        for l in "agents on other hosts" groups "the roster" "send as an agent"; do
            echo "{"
            cat "$(block_of "$l")"
            echo "} >\"$TEST_DIR/out/$l\" 2>&1; echo \$? >\"$TEST_DIR/rc/$l\""
        done
    } >agents.sh &&
    FLEET=$TEST_DIR/mac timeout 60 bash agents.sh &&
    for l in "agents on other hosts" groups "the roster" "send as an agent"; do
        echo "--- $l: exit $(cat "rc/$l")"; cat "out/$l"
        test "$(cat "rc/$l")" = 0 || exit 1
    done
'

test_expect_success 'agents: w1@fleet01 listed, its status printed, the send in its inbox' '
    grep -qx "w1@fleet01" "out/agents on other hosts" &&
    grep -q "^groups: all backend" "out/agents on other hosts" &&
    wait_for 10 "grep -q \"take the parser\" fleet01/agents/w1@fleet01/inbox" &&
    grep "take the parser" fleet01/agents/w1@fleet01/inbox | jq -e ".from == \"mac\""
'

test_expect_success 'groups: backend listed, its members, one message to each member' '
    grep -qx backend "out/groups" && grep -qx all "out/groups" &&
    grep -qx w1@fleet01 "out/groups" && grep -qx w2@fleet01 "out/groups" &&
    for a in w1 w2; do
        wait_for 10 "grep -q \"freeze main until 14:00\" fleet01/agents/$a@fleet01/inbox" || exit 1
    done &&
    grep -c "\"to\":\"group:backend\"" mac/leads/mac/sent >n && test "$(cat n)" = 1
'

test_expect_success 'the roster: every agent, those of backend, each with its state' '
    jq -r ".agents[]?.gid" mac/roster | sort >all &&
    printf "%s\n" w1@fleet01 w1@mac w2@fleet01 >want && test_cmp want all &&
    jq -r ".agents[]? | select(.groups | index(\"backend\")) | .gid" mac/roster | sort >backend &&
    printf "%s\n" w1@fleet01 w2@fleet01 >want && test_cmp want backend &&
    out="out/the roster" &&
    head -n 3 "$out" | sort >got && cat all >want && test_cmp want got &&
    sed -n 4,5p "$out" | sort >got && cat backend >want && test_cmp want got &&
    tail -n 3 "$out" | jq -e "has(\"gid\") and has(\"state\") and (keys | length) == 2" >/dev/null
'

test_expect_success 'send as an agent: w1@mac to its lead, to another agent, to a group, from w1@mac' '
    wait_for 10 "grep -q \"done with the parser\" mac/leads/mac/inbox" &&
    grep "done with the parser" mac/leads/mac/inbox | jq -e ".from == \"w1@mac\"" &&
    wait_for 10 "grep -q \"can you review #12?\" fleet01/agents/w2@fleet01/inbox" &&
    grep "can you review #12?" fleet01/agents/w2@fleet01/inbox | jq -e ".from == \"w1@mac\"" &&
    wait_for 10 "grep -q \"parser merged\" fleet01/agents/w1@fleet01/inbox" &&
    grep "parser merged" fleet01/agents/w1@fleet01/inbox | jq -e ".from == \"w1@mac\""
'

test_expect_success 'the .mcp.json: JSON whose server is fleetfs mcp /fleet' '
    jq -e ".mcpServers.fleet == {\"command\": \"fleetfs\", \"args\": [\"mcp\", \"/fleet\"]}" "$(block_of "the .mcp.json")"
'

# both hook blocks (Claude Code's settings.json, Codex's hooks.json) have
# this shape; the command runs as written on Claude Code's JSON with no
# fleet header in the prompt: nothing on stdout, exit 0 (t0711 runs it as
# a TUI's hook against a real mount)
test_expect_success 'the prompt-submit hook settings: UserPromptSubmit runs fleetfs hook, which prints nothing and exits 0' '
    test "$(grep -c "^\`\`\`json$" "$GUIDE")" -ge 3 &&
    for f in $(awk -F"\t" "\$2 == \"json\" && \$3 ~ /UserPromptSubmit/ { print \"blocks/\" \$1 }" index); do
        jq -e ".hooks.UserPromptSubmit == [{\"hooks\": [{\"type\": \"command\", \"command\": \"fleetfs hook\"}]}]" "$f" || return 1
        cmd=$(jq -r ".hooks.UserPromptSubmit[0].hooks[0].command" "$f") &&
        echo "{\"session_id\":\"s1\",\"transcript_path\":\"/tmp/t.jsonl\",\"cwd\":\"$TEST_DIR\",\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"hello\"}" |
            PATH=$(dirname "$FLEETFS"):$PATH $cmd >hook.out &&
        test ! -s hook.out || return 1
    done &&
    test "$(awk -F"\t" "\$2 == \"json\" && \$3 ~ /UserPromptSubmit/" index | wc -l)" = 2
'

test_expect_success 'unmount' '
    unmount_fleet mac && unmount_fleet fleet01 && unmount_fleet away
'

test_done
