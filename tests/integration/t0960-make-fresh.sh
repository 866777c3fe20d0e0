#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Makefile on a machine where the build libraries (or pkg-config itself)
# are not installed yet, as on a newcomer's first `make run`: parsing it
# prints nothing (make run installs them first), and a build says once, in
# one line, what is missing and what to run. PKG_CONFIG_LIBDIR pointing
# nowhere makes pkg-config find no library, as on a fresh machine.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "the Makefile is the same for every build: once, in the plain run" ;; esac

NOWHERE=$TEST_DIR/no-pc
mkdir -p "$NOWHERE"

test_expect_success 'make run with no library installed: nothing on stderr before it starts' '
    PKG_CONFIG_LIBDIR=$NOWHERE make -n -C "$FLEET_ROOT" run >out 2>err &&
    grep -qx "scripts/run" out &&
    test_cmp /dev/null err
'

test_expect_success 'make run without pkg-config at all: nothing on stderr either' '
    mkdir -p bin &&
    ln -sf "$(command -v make)" "$(command -v cat)" bin/ &&
    PATH=$TEST_DIR/bin make -n -C "$FLEET_ROOT" run >out 2>err &&
    grep -qx "scripts/run" out &&
    test_cmp /dev/null err
'

test_expect_success 'a build without the libraries fails with one line naming them and the fix' '
    test_must_fail env PKG_CONFIG_LIBDIR=$NOWHERE make -s -C "$FLEET_ROOT" B="$TEST_DIR/b" all >out 2>err &&
    grep -v "^make.*Error" err >said &&
    test "$(wc -l <said)" = 1 &&
    grep -q "fuse3" said &&
    grep -q "scripts/install-deps" said &&
    ! test -e "$TEST_DIR/b/fleetfs"
'

# What make run installs (issue 34): install-deps' plan, read with --plan,
# has no packaging tool; --deb (make deb's) has them. apt's own metadata
# says the plain run does not pull debhelper or lintian in either: they are
# not in the Depends and Recommends of its packages, followed recursively
# (every alternative counted, so a superset of what apt would install).
# fakeroot is: dpkg-dev (build-essential) recommends it.
PACKAGING="debhelper lintian fakeroot"
test_expect_success 'install-deps: make run'"'"'s plain run plans no packaging tool; --deb (make deb'"'"'s) does' '
    "$FLEET_ROOT/scripts/install-deps" --plan >plan &&
    cat plan | tr "\n" " " && echo &&
    grep -qx libfuse3-dev plan && grep -qx rabbitmq-server plan && grep -qx clang-format plan &&
    for p in $PACKAGING; do ! grep -qx $p plan || { echo "plain plan has $p" >&2; exit 1; }; done &&
    "$FLEET_ROOT/scripts/install-deps" --plan --deb >plan.deb &&
    for p in $PACKAGING libfuse3-dev build-essential; do grep -qx $p plan.deb || exit 1; done &&
    ! grep -qx rabbitmq-server plan.deb &&
    test_must_fail "$FLEET_ROOT/scripts/install-deps" --plain 2>err && grep -q "unknown argument" err &&
    grep -qx "scripts/install-deps" "$FLEET_ROOT/scripts/run" &&
    grep -q "^scripts/install-deps --deb " "$FLEET_ROOT/scripts/deb"
'

test_expect_success 'apt: the plain plan'"'"'s packages pull in neither debhelper nor lintian' '
    apt-cache depends --recurse --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
        $(cat plan) >closure 2>/dev/null &&
    test $(grep -c "^[a-z]" closure) -gt 100 &&
    grep -qx libfuse3-dev closure &&
    ! grep -qx debhelper closure && ! grep -qx lintian closure
'

# make check's license line (scripts/check-spdx) on a repository of its own:
# a file without the line is named and counted, prose and data are not
# checked, C files only with SPDX_CHECK_C=1 (the default once they carry
# it; SPDX_CHECK_C=0 leaves them out).
test_expect_success 'scripts/check-spdx names each source file without the Apache-2.0 line and fails' '
    mkdir -p spdx/doc && cd spdx && git init -q . &&
    printf "#!/bin/sh\n# SPDX-License-Identifier: Apache-2.0\necho ok\n" >good.sh &&
    printf "#!/bin/sh\necho no license\n" >bad.sh &&
    printf "# SPDX-License-Identifier: MIT\nall:\n" >Makefile &&
    printf "int x;\n" >x.c &&
    printf "prose\n" >README && printf "# doc\n" >doc/a.md && printf "0.1.0\n" >VERSION &&
    git add good.sh bad.sh Makefile x.c README doc/a.md VERSION &&
    printf "#!/bin/sh\n" >new.sh &&
    cd .. &&
    test_must_fail env SPDX_CHECK_C=0 "$FLEET_ROOT/scripts/check-spdx" "$TEST_DIR/spdx" >out &&
    cat out &&
    test "$(tail -n1 out)" = "spdx: 1 passed, 3 failed" &&
    grep -q "^spdx: bad.sh has no" out && grep -q "^spdx: Makefile has no" out &&
    grep -q "^spdx: new.sh has no" out && ! grep -q -e good.sh -e x.c -e README -e a.md -e VERSION out &&
    test_must_fail env SPDX_CHECK_C=1 "$FLEET_ROOT/scripts/check-spdx" "$TEST_DIR/spdx" >out.c &&
    test "$(tail -n1 out.c)" = "spdx: 1 passed, 4 failed" && grep -q "^spdx: x.c has no" out.c
'

test_expect_success 'this repository passes it, and make check runs it' '
    "$FLEET_ROOT/scripts/check-spdx" >out &&
    tail -n1 out | grep -qE "^spdx: [0-9]{3,} passed, 0 failed$" &&
    make -n -C "$FLEET_ROOT" check | grep -q "scripts/check-spdx"
'

test_done
