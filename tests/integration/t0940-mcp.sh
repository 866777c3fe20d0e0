#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `fleetfs mcp`: the agents' MCP tools, driven by the official MCP
# TypeScript SDK client (@modelcontextprotocol/sdk, installed from the npm
# registry into build/ on first use) against two real mounts, alpha and
# beta. What each call did is checked in the files and the broker, read by
# this script, not in what the server says it did.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0940
new_vhost $FLEET_VHOST

. "$FLEET_ROOT/tests/mcp.sh"
inbox_count() { grep -c . "$1/leads/$1/inbox"; }
# raw JSON lines through the real binary
mcp_raw() { timeout 60 "$FLEETFS" mcp "$TEST_DIR/$1"; }

test_expect_success 'the official MCP SDK client is installed into build/' '
    mcp_sdk_install
'

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta inject=none max_message=2000 send_timeout=2s &&
    mount_fleet beta peers=alpha inject=none prefetch=300
'

test_expect_success 'the SDK client initializes and lists the eleven tools, each with a schema and hints' '
    mcp alpha tools >tools.json &&
    jq -e ".server.name == \"fleetfs\"" tools.json &&
    jq -r ".tools[].name" tools.json | sort >names &&
    printf "%s\n" fleet_ack fleet_ask fleet_claim fleet_claims fleet_inbox fleet_list fleet_release fleet_resend fleet_send fleet_sent fleet_status >want &&
    test_cmp want names &&
    jq -r ".tools[] | select(.annotations.readOnlyHint == true) | .name" tools.json | sort >ro &&
    printf "%s\n" fleet_claims fleet_inbox fleet_list fleet_sent fleet_status >want &&
    test_cmp want ro &&
    jq -r ".tools[] | select(.annotations.destructiveHint == true) | .name" tools.json | sort >destr &&
    printf "%s\n" fleet_ack fleet_release >want &&
    test_cmp want destr &&
    jq -e "all(.tools[]; .inputSchema.type == \"object\" and (.description | length) > 20)" tools.json &&
    jq -e ".tools[] | select(.name == \"fleet_send\") | .inputSchema.required == [\"to\",\"body\"]" tools.json
'

