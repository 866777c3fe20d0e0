#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make check keeps the layers (scripts/check-layers) and the one style
# (scripts/check-format) and the size of a file (scripts/check-size): on a copy of the tree, each passes as the tree is,
# and each fails, naming the part and the file, on a planted violation of
# each of its rules (doc/architecture.md draws them): the folder rules, the
# loops that were cut (never rules), the spelling of an include, the
# model's seam to the broker. And `make check` itself runs all five checks
# (the license line and the documents' contents lists too): on a copy with
# one violation of each, it fails naming every one.
. "$(dirname "$0")/../lib.sh"

# a fresh copy of the product tree, its documents and the checks, in dir $1
copy_tree() {
	mkdir -p "$1/scripts" &&
	cp -r "$FLEET_ROOT/fleetfs" "$FLEET_ROOT/broker" "$FLEET_ROOT/herdr" "$FLEET_ROOT/doc" "$1/" &&
	cp "$FLEET_ROOT/.clang-format" "$1/" &&
	cp "$FLEET_ROOT/scripts/check-layers" "$FLEET_ROOT/scripts/check-format" "$FLEET_ROOT/scripts/check-size" \
		"$FLEET_ROOT/scripts/doc-contents" "$1/scripts/"
}
N=22 # the checks check-layers makes: its rules, the seam, the Linux-only names, the spelling of includes, no file under no rule

test_expect_success 'the tree as it is passes both checks, and the picture is printed' '
	copy_tree clean &&
	FLEET_CHECK_ROOT=$PWD/clean "$FLEET_ROOT/scripts/check-layers" >out &&
	grep -x "layers: $N passed, 0 failed" out &&
	grep -E "^  os/ +may include: fleetfs/os/\$" out &&
	grep -E "^  base/ +may include: fleetfs/base/ fleetfs/os/\$" out &&
	grep -E "^  portable +no Linux-only call outside: fleetfs/os/\$" out &&
	grep -E "^  face/ +may include: .*fleetfs/agents/" out &&
	grep -E "^  face/notify +never reaches: fleetfs/face/hosts.h .*fleetfs/agents/" out &&
	grep -E "^  config/profile +never reaches: fleetfs/config/options.h" out &&
	grep -E "^  model/ +may include: .* mb_broker.\[ch\]:broker/ dead.c:broker/death.h mailbox.h:broker/conn.h\$" out &&
	grep -E "^  model/seam +calls the broker only in: mb_broker.c dead.c:br_death_\*\$" out &&
	FLEET_CHECK_ROOT=$PWD/clean "$FLEET_ROOT/scripts/check-format" >fmt &&
	grep -E "^format: [0-9]+ passed, 0 failed\$" fmt &&
	FLEET_CHECK_ROOT=$PWD/clean "$FLEET_ROOT/scripts/check-size" >size &&
	grep -E "^size: [0-9]+ passed, 0 failed\$" size &&
	FLEET_CHECK_ROOT=$PWD/clean "$FLEET_ROOT/scripts/doc-contents" --check >contents &&
	grep -E "^contents: [0-9]+ passed, 0 failed\$" contents
'

# plant RULE FILE HEADER: FILE (in a fresh copy) includes HEADER, which RULE
# forbids; check-layers must fail and name both
plant() {
	local rule=$1 file=$2 header=$3
	plant_line "$file" "#include \"$header\"" &&
	layers_fail "layers: $rule reaches outside its layer:" "    $file: #include \"$header\""
}

# plant_line FILE LINE: a fresh copy (in dir "plant") where FILE ends with LINE
plant_line() {
	rm -rf plant && copy_tree plant &&
	test -f "plant/$1" &&
	printf "%s\n" "$2" >>"plant/$1"
}

# layers_fail HEADING DETAIL: check-layers fails on the copy "plant" with
# one failed check, HEADING and under it DETAIL (whole lines)
layers_fail() {
	test_must_fail env FLEET_CHECK_ROOT=$PWD/plant "$FLEET_ROOT/scripts/check-layers" >plant.out &&
	cat plant.out &&
	grep -xF "$1" plant.out &&
	grep -xF "$2" plant.out &&
	grep -x "layers: $((N - 1)) passed, 1 failed" plant.out
}

test_expect_success 'the base reaches nothing above it' '
	plant base/ fleetfs/base/log.c fleetfs/wire/names.h
