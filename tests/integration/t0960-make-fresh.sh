#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Makefile on a machine where the build libraries (or pkg-config itself)
# are not installed yet, as on a newcomer's first `make run`: parsing it
# prints nothing (make run installs them first), and a build says once, in
# one line, what is missing and what to run. PKG_CONFIG_LIBDIR pointing
# nowhere makes pkg-config find no library, as on a fresh machine.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*|*/portable) test_skip_all --planned "the Makefile is the same for every build: once, in the plain run" ;; esac

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
# has no packaging tool; --deb (make deb's) has them. curl is in the plain
# plan: the LavinMQ half of scripts/broker asks LavinMQ's HTTP API with it
# (make test's LavinMQ shard, FLEET_BROKER_KIND=lavinmq make run). apt's
# own metadata says the plain run does not pull debhelper or lintian in
# either: they are not in the Depends and Recommends of its packages,
# followed recursively (every alternative counted, so a superset of what
# apt would install). fakeroot is (dpkg-dev, of build-essential, recommends
# it): the apt-get install that install-deps runs holds it out, and the
# next test asks apt what that install does on a fresh machine.
PACKAGING="debhelper lintian fakeroot"
test_expect_success 'install-deps: make run'"'"'s plain run plans curl and no packaging tool; --deb (make deb'"'"'s) does' '
    "$FLEET_ROOT/scripts/install-deps" --plan >plan &&
    cat plan | tr "\n" " " && echo &&
    grep -qx libfuse3-dev plan && grep -qx rabbitmq-server plan && grep -qx clang-format plan &&
    grep -qx curl plan && grep -qx jq plan &&
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

# A fresh machine's dpkg database, made from this one's: the packages
# Debian installs everywhere (Essential, Priority required or important)
# and what they depend on (Depends, Pre-Depends; the first alternative
# installed here), with their status records. install-deps --simulate asks
# apt-get -s what its own install would do there, Recommends included.
test_expect_success 'apt-get -s on a fresh machine: the plain install-deps installs no packaging tool; --deb does' '
    dpkg-query -W -f="\${Package}\t\${Essential}\t\${Priority}\t\${Pre-Depends}, \${Depends}\t\${Provides}\t\${db:Status-Status}\n" >all &&
    awk -F "\t" "
        \$6 == \"installed\" {
            inst[\$1] = 1; dep[\$1] = \$4
            if (\$2 == \"yes\" || \$3 == \"required\" || \$3 == \"important\") todo[++n] = \$1
            np = split(\$5, pv, \",\")
            for (i = 1; i <= np; i++) { p = pv[i]; sub(/^ +/, \"\", p); sub(/[ (:].*/, \"\", p); if (p != \"\" && !(p in prov)) prov[p] = \$1 }
        }
        END {
            for (k = 1; k <= n; k++) {
                pkg = todo[k]; if (pkg in seen) continue; seen[pkg] = 1; print pkg
                na = split(dep[pkg], alts, \",\")
                for (i = 1; i <= na; i++) {
                    nc = split(alts[i], cs, \"|\")
                    for (j = 1; j <= nc; j++) {
                        c = cs[j]; sub(/^ +/, \"\", c); sub(/[ (:].*/, \"\", c)
                        if (c in inst) { todo[++n] = c; break }
                        if (c in prov) { todo[++n] = prov[c]; break }
                    }
                }
            }
        }" all >fresh.list &&
    test $(wc -l <fresh.list) -gt 30 && grep -qx dpkg fresh.list && ! grep -qx build-essential fresh.list &&
    mkdir -p fresh && dpkg-query -s $(cat fresh.list) >fresh/status &&
    "$FLEET_ROOT/scripts/install-deps" --simulate fresh >sim 2>&1 &&
    grep "^Inst " sim | awk "{ print \$2 }" >sim.inst &&
    echo "plain: $(wc -l <sim.inst) packages" &&
    for p in build-essential dpkg-dev rabbitmq-server clang curl jq; do
        grep -qx $p sim.inst || { echo "a fresh make run would not install $p" >&2; exit 1; }
    done &&
    for p in $PACKAGING; do
        ! grep -qx $p sim.inst || { echo "a fresh make run would install $p" >&2; exit 1; }
    done &&
    "$FLEET_ROOT/scripts/install-deps" --deb --simulate fresh >sim.deb 2>&1 &&
    grep "^Inst " sim.deb | awk "{ print \$2 }" >sim.deb.inst &&
    for p in $PACKAGING; do grep -qx $p sim.deb.inst || { echo "make deb would not install $p" >&2; exit 1; }; done
'

# make deb on a machine without dpkg-dev: scripts/deb runs install-deps
# --deb (which installs it) before it asks dpkg-architecture anything.
# Stand-ins first on PATH log each call: dpkg-query (install-deps' check,
# then the real one), dpkg-architecture (failing: exit 2; test_must_fail takes
# 127 for a missing command).
test_expect_success 'make deb without dpkg-dev: install-deps --deb runs before dpkg-architecture is asked' '
    mkdir -p stub &&
    printf "#!/bin/sh\necho dpkg-query >>%s/calls\nexec %s \"\$@\"\n" "$TEST_DIR" "$(command -v dpkg-query)" >stub/dpkg-query &&
    printf "#!/bin/sh\necho dpkg-architecture >>%s/calls\necho \"dpkg-architecture: not installed\" >&2\nexit 2\n" "$TEST_DIR" >stub/dpkg-architecture &&
    chmod +x stub/dpkg-query stub/dpkg-architecture &&
    test_must_fail env PATH=$TEST_DIR/stub:$PATH "$FLEET_ROOT/scripts/deb" "$TEST_DIR/debout" >deb.out 2>&1 &&
    cat deb.out &&
    head -n1 calls | grep -qx dpkg-query &&
    grep -qx dpkg-architecture calls &&
    test "$(grep -n -m1 -x dpkg-architecture calls | cut -d: -f1)" -gt "$(grep -c -x dpkg-query calls)" &&
    test ! -e "$TEST_DIR/debout/deb"
'

# make check's license line (scripts/check-spdx) on a repository of its own:
# a file without the line is named and counted, prose and data are not
# checked, C files are (by default, as with SPDX_CHECK_C=1; SPDX_CHECK_C=0
# leaves them out).
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
    test "$(tail -n1 out.c)" = "spdx: 1 passed, 4 failed" && grep -q "^spdx: x.c has no" out.c &&
    test_must_fail env -u SPDX_CHECK_C "$FLEET_ROOT/scripts/check-spdx" "$TEST_DIR/spdx" >out.default &&
    test_cmp out.c out.default
'

test_expect_success 'this repository passes it, and make check runs it' '
    "$FLEET_ROOT/scripts/check-spdx" >out &&
    tail -n1 out | grep -qE "^spdx: [0-9]{3,} passed, 0 failed$" &&
    make -n -C "$FLEET_ROOT" check | grep -q "scripts/check-spdx"
'

test_done