test_expect_success 'fleet_send: alpha sends, the message is in beta'"'"'s inbox and alpha'"'"'s sent' '
    call alpha fleet_send "{\"to\":\"beta\",\"body\":\"parser is mine\"}" >r &&
    jq -e ".isError == false" r &&
    id=$(jq -r .text r | jq -r .msgId) &&
    echo "$id" >q.id &&
    test ${#id} = 32 &&
    jq -e ".structured.msgId == \"$id\" and .structured.to == \"beta\"" r &&
    wait_for 10 "grep -q $id beta/leads/beta/inbox" &&
    grep $id beta/leads/beta/inbox | jq -e ".from == \"alpha\" and .body == \"parser is mine\"" &&
    grep $id alpha/leads/alpha/sent | jq -e ".to == \"beta\""
'

test_expect_success 'fleet_list: alpha sees beta as a peer' '
    call alpha fleet_list "{}" >r &&
    jq -e ".isError == false" r &&
    jq -r .text r >list.json &&
    jq -e ".me == \"alpha\"" list.json &&
    jq -e "any(.leads[]; .coord_id == \"beta\" and .inPeers == true)" list.json
'

test_expect_success 'fleet_inbox: beta reads the message' '
    id=$(cat q.id) &&
    call beta fleet_inbox "{}" >r &&
    jq -e ".isError == false" r &&
    jq -r .text r >inbox.json &&
    jq -e ".me == \"beta\" and .count == 1" inbox.json &&
    jq -e ".structured.messages[0].msgId == \"$id\"" r &&
    jq -e ".messages[0].msgId == \"$id\" and .messages[0].from == \"alpha\"" inbox.json
'

test_expect_success 'fleet_send with replyTo: beta answers; alpha sees replyTo' '
    id=$(cat q.id) &&
    call beta fleet_send "{\"to\":\"alpha\",\"body\":\"ok, codegen here\",\"replyTo\":\"$id\"}" >r &&
    jq -e ".isError == false" r &&
    wait_for 10 "grep -q \"codegen here\" alpha/leads/alpha/inbox" &&
    grep "codegen here" alpha/leads/alpha/inbox | jq -e ".replyTo == \"$id\" and .from == \"beta\""
'

test_expect_success 'fleet_ack: beta acks it; it leaves the inbox; alpha'"'"'s fleet_sent says acked' '
    id=$(cat q.id) &&
    call beta fleet_ack "{\"msgIds\":[\"$id\"]}" >r &&
    jq -e ".isError == false" r &&
    ! grep -q $id beta/leads/beta/inbox &&
    grep $id beta/leads/beta/history | jq -e ".consumed == \"acked\"" &&
    wait_for 15 "call alpha fleet_sent \"{\\\"msgId\\\":\\\"$id\\\"}\" | jq -r .text | jq -e \".state == \\\"acked\\\"\"" &&
    grep $id alpha/leads/alpha/sent | jq -e ".state == \"acked\""
'

test_expect_success 'fleet_ack: an id not in the inbox acks nothing and says so' '
    echo "still here" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"still here\" beta/leads/beta/inbox" &&
    call beta fleet_ack "{\"msgIds\":[\"0123456789abcdef0123456789abcdef\"]}" >r &&
    jq -e ".isError == true" r &&
    jq -r .text r | grep "not in your inbox" &&
    grep -q "still here" beta/leads/beta/inbox &&
    id=$(grep "still here" beta/leads/beta/inbox | jq -r .msgId) &&
    call beta fleet_ack "{\"msgIds\":[\"$id\"]}" >r &&
    jq -e ".isError == false" r &&
    test "$(inbox_count beta)" = 0
'

# one server for the whole snippet: what it showed is what it may ack
test_expect_success 'fleet_ack: a message arriving between fleet_inbox and fleet_ack stays (broker and inbox)' '
    echo "first, read" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"first, read\" beta/leads/beta/inbox" &&
    sess_start beta &&
    sess_call fleet_inbox >r1 &&
    jq -e ".isError == false" r1 &&
    jq -r .text r1 >page.json &&
    jq -e ".count == 1 and (.messages[0].body | startswith(\"first, read\"))" page.json &&
    seen=$(jq -r .last page.json) &&
    echo "second, unseen" >alpha/peers/beta/send &&
    wait_for 10 "grep -q \"second, unseen\" beta/leads/beta/inbox" &&
    sess_call fleet_ack "{\"msgIds\":\"all\"}" >r2 &&
    jq -e ".isError == true" r2 &&
    jq -r .text r2 | grep "\"all\" is not accepted" &&
    sess_call fleet_ack "{\"through\":\"$seen\"}" >r3 &&
    jq -e ".isError == false" r3 &&
    jq -r .text r3 | jq -e ".msgIds == [\"$seen\"]" &&
    ! grep -q "first, read" beta/leads/beta/inbox &&
    test "$(inbox_count beta)" = 1 &&
    grep -q "second, unseen" beta/leads/beta/inbox &&
    wait_for 10 "n=\$(broker_count lead.beta.inbox) && test \"\$n\" = 1" &&
    sess_call fleet_inbox >r4 &&
    jq -r .text r4 | jq -e ".total == 1 and (.messages[0].body | startswith(\"second, unseen\"))" &&
    sess_end
'

# 201 messages (the one left above and 200 more), 7 a page; after the
# third page the agent acks what it read so far, and the next page starts
# after that page's last although it has left the inbox
test_expect_success 'fleet_inbox pages through 200 messages (limit, after): none missed or repeated' '
    for i in $(seq 200); do echo "page $i" >alpha/peers/beta/send || return 1; done &&
    wait_for 30 "test \$(inbox_count beta) = 201" &&
    msgids beta/leads/beta/inbox >want &&
    sess_start beta &&
    after= && : >got && pages=0 &&
    for page in $(seq 40); do
        sess_call fleet_inbox "{\"limit\":7${after:+,\"after\":\"$after\"}}" >p &&
        jq -r .text p >p.json &&
        jq -r ".messages[].msgId" p.json >>got &&
        test "$(jq .count p.json)" -le 7 &&
        pages=$((pages + 1)) || return 1
        after=$(jq -r .last p.json)
        if test $pages = 3; then
            sess_call fleet_ack "{\"through\":\"$after\"}" >a &&
            jq -r .text a | jq -e ".count == 21" || return 1
        fi
        jq -e .more p.json >/dev/null || break
    done &&
    test $pages = 29 &&
    test_cmp want got &&
    test "$(inbox_count beta)" = 180 &&
    sess_call fleet_ack "{\"through\":\"$after\"}" >a &&
    jq -r .text a | jq -e ".count == 180" &&
    test "$(inbox_count beta)" = 0 &&
    wait_for 10 "n=\$(broker_count lead.beta.inbox) && test \"\$n\" = 0" &&
    sess_end
'

# The worst case for a page's size: a control character is 6 bytes in the
# result's JSON (\u0001) and 7 in its text (JSON again, escaped once more),
# and a page is in both. Nine bodies of 30000 of them (each under 64 KiB,
# each sent in one write; about 390 KiB encoded): every answer line stays under the 1 MiB the
# tool promises, pages hold as many as fit (two), and paging loses none
test_expect_success 'fleet_inbox of bodies full of control characters: every result line under 1 MiB, none lost' '
    mount_fleet delta peers=beta inject=none &&
    for i in $(seq 9); do
        { printf "%s" $i && head -c 30000 /dev/zero | tr "\0" "\001"; } >body.$i &&
        cat body.$i >delta/peers/beta/send || return 1
    done &&
    wait_for 30 "test \$(inbox_count beta) = 9" &&
    msgids beta/leads/beta/inbox >want &&
    after= && : >got && pages=0 &&
    for page in $(seq 20); do
        printf "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"fleet_inbox\",\"arguments\":{%s}}}\n" \
            "${after:+\"after\":\"$after\"}" | mcp_raw beta >p &&
        test "$(wc -l <p)" = 1 &&
        bytes=$(wc -c <p) &&
        echo "page $page: $bytes bytes" &&
        test "$bytes" -lt $((1 << 20)) &&
        jq -e ".id == 1 and .result.isError == false" p >/dev/null &&
        jq -r ".result.structuredContent.messages[].msgId" p >>got &&
        jq -r ".result.content[0].text" p | jq -e ".count == (.messages | length)" >/dev/null &&
        jq -r ".result.structuredContent.messages[].body" p | grep -q "$(printf "\001\001\001")" &&
        pages=$((pages + 1)) || return 1
        after=$(jq -r .result.structuredContent.last p)
        jq -e .result.structuredContent.more p >/dev/null || break
        jq -e ".result.structuredContent.count == 2" p >/dev/null || return 1
    done &&
    test $pages = 5 &&
    test_cmp want got &&
    call beta fleet_ack "{\"msgIds\":$(jq -R . got | jq -sc .)}" >r &&
    jq -e ".isError == false" r &&
    test "$(inbox_count beta)" = 0
'

test_expect_success 'errors: unknown peer, empty body, body over max_message; nothing sent' '
    before=$(grep -c . alpha/leads/alpha/sent) &&
    big=$(head -c 2001 /dev/zero | tr "\0" x) &&
    mcp alpha call fleet_send "{\"to\":\"nobody\",\"body\":\"hi\"}" \
        fleet_send "{\"to\":\"beta\",\"body\":\"\"}" \
        fleet_send "{\"to\":\"beta\",\"body\":\"$big\"}" \
        fleet_send "{\"to\":\"beta\",\"body\":\"marker after the errors\"}" >r &&
    test "$(wc -l <r)" = 4 &&
    sed -n 1p r | jq -e ".isError == true" &&
    sed -n 1p r | jq -r .text | grep "no such peer .nobody. (ENOENT)" &&
    sed -n 2p r | jq -e ".isError == true" &&
    sed -n 2p r | jq -r .text | grep "empty.*EINVAL" &&
    sed -n 3p r | jq -e ".isError == true" &&
    sed -n 3p r | jq -r .text | grep "max_message.*(EMSGSIZE)" &&
    sed -n 4p r | jq -e ".isError == false" &&
    test_absent 10 "grep -q \"marker after the errors\" beta/leads/beta/inbox" \
        "test \$(inbox_count beta) != 1" &&
    test "$(grep -c . alpha/leads/alpha/sent)" = $((before + 1))
'

test_expect_success 'an unknown agent or group is refused with words, nothing sent; fleet_status of a peer' '
    before=$(grep -c . alpha/leads/alpha/sent) &&
    mcp alpha call fleet_send "{\"to\":\"w1@beta\",\"body\":\"hi\"}" \
        fleet_send "{\"to\":\"group:nope\",\"body\":\"hi\"}" \
        fleet_status "{\"peer\":\"beta\"}" >r &&
    sed -n 1p r | jq -e ".isError == true" &&
    sed -n 1p r | jq -r .text | grep "no such agent .w1@beta. known here (ENOENT)" &&
    sed -n 2p r | jq -e ".isError == true" &&
    sed -n 2p r | jq -r .text | grep "no such group .nope. (ENOENT)" &&
    sed -n 3p r | jq -e ".isError == false" &&
    sed -n 3p r | jq -r .text | grep "^state: reading" &&
    test "$(grep -c . alpha/leads/alpha/sent)" = $before
'

test_expect_success 'the real binary on stdio: framing errors answered, notifications not' '
    printf "%s\n" "{oops" "[]" \
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}" \
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}" \
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"no/such\"}" \
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"fleet_nope\"}}" |
        timeout 30 "$FLEETFS" mcp "$TEST_DIR/alpha" >raw 2>raw.err &&
    test "$(wc -l <raw)" = 5 &&
    sed -n 1p raw | jq -e ".id == null and .error.code == -32700" &&
    sed -n 1p raw | jq -r .error.message | grep "Parse error: string or .}. expected near .oops." &&
    sed -n 2p raw | jq -e ".id == null and .error.code == -32600" &&
    sed -n 3p raw | jq -e ".id == 1 and .result == {}" &&
    sed -n 4p raw | jq -e ".id == 2 and .error.code == -32601" &&
    sed -n 5p raw | jq -e ".id == 3 and .error.code == -32602"