'
test_expect_success 'wire/, store/, broker/ and herdr/ reach only the base and themselves' '
	plant wire/ fleetfs/wire/names.c fleetfs/model/mailbox.h &&
	plant store/ fleetfs/store/seen.c fleetfs/wire/envelope.h &&
	plant broker/ broker/uri.c fleetfs/config/options.h &&
	plant herdr/ herdr/tmux.c broker/conn.h
'
test_expect_success 'config/ reaches no part that reads it' '
	plant config/ fleetfs/config/options.c fleetfs/model/mailbox.h &&
	plant config/ fleetfs/config/profile.c fleetfs/spawn/run.h
'
test_expect_success 'model/, inject/, presence/ and spawn/ reach nothing of the face or each other beyond their rule' '
	plant model/ fleetfs/model/held.c fleetfs/face/tree.h &&
	plant inject/ fleetfs/inject/inject.c fleetfs/presence/presence.h &&
	plant presence/ fleetfs/presence/view.c fleetfs/model/mailbox.h &&
	plant spawn/ fleetfs/spawn/check.c fleetfs/agents/agents.h
'
test_expect_success 'agents/ reaches the broker only through the model (no broker/)' '
	plant agents/ fleetfs/agents/agents.c broker/conn.h
'
test_expect_success 'the control service takes its narrow context, not the face (fleet.h)' '
	plant spawn/spawnd fleetfs/spawn/spawnd.c fleetfs/face/fleet.h
'
test_expect_success 'the face reaches nothing of start-up; mcp/ nothing of the model' '
	plant face/ fleetfs/face/notify.c fleetfs/start/cmdline.h &&
	plant mcp/ fleetfs/mcp/tools.c fleetfs/model/mailbox.h
'

# The two loops issue 35 cut live inside one folder each, whose rule allows
# the folder: a never rule keeps them cut, through headers too.
test_expect_success 'the notifier does not reach hosts/, the tree or the agents again (not even through fleet.h)' '
	plant_line fleetfs/face/notify.c "#include \"fleetfs/face/hosts.h\"" &&
	layers_fail "layers: face/notify reaches what it must not:" \
		"    fleetfs/face/notify.c reaches fleetfs/face/hosts.h: fleetfs/face/notify.c -> fleetfs/face/hosts.h" &&
	plant_line fleetfs/face/fleet.h "#include \"fleetfs/face/hosts.h\"" &&
	layers_fail "layers: face/notify reaches what it must not:" \
		"    fleetfs/face/notify.c reaches fleetfs/face/hosts.h: fleetfs/face/notify.c -> fleetfs/face/fleet.h -> fleetfs/face/hosts.h" &&
	plant_line fleetfs/face/notify.c "#include \"fleetfs/face/tree.h\"" &&
	layers_fail "layers: face/notify reaches what it must not:" \
		"    fleetfs/face/notify.c reaches fleetfs/face/tree.h: fleetfs/face/notify.c -> fleetfs/face/tree.h" &&
	plant_line fleetfs/face/notify.c "#include \"fleetfs/agents/agents.h\"" &&
	layers_fail "layers: face/notify reaches what it must not:" \
		"    fleetfs/face/notify.c reaches fleetfs/agents/agents.h: fleetfs/face/notify.c -> fleetfs/agents/agents.h"
'
test_expect_success 'profile parsing does not reach the options again (nor by a bare own-folder name)' '
	plant_line fleetfs/config/profile.c "#include \"fleetfs/config/options.h\"" &&
	layers_fail "layers: config/profile reaches what it must not:" \
		"    fleetfs/config/profile.c reaches fleetfs/config/options.h: fleetfs/config/profile.c -> fleetfs/config/options.h" &&
	plant_line fleetfs/config/profile.c "#include \"options.h\"" &&
	layers_fail "layers: config/profile reaches what it must not:" \
		"    fleetfs/config/profile.c reaches fleetfs/config/options.h: fleetfs/config/profile.c -> fleetfs/config/options.h"
