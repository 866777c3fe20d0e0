#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make deb: the Debian package is built with Debian's tooling, lintian finds
# no error in it, it holds what an operator needs (daemon, man page, units,
# docs), its dependencies come from dpkg-shlibdeps, its units are installed
# but not enabled, and the binary taken out of it runs.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "the package is built from source with its own flags: once, in the plain run" ;; esac

VERSION=$(cat "$FLEET_ROOT/VERSION")
DEB=fleetfs_${VERSION}_$(dpkg --print-architecture).deb

test_expect_success 'the packaging tools are installed (scripts/install-deps)' '
    for t in dpkg-buildpackage dh dh_installsystemduser lintian dpkg-shlibdeps; do
        command -v $t >/dev/null || { echo "$t missing: run scripts/install-deps" >&2; exit 1; }
    done
'

test_expect_success 'make deb builds the package, lintian-clean of errors' '
    if ! make -s -C "$FLEET_ROOT" deb B="$TEST_DIR/b" >deb.out 2>&1; then cat deb.out >&2; false; fi &&
    test -f "b/$DEB" &&
    grep "^deb: .*/$DEB\$" deb.out
'

test_expect_success 'it holds the daemon, the man page, both units and the docs' '
    dpkg-deb -c "b/$DEB" | awk "{ print \$6 }" >contents &&
    for f in ./usr/bin/fleetfs ./usr/share/man/man1/fleetfs.1.gz \
        ./usr/lib/systemd/system/fleetfs@.service ./usr/lib/systemd/user/fleetfs.service \
        ./usr/share/doc/fleetfs/operations.md ./usr/share/doc/fleetfs/agents.md \
        ./usr/share/doc/fleetfs/README ./usr/share/doc/fleetfs/copyright; do
        grep -qx "$f" contents || { echo "missing: $f" >&2; exit 1; }
    done &&
    ! grep -q "\.wants/" contents
'

test_expect_success 'dependencies come from dpkg-shlibdeps; units are not enabled' '
    dpkg-deb -f "b/$DEB" Depends >depends &&
    for lib in libfuse3-3 librabbitmq4 libjansson4 libsodium23 libglib2.0-0 fuse3; do
        grep -q "$lib" depends || { echo "not in Depends: $lib ($(cat depends))" >&2; exit 1; }
    done &&
    dpkg-deb -e "b/$DEB" ctl &&
    ! cat ctl/postinst ctl/preinst 2>/dev/null | grep -E "systemctl (--user )?(enable|start)|deb-systemd-invoke"
'

test_expect_success 'the extracted binary runs: --version and keygen' '
    dpkg-deb -x "b/$DEB" x &&
    x/usr/bin/fleetfs --version >v &&
    test "$(cat v)" = "fleetfs $VERSION" &&
    x/usr/bin/fleetfs keygen "$TEST_DIR/k" &&
    test "$(stat -c %a "$TEST_DIR/k")" = 600 &&
    test -s "$TEST_DIR/k.pub" &&
    grep -q "^ExecStart=/usr/bin/fleetfs " x/usr/lib/systemd/user/fleetfs.service
'

test_done