'

# the 2026-07-28 revision: no handshake, each request names its version
test_expect_success 'a stateless (2026-07-28) client: server/discover has the instructions, cache hints and _meta identity' '
    meta="\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}" &&
    printf "%s\n" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{$meta}}" \
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{$meta}}" \
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{$meta,\"name\":\"fleet_list\",\"arguments\":{}}}" |
        mcp_raw alpha >raw 2>raw.err &&
    test "$(wc -l <raw)" = 3 &&
    sed -n 1p raw | jq -e ".id == 1 and .result.resultType == \"complete\"" &&
    sed -n 1p raw | jq -e ".result | has(\"serverInfo\") | not" &&
    sed -n 1p raw | jq -e ".result._meta[\"io.modelcontextprotocol/serverInfo\"].name == \"fleetfs\"" &&
    sed -n 1p raw | jq -e ".result.ttlMs >= 0 and (.result.cacheScope | IN(\"private\", \"public\"))" &&
    sed -n 1p raw | jq -e ".result.supportedVersions | index(\"2026-07-28\")" &&
    sed -n 1p raw | jq -r .result.instructions | grep "fleetfs mount at $TEST_DIR/alpha" &&
    sed -n 2p raw | jq -e ".result.ttlMs >= 0 and (.result.cacheScope | IN(\"private\", \"public\"))" &&
    sed -n 2p raw | jq -e "(.result.tools | length) == 11" &&
    sed -n 2p raw | jq -e ".result.resultType == \"complete\"" &&
    sed -n 2p raw | jq -e ".result._meta[\"io.modelcontextprotocol/serverInfo\"].name == \"fleetfs\"" &&
    sed -n 3p raw | jq -e ".result.isError == false and .result.structuredContent.me == \"alpha\"" &&
    sed -n 3p raw | jq -e ".result._meta[\"io.modelcontextprotocol/serverInfo\"].name == \"fleetfs\""
'

# The server's peak memory is read from its own /proc/PID/status (VmHWM)
# while it still runs, after it answered the line behind the long one. It
# is started with no wrapper, so $! is the server itself (under `timeout`
# it was timeout's 2 MiB that was read); a watchdog of this test's own
# stops it should it hang. The bound: the server idles at about 14 MiB and
# may hold one line of up to 8 MiB (twice that while it grows); an
# unbounded reader holds the whole 100 MiB line (108 MiB measured with the
# old getline reader), so 64 MiB tells them apart with room on both sides.
test_expect_success 'a 100 MiB line: -32600, skipped with bounded memory, the next line answered' '
    rm -f big.in && mkfifo big.in && hwm= &&
    { "$FLEETFS" mcp "$TEST_DIR/alpha" <big.in >raw 2>raw.err & } &&
    pid=$! &&
    { { sleep 60 && kill $pid; } </dev/null >/dev/null 2>&1 & } &&
    watchdog=$! &&
    exec {W}>big.in &&
    { wait_for 10 "test \"\$(readlink /proc/$pid/exe)\" = \"\$(readlink -f \"\$FLEETFS\")\"" &&
      head -c $((100 << 20)) /dev/zero | tr "\0" x >&$W &&
      echo >&$W &&
      echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}" >&$W &&
      wait_for 30 "test \$(wc -l <raw) -ge 2" &&
      hwm=$(awk "/^VmHWM:/ { print \$2 }" /proc/$pid/status) || hwm=; } &&
    exec {W}>&- &&
    { wait $pid; rc=$?; kill $watchdog 2>/dev/null; :; } &&
    test $rc = 0 &&
    test -n "$hwm" &&
    echo "peak RSS of the server (pid $pid): $hwm KiB" &&
    test "$hwm" -lt $((64 << 10)) &&
    test "$(wc -l <raw)" = 2 &&
    sed -n 1p raw | jq -e ".id == null and .error.code == -32600" &&
    sed -n 1p raw | jq -r .error.message | grep "longer than 8 MiB" &&
    sed -n 2p raw | jq -e ".id == 2 and .result == {}"