'
test_expect_success 'an include spelled past the rules (relative, a bare name of another folder, computed) fails' '
	plant_line fleetfs/agents/agents.c "#include \"../../broker/conn.h\"" &&
	layers_fail "layers: includes check-layers cannot place (write \"fleetfs/PART/x.h\", \"broker/x.h\", \"herdr/x.h\", or a header of the file'"'"'s own folder):" \
		"    fleetfs/agents/agents.c: #include \"../../broker/conn.h\" (a relative path)" &&
	plant_line fleetfs/agents/agents.c "#include \"fleetfs/agents/../../broker/conn.h\"" &&
	grep -q "^layers: includes check-layers cannot place" plant.out &&
	plant_line fleetfs/model/send.c "#include \"conn.h\"" &&
	layers_fail "layers: includes check-layers cannot place (write \"fleetfs/PART/x.h\", \"broker/x.h\", \"herdr/x.h\", or a header of the file'"'"'s own folder):" \
		"    fleetfs/model/send.c: #include \"conn.h\" (not a header of fleetfs/model/)" &&
	plant_line fleetfs/agents/agents.c "#include HDR" &&
	layers_fail "layers: includes check-layers cannot place (write \"fleetfs/PART/x.h\", \"broker/x.h\", \"herdr/x.h\", or a header of the file'"'"'s own folder):" \
		"    fleetfs/agents/agents.c: #include HDR (a computed include)"
'
test_expect_success 'an include in <> of a project header is held to the rule (-I. finds it)' '
	plant_line fleetfs/agents/agents.c "#include <broker/conn.h>" &&
	layers_fail "layers: agents/ reaches outside its layer:" "    fleetfs/agents/agents.c: #include <broker/conn.h>"
'
test_expect_success 'a header in a folder below a part is under no rule: it fails' '
	rm -rf plant && copy_tree plant &&
	mkdir plant/fleetfs/wire/more &&
	printf "#include \"fleetfs/model/mailbox.h\"\n" >plant/fleetfs/wire/more/x.h &&
	layers_fail "layers: files under no rule (add the folder to scripts/check-layers and doc/architecture.md):" \
		"    fleetfs/wire/more/x.h"
'
test_expect_success 'the model reaches broker/ only in its seam (mb_broker.[ch]) and its two named exceptions' '
	plant model/ fleetfs/model/send.c broker/conn.h &&
	plant model/ fleetfs/model/mb_int.h broker/conn.h &&
	plant model/ fleetfs/model/held.c broker/death.h &&
	plant model/ fleetfs/model/dead.c broker/dlq.h &&
	plant model/ fleetfs/model/mailbox.h broker/roster.h
'
# Every model file sees broker/conn.h's declarations (the seam's table
# needs its types): the seam is checked where a call crosses it.
test_expect_success 'a model file that calls the broker past the seam fails; a br_ name in a comment does not' '
	plant_line fleetfs/model/send.c "void mb_x(void *b) { br_ack_box(b, 0, 0, 0); }" &&
	layers_fail "layers: model/seam crosses the seam (call the broker through fleetfs/model/mb_broker.h):" \
		"    fleetfs/model/send.c: calls br_ack_box()" &&
	plant_line fleetfs/model/dead.c "void mb_x(void *b) { br_publish (b); }" &&
	layers_fail "layers: model/seam crosses the seam (call the broker through fleetfs/model/mb_broker.h):" \
		"    fleetfs/model/dead.c: calls br_publish()" &&
	plant_line fleetfs/model/held.c "/* not through br_publish(b) but the seam */" &&
	FLEET_CHECK_ROOT=$PWD/plant "$FLEET_ROOT/scripts/check-layers" >plant.out &&
	grep -x "layers: $N passed, 0 failed" plant.out
'
test_expect_success 'the control service reaches config/ only for the options and profiles' '
	plant spawn/spawnd fleetfs/spawn/spawnd.c fleetfs/config/opts_int.h
