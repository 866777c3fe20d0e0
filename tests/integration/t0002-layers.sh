#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make check keeps the layers (scripts/check-layers) and the one style
# (scripts/check-format) and the size of a file (scripts/check-size): on a copy of the tree, each passes as the tree is,
# and each fails, naming the part and the file, on a planted violation of
# each of its rules (doc/architecture.md draws them).
. "$(dirname "$0")/../lib.sh"

# a fresh copy of the product tree and the two checks, in dir $1
copy_tree() {
	mkdir -p "$1/scripts" &&
	cp -r "$FLEET_ROOT/fleetfs" "$FLEET_ROOT/broker" "$FLEET_ROOT/herdr" "$1/" &&
	cp "$FLEET_ROOT/.clang-format" "$1/" &&
	cp "$FLEET_ROOT/scripts/check-layers" "$FLEET_ROOT/scripts/check-format" "$FLEET_ROOT/scripts/check-size" "$1/scripts/"
}

test_expect_success 'the tree as it is passes both checks, and the picture is printed' '
	copy_tree clean &&
	FLEET_CHECK_ROOT=$PWD/clean "$FLEET_ROOT/scripts/check-layers" >out &&
	grep -x "layers: 16 passed, 0 failed" out &&
	grep -E "^  base/ +may include: fleetfs/base/\$" out &&
	grep -E "^  face/ +may include: .*fleetfs/agents/" out &&
	FLEET_CHECK_ROOT=$PWD/clean "$FLEET_ROOT/scripts/check-format" >fmt &&
	grep -E "^format: [0-9]+ passed, 0 failed\$" fmt &&
	FLEET_CHECK_ROOT=$PWD/clean "$FLEET_ROOT/scripts/check-size" >size &&
	grep -E "^size: [0-9]+ passed, 0 failed\$" size
'

# plant RULE FILE HEADER: FILE (in a fresh copy) includes HEADER, which RULE
# forbids; check-layers must fail and name both
plant() {
	local rule=$1 file=$2 header=$3 dir=plant-${1//\//_}
	rm -rf "$dir" && copy_tree "$dir" &&
	test -f "$dir/$file" &&
	printf "#include \"%s\"\n" "$header" >>"$dir/$file" &&
	test_must_fail env FLEET_CHECK_ROOT=$PWD/$dir "$FLEET_ROOT/scripts/check-layers" >"$dir.out" &&
	grep -x "layers: $rule reaches outside its layer:" "$dir.out" &&
	grep -xF "    $file: #include \"$header\"" "$dir.out" &&
	grep -x "layers: 15 passed, 1 failed" "$dir.out"
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
	grep -x "format: fleetfs/base/log.c differs from .clang-format (fix: clang-format -i fleetfs/base/log.c)" style.out &&
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
test_done