'

test_expect_success 'a NUL (\u0000) in any string argument: -32602 naming it; nothing sent' '
    before=$(grep -c . alpha/leads/alpha/sent) &&
    z=0123456789abcdef0123456789abcdef &&
    call_line() { printf "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":%s}}\n" "$@"; } &&
    { call_line 1 fleet_send "{\"to\":\"beta\\u0000x\",\"body\":\"nul in to\"}" &&
      call_line 2 fleet_send "{\"to\":\"beta\",\"body\":\"nul\\u0000 in body\"}" &&
      call_line 3 fleet_send "{\"to\":\"beta\",\"body\":\"nul in replyTo\",\"replyTo\":\"$z\\u0000\"}" &&
      call_line 4 fleet_inbox "{\"after\":\"$z\\u0000x\"}" &&
      call_line 5 fleet_ack "{\"msgIds\":[\"$z\\u0000\"]}" &&
      call_line 6 fleet_ack "{\"through\":\"$z\\u0000\"}" &&
      call_line 7 fleet_sent "{\"msgId\":\"$z\\u0000\"}" &&
      call_line 8 fleet_status "{\"peer\":\"beta\\u0000x\"}" &&
      call_line 9 "fleet_list\\u0000x" "{}" &&
      call_line 10 fleet_send "{\"to\":\"beta\",\"body\":\"nul in expiresIn\",\"expiresIn\":\"90s\\u0000x\"}" &&
      call_line 11 fleet_ask "{\"to\":\"beta\\u0000x\",\"body\":\"nul in ask to\"}" &&
      call_line 12 fleet_ask "{\"to\":\"beta\",\"body\":\"nul in ask\\u0000 body\"}" &&
      call_line 13 fleet_resend "{\"msgId\":\"$z\\u0000\"}" &&
      call_line 14 fleet_send "{\"to\":\"beta\",\"body\":\"after the NULs\"}"; } >in.jsonl &&
    grep -c "u0000" in.jsonl | grep -qx 13 &&
    mcp_raw alpha <in.jsonl >raw 2>raw.err &&
    test "$(wc -l <raw)" = 14 &&
    for i in $(seq 13); do
        sed -n ${i}p raw | jq -e ".id == $i and .error.code == -32602" &&
        sed -n ${i}p raw | jq -r .error.message | grep "NUL" || return 1
    done &&
    sed -n 1p raw | jq -r .error.message | grep "params.arguments.to has a NUL" &&
    sed -n 5p raw | jq -r .error.message | grep "params.arguments.msgIds\[0\] has a NUL" &&
    sed -n 10p raw | jq -r .error.message | grep "params.arguments.expiresIn has a NUL" &&
    sed -n 11p raw | jq -r .error.message | grep "params.arguments.to has a NUL" &&
    sed -n 12p raw | jq -r .error.message | grep "params.arguments.body has a NUL" &&
    sed -n 13p raw | jq -r .error.message | grep "params.arguments.msgId has a NUL" &&
    sed -n 14p raw | jq -e ".id == 14 and .result.isError == false" &&
    wait_for 10 "grep -q \"after the NULs\" beta/leads/beta/inbox" &&
    ! grep "nul in\|nul.u0000" beta/leads/beta/inbox &&
    test "$(grep -c . alpha/leads/alpha/sent)" = $((before + 1))