'
# issue 42: a Linux-only call outside the platform seam (fleetfs/os/)
# fails, naming the file and the name; the same in a comment or a string
# does not (but a Linux-only path in a string does)
portable_fail() {
	layers_fail "layers: portable: Linux-only names outside the platform seam (call fleetfs/os/os.h):" "$1"
}
test_expect_success 'a Linux-only call outside fleetfs/os/ fails the portable check, naming it' '
	plant_line broker/conn.c "static int x_wake(void) { return eventfd(0, EFD_CLOEXEC); }" &&
	portable_fail "    broker/conn.c: EFD_CLOEXEC eventfd" &&
	plant_line herdr/client.c "#include <sys/sysmacros.h>" &&
	portable_fail "    herdr/client.c: #include <sys/sysmacros.h>" &&
	plant_line fleetfs/mcp/tools.c "static int x_err = ECOMM;" &&
	portable_fail "    fleetfs/mcp/tools.c: ECOMM" &&
	plant_line fleetfs/face/status.c "static const char *x_path = \"/proc/self/mountinfo\";" &&
	portable_fail "    fleetfs/face/status.c: \"/proc/" &&
	plant_line fleetfs/store/applog.c "static int x_sync(int fd) { return fdatasync(fd); }" &&
	portable_fail "    fleetfs/store/applog.c: fdatasync" &&
	plant_line fleetfs/model/send.c "/* not eventfd(0, 0) nor ECOMM here */ static const char *x_word = \"ECOMM pipe2\";" &&
	FLEET_CHECK_ROOT=$PWD/plant "$FLEET_ROOT/scripts/check-layers" >plant.out &&
	grep -x "layers: $N passed, 0 failed" plant.out &&
	plant_line fleetfs/os/os_posix.c "static int x_fd(void) { return eventfd(0, 0); }" &&
	FLEET_CHECK_ROOT=$PWD/plant "$FLEET_ROOT/scripts/check-layers" >plant.out &&
	grep -x "layers: $N passed, 0 failed" plant.out
'
test_expect_success 'a new folder under no rule fails until it has one' '
	rm -rf orphan && copy_tree orphan &&
	mkdir orphan/fleetfs/newpart &&
	echo "int newpart;" >orphan/fleetfs/newpart/x.c &&
	test_must_fail env FLEET_CHECK_ROOT=$PWD/orphan "$FLEET_ROOT/scripts/check-layers" >orphan.out &&
	grep -x "layers: files under no rule (add the folder to scripts/check-layers and doc/architecture.md):" orphan.out &&
	grep -x "    fleetfs/newpart/x.c" orphan.out
'
test_expect_success 'a C file that differs from .clang-format fails check-format, naming it' '
	rm -rf style && copy_tree style &&
	sed -i "s/^{\$/  {/" style/fleetfs/base/log.c &&
	test_must_fail env FLEET_CHECK_ROOT=$PWD/style "$FLEET_ROOT/scripts/check-format" >style.out &&
	grep -x "format: fleetfs/base/log.c differs from .clang-format (fix: clang-format-14 -i fleetfs/base/log.c)" style.out &&
	grep -E "^format: [0-9]+ passed, 1 failed\$" style.out
'
test_expect_success 'a product C file over 1000 lines fails check-size, naming it and its length' '
	rm -rf big && copy_tree big &&
	n=$(wc -l <big/broker/uri.c) &&
	for i in $(seq $((1001 - n))); do echo "/* filler */"; done >>big/broker/uri.c &&
	test_must_fail env FLEET_CHECK_ROOT=$PWD/big "$FLEET_ROOT/scripts/check-size" >big.out &&
	grep -x "broker/uri.c: 1001 lines, over 1000: split it by concern (doc/architecture.md)" big.out &&
	grep -E "^size: [0-9]+ passed, 1 failed\$" big.out
'
# check-format runs clang-format 14, the style's version, whatever
# `clang-format` is; with only another version it checks nothing and says so.
# Another version is stood in for by a script that says it is 16 and
# changes every file.
test_expect_success 'check-format takes clang-format-14 over another clang-format on PATH' '
	command -v clang-format-14 &&
	mkdir -p cf16 &&
	printf "#!/bin/sh\ncase \$1 in --version) echo \"Debian clang-format version 16.0.6\"; exit 0;; esac\nfor f; do :; done; cat \"\$f\"; echo \"/* 16 */\"\n" >cf16/clang-format &&
	chmod +x cf16/clang-format &&
	rm -rf style && copy_tree style &&
	PATH=$PWD/cf16:$PATH FLEET_CHECK_ROOT=$PWD/style "$FLEET_ROOT/scripts/check-format" >cf.out &&
	grep -E "^format: [0-9]+ passed, 0 failed\$" cf.out
