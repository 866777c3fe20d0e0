#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make deb: the Debian package is built with Debian's tooling, lintian finds
# no error and no warning in it (a planted warning fails), it holds what an
# operator needs (daemon, the host tool fleetfs-broker, man pages, units,
# docs, the Apache-2.0 copyright), its dependencies come from
# dpkg-shlibdeps (and it recommends curl and jq, which fleetfs-broker's
# LavinMQ half runs), its units are installed but not enabled; dpkg installs it into a scratch root, and from there the daemon
# runs, and fleetfs-broker adds two hosts to this test's broker (on
# LavinMQ through --kind lavinmq and LAVINMQ_API, the installed LavinMQ
# half) whose logins then carry a message between two mounts of the
# installed daemon.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*|*/portable) test_skip_all --planned "the package is built from source with its own flags: once, in the plain run" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0950
new_vhost $FLEET_VHOST

VERSION=$(cat "$FLEET_ROOT/VERSION")
DEB=fleetfs_${VERSION}_$(dpkg --print-architecture).deb

# make test's own install-deps (CI's .ci/run) leaves the packaging tools
# out; they are installed here, when missing, as make deb would.
test_expect_success 'scripts/install-deps --deb: the packaging tools are there (installed when missing)' '
    "$FLEET_ROOT/scripts/install-deps" --deb &&
    for t in dpkg-buildpackage dh dh_installsystemduser lintian dpkg-shlibdeps fakeroot; do
        command -v $t >/dev/null || { echo "$t missing after scripts/install-deps --deb" >&2; exit 1; }
    done
'

test_expect_success 'make deb builds the package, lintian-clean of errors and warnings' '
    if ! make -s -C "$FLEET_ROOT" deb B="$TEST_DIR/b" >deb.out 2>&1; then cat deb.out >&2; false; fi &&
    test -f "b/$DEB" &&
    grep -qx "deb: lintian $DEB" deb.out &&
    ! grep -E "^[EW]: " deb.out &&
    grep "^deb: .*/$DEB\$" deb.out
'

# make deb's lintian step (scripts/deb --lintian: the same function) on a
# copy of the package with one planted warning, Priority: extra (lintian's
# priority-extra-is-replaced-by-priority-optional, a W: tag): refused.
test_expect_success 'a lintian warning fails it too: a copy with a planted warning is refused' '
    dpkg-deb -R "b/$DEB" planted &&
    sed -i "s/^Priority: optional\$/Priority: extra/" planted/DEBIAN/control &&
    grep -qx "Priority: extra" planted/DEBIAN/control &&
    dpkg-deb -b planted planted.deb >/dev/null &&
    test_must_fail "$FLEET_ROOT/scripts/deb" --lintian planted.deb >lint.out 2>&1 &&
    cat lint.out &&
    grep -q "^W: fleetfs: priority-extra-is-replaced-by-priority-optional" lint.out &&
    grep -q "lintian found errors or warnings in planted.deb" lint.out
'

test_expect_success 'it holds the daemon, the man page, both units and the docs' '
    dpkg-deb -c "b/$DEB" | awk "{ print \$6 }" >contents &&
    for f in ./usr/bin/fleetfs ./usr/bin/fleetfs-broker ./usr/lib/fleetfs/broker-lavinmq ./usr/share/man/man1/fleetfs.1.gz \
        ./usr/share/man/man1/fleetfs-broker.1.gz \
        ./usr/lib/systemd/system/fleetfs@.service ./usr/lib/systemd/user/fleetfs.service \
        ./usr/share/doc/fleetfs/operations.md ./usr/share/doc/fleetfs/agents.md \
        ./usr/share/doc/fleetfs/README ./usr/share/doc/fleetfs/copyright; do
        grep -qx "$f" contents || { echo "missing: $f" >&2; exit 1; }
    done &&
    ! grep -q "\.wants/" contents
'

test_expect_success 'dependencies come from dpkg-shlibdeps, curl, jq and bubblewrap recommended; units are not enabled' '
    dpkg-deb -f "b/$DEB" Depends >depends &&
    for lib in libfuse3-3 librabbitmq4 libjansson4 libsodium23 libglib2.0-0 fuse3; do
        grep -q "$lib" depends || { echo "not in Depends: $lib ($(cat depends))" >&2; exit 1; }
    done &&
    dpkg-deb -f "b/$DEB" Recommends >recommends &&
    grep -qw curl recommends && grep -qw jq recommends && grep -qw bubblewrap recommends &&
    dpkg-deb -e "b/$DEB" ctl &&
    ! cat ctl/postinst ctl/preinst 2>/dev/null | grep -E "systemctl (--user )?(enable|start)|deb-systemd-invoke"