'

# a NUL in the request's own strings: "ping\u0000x" is no method of ours
# (-32601, not ping), "2.0\u0000junk" is not "2.0" (-32600); a string id
# is only ever echoed, and comes back whole
test_expect_success 'a NUL in method or jsonrpc: refused, nothing run; an id with a NUL echoed whole' '
    before=$(grep -c . alpha/leads/alpha/sent) &&
    send="\"params\":{\"name\":\"fleet_send\",\"arguments\":{\"to\":\"beta\",\"body\":\"nul in the request\"}}" &&
    { echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000x\"}" &&
      echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\\u0000x\",$send}" &&
      echo "{\"jsonrpc\":\"2.0\\u0000junk\",\"id\":3,\"method\":\"ping\"}" &&
      echo "{\"jsonrpc\":\"2.0\\u0000junk\",\"id\":4,\"method\":\"tools/call\",$send}" &&
      echo "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\\u0000x\",$send}" &&
      echo "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0000b\",\"method\":\"ping\"}" &&
      echo "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"fleet_send\",\"arguments\":{\"to\":\"beta\",\"body\":\"after the request NULs\"}}}"; } >in.jsonl &&
    mcp_raw alpha <in.jsonl >raw 2>raw.err &&
    test "$(wc -l <raw)" = 6 &&
    sed -n 1p raw | jq -e ".id == 1 and .error.code == -32601" &&
    sed -n 1p raw | jq -r .error.message | grep "NUL" &&
    sed -n 2p raw | jq -e ".id == 2 and .error.code == -32601" &&
    sed -n 3p raw | jq -e ".id == 3 and .error.code == -32600" &&
    sed -n 3p raw | jq -r .error.message | grep "jsonrpc.*NUL" &&
    sed -n 4p raw | jq -e ".id == 4 and .error.code == -32600" &&
    sed -n 5p raw | jq -e ".id == \"a\\u0000b\" and .result == {}" &&
    sed -n 6p raw | jq -e ".id == 7 and .result.isError == false" &&
    wait_for 10 "grep -q \"after the request NULs\" beta/leads/beta/inbox" &&
    ! grep "nul in the request" beta/leads/beta/inbox &&
    test "$(grep -c . alpha/leads/alpha/sent)" = $((before + 1))