'
test_expect_success 'with only another version: nothing checked, exit 2 naming it; CLANG_FORMAT runs it anyway, saying so' '
	mkdir -p only16 &&
	cp cf16/clang-format only16/ &&
	for t in env bash git cmp find sort dirname; do ln -sf "$(command -v $t)" only16/$t || return 1; done &&
	{ PATH=$PWD/only16 FLEET_CHECK_ROOT=$PWD/style "$FLEET_ROOT/scripts/check-format" >o16.out 2>o16.err; rc=$?; } &&
	cat o16.out o16.err &&
	test "$rc" = 2 &&
	grep -xF "format: clang-format 14 is not installed (clang-format here is version 16, whose output differs from 14'"'"'s): install clang-format-14 (Debian: apt-get install clang-format-14), or run another with CLANG_FORMAT=clang-format" o16.err &&
	grep -x "format: 0 passed, 1 failed" o16.out &&
	test_must_fail env PATH=$PWD/only16 CLANG_FORMAT=clang-format FLEET_CHECK_ROOT=$PWD/style "$FLEET_ROOT/scripts/check-format" >o16b.out &&
	head -n 1 o16b.out | grep -xF "format: note: clang-format is version 16, not 14: a difference below may be the version'"'"'s, and a pass is not clang-format 14'"'"'s" &&
	grep -x "format: fleetfs/base/log.c differs from .clang-format (fix: clang-format -i fleetfs/base/log.c)" o16b.out
'

# The contents list atop each long document (scripts/doc-contents): a
# section added without its line, a long document without a list, fail
# --check naming the document; scripts/doc-contents (no --check) makes them
# current, and then --check passes. A "## " line in a ``` fence is no
# heading; a document under 300 lines needs no list.
test_expect_success 'a stale contents list fails doc-contents --check, naming the document; doc-contents makes it current' '
	rm -rf toc && copy_tree toc &&
	grep -q "^<!-- contents" toc/doc/protocol.md &&
	printf "\n## Z. A section added later\n\ntext\n" >>toc/doc/protocol.md &&
	test_must_fail env FLEET_CHECK_ROOT=$PWD/toc "$FLEET_ROOT/scripts/doc-contents" --check >toc.out &&
	cat toc.out &&
	grep -x "contents: doc/protocol.md: its contents list is not its ## headings (fix: scripts/doc-contents)" toc.out &&
	grep -E "^contents: [0-9]+ passed, 1 failed\$" toc.out &&
	FLEET_CHECK_ROOT=$PWD/toc "$FLEET_ROOT/scripts/doc-contents" >fix.out &&
	grep -x "contents: doc/protocol.md: list written" fix.out &&
	test $(wc -l <fix.out) = 1 &&
	sed -n "/^<!-- contents/,/^<!-- \/contents -->/p" toc/doc/protocol.md | tail -n 2 | head -n 1 >last &&
	echo "- [Z. A section added later](#z-a-section-added-later)" >want && test_cmp want last &&
	FLEET_CHECK_ROOT=$PWD/toc "$FLEET_ROOT/scripts/doc-contents" --check >toc.out &&
	grep -E "^contents: [0-9]+ passed, 0 failed\$" toc.out
'
test_expect_success 'a long document without a list fails --check; a fenced ## line is no heading; a short one needs none' '
	rm -rf toc && copy_tree toc &&
	sed -i "/^<!-- contents/,/^<!-- \/contents -->/d" toc/doc/security.md &&
	test_must_fail env FLEET_CHECK_ROOT=$PWD/toc "$FLEET_ROOT/scripts/doc-contents" --check >toc.out &&
	grep -E "^contents: doc/security.md: [0-9]+ lines and no contents list \(fix: scripts/doc-contents\)\$" toc.out &&
	printf "\x60\x60\x60sh\n## not a heading\n\x60\x60\x60\n" >>toc/doc/security.md &&
	printf "# Short\n\n## One\n\ntext\n" >toc/doc/short.md &&
	FLEET_CHECK_ROOT=$PWD/toc "$FLEET_ROOT/scripts/doc-contents" >/dev/null &&
	! grep -q "not a heading" <(sed -n "/^<!-- contents/,/^<!-- \/contents -->/p" toc/doc/security.md) &&
	grep -q "^- \[1. Threat model\](#1-threat-model)\$" toc/doc/security.md &&
	! grep -q "^<!-- contents" toc/doc/short.md &&
	FLEET_CHECK_ROOT=$PWD/toc "$FLEET_ROOT/scripts/doc-contents" --check >toc.out &&
	grep -E "^contents: [0-9]+ passed, 0 failed\$" toc.out
