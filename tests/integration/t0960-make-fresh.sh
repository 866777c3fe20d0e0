#!/usr/bin/env bash
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

test_done