'

test_expect_success 'invalid UTF-8: -32700 with the parser'"'"'s reason; nothing sent; the next line answered' '
    before=$(grep -c . alpha/leads/alpha/sent) &&
    { printf "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"fleet_send\",\"arguments\":{\"to\":\"beta\",\"body\":\"caf\xe9\"}}}\n" &&
      echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}"; } >in.bin &&
    mcp_raw alpha <in.bin >raw 2>raw.err &&
    test "$(wc -l <raw)" = 2 &&
    sed -n 1p raw | jq -e ".id == null and .error.code == -32700" &&
    sed -n 1p raw | jq -r .error.message | grep "unable to decode byte 0xe9" &&
    sed -n 2p raw | jq -e ".id == 2" &&
    test "$(grep -c . alpha/leads/alpha/sent)" = $before
'

test_expect_success '".." and "/" in names: refused with words, nothing sent; --as ../x refused at start' '
    before=$(grep -c . alpha/leads/alpha/sent) &&
    mcp alpha call fleet_send "{\"to\":\"../beta\",\"body\":\"dots\"}" \
        fleet_send "{\"to\":\"beta/../beta\",\"body\":\"slash\"}" \
        fleet_send "{\"to\":\"group:../all\",\"body\":\"group dots\"}" \
        fleet_status "{\"peer\":\"../self\"}" \
        fleet_status "{\"peer\":\"beta/status\"}" >r &&
    test "$(wc -l <r)" = 5 &&
    for i in 1 2 3 4 5; do
        sed -n ${i}p r | jq -e ".isError == true" || return 1
    done &&
    sed -n 1p r | jq -r .text | grep "is not a lead.s coord_id" &&
    sed -n 4p r | jq -r .text | grep "is not a lead.s coord_id" &&
    test "$(grep -c . alpha/leads/alpha/sent)" = $before &&
    test_must_fail "$FLEETFS" mcp "$TEST_DIR/alpha" --as ../w1@alpha </dev/null 2>as.err &&
    grep "refused" as.err
'