'

# make check is what people run: it must run every check. On a copy with
# one violation for each (a layer, the style, the license line, the size),
# make check (this Makefile, FLEET_CHECK_ROOT the copy) fails naming all
# four; dropping a script from its recipe fails here.
test_expect_success 'make check on a clean copy passes all five checks' '
	rm -rf mk && copy_tree mk &&
	git -C mk init -q &&
	FLEET_CHECK_ROOT=$PWD/mk make -s -C "$FLEET_ROOT" check >mk.out 2>&1 &&
	cat mk.out &&
	grep -x "layers: $N passed, 0 failed" mk.out &&
	grep -E "^format: [0-9]+ passed, 0 failed\$" mk.out &&
	grep -E "^spdx: [0-9]+ passed, 0 failed\$" mk.out &&
	grep -E "^size: [0-9]+ passed, 0 failed\$" mk.out &&
	grep -E "^contents: [0-9]+ passed, 0 failed\$" mk.out
'
test_expect_success 'make check on a copy with one violation of each check fails, naming each' '
	rm -rf mk && copy_tree mk &&
	git -C mk init -q &&
	printf "#include \"fleetfs/face/hosts.h\"\n" >>mk/fleetfs/face/notify.c &&
	sed -i "s/^{\$/  {/" mk/fleetfs/base/log.c &&
	sed -i "/SPDX-License-Identifier/d" mk/herdr/sanitize.h &&
	n=$(wc -l <mk/broker/uri.c) &&
	for i in $(seq $((1001 - n))); do echo "/* filler */"; done >>mk/broker/uri.c &&
	printf "\n## A section added without its line in the contents\n" >>mk/doc/operations.md &&
	test_must_fail env FLEET_CHECK_ROOT=$PWD/mk make -s -C "$FLEET_ROOT" check >mk.out 2>&1 &&
	cat mk.out &&
	grep -x "layers: face/notify reaches what it must not:" mk.out &&
	grep -x "layers: $((N - 1)) passed, 1 failed" mk.out &&
	grep -x "format: fleetfs/base/log.c differs from .clang-format (fix: clang-format-14 -i fleetfs/base/log.c)" mk.out &&
	grep -E "^format: [0-9]+ passed, 1 failed\$" mk.out &&
	grep -xF "spdx: herdr/sanitize.h has no \"SPDX-License-Identifier: Apache-2.0\" line in its first 5 lines (add it as a comment, after any #! line)" mk.out &&
	grep -E "^spdx: [0-9]+ passed, 1 failed\$" mk.out &&
	grep -x "broker/uri.c: 1001 lines, over 1000: split it by concern (doc/architecture.md)" mk.out &&
	grep -E "^size: [0-9]+ passed, 1 failed\$" mk.out &&
	grep -x "contents: doc/operations.md: its contents list is not its ## headings (fix: scripts/doc-contents)" mk.out &&
	grep -E "^contents: [0-9]+ passed, 1 failed\$" mk.out
'
# issue 46: two files of one folder that call each other, compiled, are a
# circle; a third that only calls them is not part of it
test_expect_success 'check-circles names the files of a folder that call one another, and only those' '
	mkdir -p circ/obj/room &&
	printf "int b(int);\nint a(int x) { return x ? b(x - 1) : 0; }\n" >circ/a.c &&
	printf "int a(int);\nint b(int x) { return x ? a(x - 1) : 1; }\n" >circ/b.c &&
	printf "int a(int);\nint c(void) { return a(3); }\n" >circ/c.c &&
	for f in a b c; do cc -c circ/$f.c -o circ/obj/room/$f.o || return 1; done &&
	test_must_fail "$FLEET_ROOT/scripts/check-circles" circ/obj >circ.out 2>&1 &&
	cat circ.out &&
	grep -x "check-circles: room/: these files call one another in a circle: a b " circ.out &&
	grep -x "circles: 0 passed, 1 failed" circ.out &&
	rm circ/obj/room/b.o &&
	"$FLEET_ROOT/scripts/check-circles" circ/obj >circ.out 2>&1 &&
	grep -x "circles: 1 passed, 0 failed" circ.out
'

test_done