'

test_expect_success 'debian/copyright: machine-readable, Apache-2.0, the linked libraries named' '
    dpkg-deb -x "b/$DEB" x &&
    c=x/usr/share/doc/fleetfs/copyright &&
    head -n1 $c | grep -qx "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" &&
    grep -qx "License: Apache-2.0" $c &&
    grep -q "/usr/share/common-licenses/Apache-2.0" $c &&
    for l in "libfuse3.*LGPL-2.1" "rabbitmq-c.*MIT" "jansson.*MIT" "libsodium.*ISC" "GLib.*LGPL-2.1"; do
        grep -q "$l" $c || { echo "copyright does not say: $l" >&2; exit 1; }
    done &&
    ! grep -qi "no license" $c
'

# Installed with dpkg itself into a scratch root, not extracted: dpkg --root
# puts its database there too, so dpkg says what it installed. Chroot-free:
# --force-script-chrootless runs the maintainer scripts here with
# DPKG_ROOT set (debhelper's systemd snippets then do nothing), where a
# chroot would need root and a shell inside the empty scratch root;
# --force-not-root lets it run unprivileged; --force-depends because the
# scratch root's database has none of the libraries (this system has them).
R=$TEST_DIR/root
export R
test_expect_success 'dpkg --root installs it into a scratch root; the daemon runs from there' '
    mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" && : >"$R/var/lib/dpkg/status" &&
    if ! dpkg --root="$R" --force-script-chrootless --force-not-root --force-depends \
        -i "b/$DEB" >dpkg.out 2>&1; then cat dpkg.out >&2; false; fi &&
    dpkg --root="$R" -s fleetfs | grep -qx "Status: install ok installed" &&
    dpkg --root="$R" -L fleetfs >listed &&
    grep -qx /usr/bin/fleetfs-broker listed && test -x "$R/usr/bin/fleetfs-broker" &&
    "$R/usr/bin/fleetfs" --version >v &&
    test "$(cat v)" = "fleetfs $VERSION" &&
    "$R/usr/bin/fleetfs" keygen "$TEST_DIR/k" &&
    test "$(stat -c %a "$TEST_DIR/k")" = 600 &&
    test -s "$TEST_DIR/k.pub" &&
    grep -q "^ExecStart=/usr/bin/fleetfs " "$R/usr/lib/systemd/user/fleetfs.service" &&
    MANPATH=$R/usr/share/man man -P cat fleetfs-broker 2>/dev/null | grep -q "fleetfs-broker host add"
'

test_expect_success 'the installed fleetfs-broker: --help and host --help, under its own name' '
    "$R/usr/bin/fleetfs-broker" --help >help &&
    cat help &&
    grep -q "^  fleetfs-broker host add|update|remove|passwd NAME" help &&
    ! grep -q "scripts/" help &&
    "$R/usr/bin/fleetfs-broker" host --help >hhelp &&
    grep -q "^fleetfs-broker host add NAME " hhelp &&
    test_must_fail "$R/usr/bin/fleetfs-broker" 2>usage &&
    grep -q "fleetfs-broker host add" usage
'