test_expect_success 'a stdin that cannot be read: exit 1, logged as such (not "the client closed stdin")' '
    test_must_fail "$FLEETFS" mcp "$TEST_DIR/alpha" </ >raw 2>raw.err &&
    grep "cannot read stdin (Is a directory)" raw.err &&
    ! grep "closed stdin" raw.err &&
    test ! -s raw
'

# alpha's daemon stopped: its files answer nothing; the tool must answer
# anyway (send_timeout 2 s plus the server's margin), and say so
test_expect_success 'a hung mount: the call still returns, with isError, and the server lives on' '
    pid=$(cat .harness/pid.alpha) &&
    kill -STOP $pid &&
    { call alpha fleet_inbox "{}" >r; rc=$?; kill -CONT $pid; } &&
    test $rc = 0 &&
    jq -e ".isError == true" r &&
    jq -r .text r | grep "did not answer" &&
    call alpha fleet_status "{}" >r &&
    jq -e ".isError == false" r &&
    jq -r .text r | grep "^send_timeout: 2s"
'

# one server for all of it: four calls hang on a stopped daemon (send_timeout
# 2 s + 3 s each), the fifth is refused at once, and once the daemon goes on
# the same server answers again
test_expect_success 'one long-lived server: survives hung calls, refuses past its stuck limit, answers the next' '
    pid=$(cat .harness/pid.alpha) &&
    sess_start alpha &&
    sess_call fleet_status >r0 &&
    jq -e ".isError == false" r0 &&
    kill -STOP $pid &&
    at_exit "kill -CONT $pid" &&
    for i in 1 2 3 4; do
        sess_call fleet_inbox >h$i &&
        jq -e ".isError == true" h$i &&
        jq -r .text h$i | grep "did not answer within 5 s" || { kill -CONT $pid; return 1; }
    done &&
    sess_call fleet_inbox >h5 &&
    kill -CONT $pid &&
    jq -e ".isError == true" h5 &&
    jq -r .text h5 | grep "not tried: .* has not answered 4 earlier calls" &&
    wait_for 15 "sess_call fleet_status >r1 && jq -e \".isError == false\" r1" &&
    jq -r .text r1 | grep "^send_timeout: 2s" &&
    sess_end
'

test_expect_success 'the daemon killed under a connected client: a tool error naming the mount; after a remount it answers' '
    sess_start alpha &&
    sess_call fleet_status >r0 &&
    jq -e ".isError == false" r0 &&
    pid=$(cat .harness/pid.alpha) &&
    kill -9 $pid &&
    wait_for 10 "fleet_gone alpha" &&
    sess_call fleet_inbox >r1 &&
    jq -e ".isError == true" r1 &&
    jq -r .text r1 | grep "the fleetfs daemon behind $TEST_DIR/alpha is gone (ENOTCONN" &&
    { fusermount3 -uz alpha 2>/dev/null || umount -l alpha; } &&
    rm -f .harness/pid.alpha &&
    mount_fleet alpha peers=beta inject=none max_message=2000 send_timeout=2s {SESS_FD}>&- &&
    sess_call fleet_status >r2 &&
    jq -e ".isError == false" r2 &&
    jq -r .text r2 | grep "^send_timeout: 2s" &&
    sess_call fleet_send "{\"to\":\"beta\",\"body\":\"after the remount\"}" >r3 &&
    jq -e ".isError == false" r3 &&
    wait_for 10 "grep -q \"after the remount\" beta/leads/beta/inbox" &&
    sess_end
'

# gamma's send_timeout (12 s) is past the default bound (5 s + 3 s) the
# server used for its first call before it had read send_timeout: beta's
# queue stops answering, so gamma's send waits its whole send_timeout
test_expect_success 'the first call of a server waits send_timeout read from the mount (12 s), not 5 s' '
    mount_fleet gamma peers=beta inject=none send_timeout=12s probe_timeout=30s &&
    queue_process suspend lead.beta.inbox &&
    at_exit "queue_process resume lead.beta.inbox" &&
    { call gamma fleet_send "{\"to\":\"beta\",\"body\":\"slow to confirm\"}" >r; rc=$?;
      queue_process resume lead.beta.inbox; } &&
    test $rc = 0 &&
    jq -e ".isError == true" r &&
    jq -r .text r | grep "ETIMEDOUT" &&
    ! jq -r .text r | grep "did not answer"
'

test_done