# As an operator runs it: from the installed path, from a directory of its
# own, FLEETFS and FLEET_BROKER_KIND unset and a decoy fleetfs first on
# PATH, so the declarations can only come from the fleetfs installed
# beside it and the broker's kind only from the command line. On RabbitMQ
# with rabbitmqctl reaching the broker (RABBITMQCTL: the installed tool's
# own ctl on this test's private node stands in for it); on LavinMQ
# (FLEET_BROKER_KIND=lavinmq) as operations.md says: --kind lavinmq and
# LAVINMQ_API, its HTTP API as an administrator (the private node's guest;
# BROKER_HTTP_PORT is in its env, tests/lib.sh), so the LavinMQ half
# installed in lib/fleetfs/ makes the logins.
op_host_add() {
    local h=$1
    if [[ $(broker_kind) == lavinmq ]]; then
        (cd op && unset FLEETFS FLEET_BROKER_KIND RABBITMQCTL &&
            PATH=$TEST_DIR/decoy:$PATH LAVINMQ_API=http://guest:guest@127.0.0.1:$BROKER_HTTP_PORT \
            "$R/usr/bin/fleetfs-broker" host add $h --broker 127.0.0.1:$BROKER_PORT --vhost $FLEET_VHOST \
            --kind lavinmq)
    else
        (cd op && unset FLEETFS FLEET_BROKER_KIND LAVINMQ_API &&
            PATH=$TEST_DIR/decoy:$PATH RABBITMQCTL="$R/usr/bin/fleetfs-broker ctl --dir $BROKER_DIR --" \
            "$R/usr/bin/fleetfs-broker" host add $h --broker 127.0.0.1:$BROKER_PORT --vhost $FLEET_VHOST)
    fi
}
test_expect_success "the installed fleetfs-broker host add makes two hosts on the test broker ($(broker_kind))" '
    mkdir -p op decoy && printf "#!/bin/sh\necho the fleetfs on PATH was run >&2\nexit 1\n" >decoy/fleetfs &&
    chmod +x decoy/fleetfs &&
    for h in pkga pkgb; do
        if ! op_host_add $h >$h.login 2>$h.add; then cat $h.add >&2; exit 1; fi
        cat $h.add
    done &&
    grep -q "^FLEET_BROKER_URI=amqp://pkga:[A-Za-z0-9_-]\{20,\}@127.0.0.1:$BROKER_PORT/$FLEET_VHOST\$" pkga.login &&
    rmqctl list_users -q >users && grep -q "^pkga[[:space:]]" users && grep -q "^pkgb[[:space:]]" users &&
    rmqctl list_permissions -q -p $FLEET_VHOST >perms && cat perms &&
    awk -F "\t" "\$1 == \"pkga\" { print \$2 }" perms >conf &&
    grep -qF "^(lead\\.pkga\\.(inbox|receipts|dead)|" conf &&
    awk -F "\t" "\$1 == \"pkga\" { print \$3 }" perms >write &&
    if [ "$(broker_kind)" = lavinmq ]; then grep -q "^^(|" write; else grep -q "^^(amq" write; fi &&
    n=$(broker_count lead.pkgb.inbox) && test "$n" = 0 &&
    test -z "$(ls op)"
'

# The logins work: the installed daemon mounts on each (its own variable),
# the broker lists their connections under those users, and a message goes
# from pkga to pkgb (read from pkgb's inbox file).
test_expect_success 'their logins work: the installed fleetfs mounts on them and a message goes across' '
    export LOGIN_pkga="$(sed -n "s/^FLEET_BROKER_URI=//p" pkga.login)" &&
    export LOGIN_pkgb="$(sed -n "s/^FLEET_BROKER_URI=//p" pkgb.login)" &&
    FLEETFS=$R/usr/bin/fleetfs mount_fleet pkga broker_uri_env=LOGIN_pkga peers=pkgb inject=none &&
    FLEETFS=$R/usr/bin/fleetfs mount_fleet pkgb broker_uri_env=LOGIN_pkgb peers=pkga inject=none &&
    wait_for 15 "grep -qx \"broker: connected\" pkga/status && grep -qx \"broker: connected\" pkgb/status" &&
    rmqctl list_connections -q user vhost >conns &&
    grep -qE "^pkga[[:space:]]+$FLEET_VHOST\$" conns && grep -qE "^pkgb[[:space:]]+$FLEET_VHOST\$" conns &&
    echo "from the packaged fleetfs" >pkga/peers/pkgb/send &&
    wait_for 10 "grep -q \"from the packaged fleetfs\" pkgb/leads/pkgb/inbox" &&
    unmount_fleet pkga && unmount_fleet pkgb
'

test_expect_success 'dpkg --root removes it again: no file of it is left in the scratch root' '
    if ! dpkg --root="$R" --force-script-chrootless --force-not-root -r fleetfs >rm.out 2>&1; then cat rm.out >&2; false; fi &&
    test ! -e "$R/usr/bin/fleetfs-broker" && test ! -e "$R/usr/bin/fleetfs" &&
    test -z "$(find "$R/usr" -type f)"
'

test_done
