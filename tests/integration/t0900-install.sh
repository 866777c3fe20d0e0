#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make install / make uninstall into a temporary DESTDIR: what lands where,
# the installed daemon working (--version, keygen, a real mount), the units
# naming the installed paths (and passing systemd-analyze verify when it is
# there), uninstall taking away every file install put there.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: make install and the unit files: no fleetfs code runs differently" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0900
new_vhost $FLEET_VHOST

D=$TEST_DIR/root
# the build under test (FLEETFS_BUILD=build/san installs the ASan binary)
B=${FLEETFS_BUILD:-build}
export D B

test_expect_success 'make install DESTDIR=... puts each file in its place' '
    make -s -C "$FLEET_ROOT" install B="$B" DESTDIR="$D" >install.out 2>&1 &&
    (cd "$D" && find . -type f | sort) >files &&
    {
        echo ./usr/local/bin/fleetfs
        echo ./usr/local/bin/fleetfs-broker
        echo ./usr/local/lib/fleetfs/broker-lavinmq
        echo ./usr/local/share/doc/fleetfs/LICENSE
        echo ./usr/local/share/man/man1/fleetfs-broker.1
        echo ./usr/local/lib/systemd/system/fleetfs@.service
        echo ./usr/local/lib/systemd/user/fleetfs.service
        echo ./usr/local/share/doc/fleetfs/README
        (cd "$FLEET_ROOT/doc" && ls *.md) | sed "s|^|./usr/local/share/doc/fleetfs/|"
        echo ./usr/local/share/man/man1/fleetfs.1
    } | sort >want &&
    test_cmp want files &&
    test "$(stat -c %a "$D/usr/local/bin/fleetfs")" = 755 &&
    test "$(stat -c %a "$D/usr/local/share/man/man1/fleetfs.1")" = 644 &&
    cmp "$FLEETFS" "$D/usr/local/bin/fleetfs" &&
    test "$(stat -c %a "$D/usr/local/bin/fleetfs-broker")" = 755 &&
    cmp "$FLEET_ROOT/scripts/broker" "$D/usr/local/bin/fleetfs-broker" &&
    cmp "$FLEET_ROOT/LICENSE" "$D/usr/local/share/doc/fleetfs/LICENSE"
'

test_expect_success 'PREFIX moves everything' '
    make -s -C "$FLEET_ROOT" install B="$B" DESTDIR="$TEST_DIR/root2" PREFIX=/opt/ff >/dev/null &&
    test -x "$TEST_DIR/root2/opt/ff/bin/fleetfs" &&
    test -f "$TEST_DIR/root2/opt/ff/share/man/man1/fleetfs.1" &&
    grep -q "^ExecStart=/opt/ff/bin/fleetfs " "$TEST_DIR/root2/opt/ff/lib/systemd/system/fleetfs@.service" &&
    test -z "$(find "$TEST_DIR/root2" -type f ! -path "*/opt/ff/*")"
'

test_expect_success 'the installed fleetfs runs: --version, --help, keygen' '
    "$D/usr/local/bin/fleetfs" --version >v &&
    test "$(cat v)" = "fleetfs $(cat "$FLEET_ROOT/VERSION")" &&
    "$D/usr/local/bin/fleetfs" --help >fhelp &&
    grep -q "fuse.fleetfs" fhelp && grep -q "(run by fleetfs-broker host add)" fhelp &&
    "$D/usr/local/bin/fleetfs" keygen "$TEST_DIR/k" >out &&
    test "$(stat -c %a k)" = 600 && grep -q "^ed25519 " k.pub
'

# The operator's host tool from the installed path: FLEETFS unset and a
# decoy fleetfs first on PATH that fails, so the fleetfs it runs for the
# declarations can only be the one installed beside it.
test_expect_success 'the installed fleetfs-broker: --help says its name; host add uses the fleetfs beside it' '
    "$D/usr/local/bin/fleetfs-broker" --help >help &&
    grep -q "^  fleetfs-broker host add|update|remove|passwd NAME" help && ! grep -q scripts/broker help &&
    "$D/usr/local/bin/fleetfs-broker" host --help >hhelp &&
    grep -q "^fleetfs-broker host add NAME" hhelp &&
    mkdir -p decoy && printf "#!/bin/sh\necho the fleetfs on PATH was run >&2\nexit 1\n" >decoy/fleetfs &&
    chmod +x decoy/fleetfs &&
    (unset FLEETFS && PATH=$TEST_DIR/decoy:$PATH "$D/usr/local/bin/fleetfs-broker" host add instb \
        --dir "$BROKER_DIR" --vhost $FLEET_VHOST >instb.login 2>instb.add; echo $? >instb.rc) &&
    cat instb.add && test "$(cat instb.rc)" = 0 &&
    grep -q "^FLEET_BROKER_URI=amqp://instb:[A-Za-z0-9_-]\{20,\}@127.0.0.1:$BROKER_PORT/$FLEET_VHOST$" instb.login &&
    n=$(broker_count lead.instb.inbox) && test "$n" = 0
'

# Its LavinMQ half (lib/fleetfs/broker-lavinmq) is installed and used: a
# host add with --kind lavinmq and LAVINMQ_API naming a port where no
# LavinMQ listens gets as far as the half, whose HTTP client says that API
# did not answer (without the administrator's password). The same
# fleetfs-broker copied where no half is beside it says the half is
# missing instead: the check tells the two apart.
test_expect_success 'the installed fleetfs-broker --kind lavinmq reaches its installed LavinMQ half' '
    (unset FLEETFS FLEET_BROKER_KIND &&
        LAVINMQ_API=http://admin:Pw-not-shown@127.0.0.1:1 test_must_fail "$D/usr/local/bin/fleetfs-broker" \
        host add lv --broker 127.0.0.1:1 --kind lavinmq) >lv.out 2>lv.err &&
    cat lv.err &&
    grep -q "^broker: host add: cannot make the login lv: " lv.err &&
    grep -q "LavinMQ.s HTTP API (127.0.0.1:1) did not answer PUT /api/users/lv" lv.err &&
    ! grep -q Pw-not-shown lv.err && test_cmp /dev/null lv.out &&
    mkdir -p nohalf/bin && cp "$D/usr/local/bin/fleetfs-broker" "$D/usr/local/bin/fleetfs" nohalf/bin/ &&
    (unset FLEETFS FLEET_BROKER_KIND &&
        LAVINMQ_API=http://admin:Pw-not-shown@127.0.0.1:1 test_must_fail nohalf/bin/fleetfs-broker \
        host add lv --broker 127.0.0.1:1 --kind lavinmq) 2>nohalf.err &&
    cat nohalf.err &&
    grep -q "needs broker-lavinmq" nohalf.err && ! grep -q "did not answer" nohalf.err
'

# On LavinMQ (FLEET_BROKER_KIND=lavinmq), the route operations.md gives an
# operator: --broker HOST:PORT --kind lavinmq with LAVINMQ_API, its HTTP API
# as an administrator (this test's node's guest; BROKER_HTTP_PORT from its
# env, tests/lib.sh), FLEET_BROKER_KIND unset; the login is made with
# LavinMQ's patterns (its write pattern allows the default exchange "").
if [[ $(broker_kind) == lavinmq ]]; then
    test_expect_success 'on LavinMQ: the installed fleetfs-broker host add --broker --kind lavinmq makes a host' '
        (unset FLEETFS FLEET_BROKER_KIND && PATH=$TEST_DIR/decoy:$PATH \
            LAVINMQ_API=http://guest:guest@127.0.0.1:$BROKER_HTTP_PORT "$D/usr/local/bin/fleetfs-broker" \
            host add instl --broker 127.0.0.1:$BROKER_PORT --vhost $FLEET_VHOST --kind lavinmq \
            >instl.login 2>instl.add; echo $? >instl.rc) &&
        cat instl.add && test "$(cat instl.rc)" = 0 &&
        grep -q "^FLEET_BROKER_URI=amqp://instl:[A-Za-z0-9_-]\{20,\}@127.0.0.1:$BROKER_PORT/$FLEET_VHOST$" instl.login &&
        rmqctl list_users -q >users && grep -q "^instl[[:space:]]" users &&
        rmqctl list_permissions -q -p $FLEET_VHOST >perms &&
        awk -F "\t" "\$1 == \"instl\" { print \$3 }" perms >write && cat write &&
        grep -q "^^(|" write &&
        n=$(broker_count lead.instl.inbox) && test "$n" = 0
    '
else
    test_skip_planned 'on LavinMQ: the installed fleetfs-broker host add --broker --kind lavinmq makes a host' \
        "on LavinMQ only (FLEET_BROKER_KIND=lavinmq; tests/lavinmq-shard runs it)"
fi

test_expect_success 'the installed fleetfs mounts and sends' '
    FLEETFS=$D/usr/local/bin/fleetfs mount_fleet inst1 peers=inst2 &&
    FLEETFS=$D/usr/local/bin/fleetfs mount_fleet inst2 peers=inst1 &&
    grep -q "^broker: connected$" inst1/status &&
    echo "from the installed binary" >inst1/peers/inst2/send &&
    wait_for 5 "grep -q \"from the installed binary\" inst2/leads/inst2/inbox" &&
    unmount_fleet inst1 && unmount_fleet inst2
'

test_expect_success 'the man page is installed where man finds it, with fstab and systemd' '
    MANPATH=$D/usr/local/share/man man -P cat fleetfs >man.txt 2>/dev/null &&
    grep -q "fuse.fleetfs" man.txt &&
    grep -q "fleetfs@.service" man.txt &&
    grep -q "NOTIFY_SOCKET" man.txt &&
    grep -q "fleetfs-broker(1)" man.txt &&
    MANPATH=$D/usr/local/share/man man -P cat fleetfs-broker >bman.txt 2>/dev/null &&
    grep -q "fleetfs-broker host add" bman.txt &&
    grep -q "/usr/local/bin/fleetfs-broker" bman.txt
'

test_expect_success 'the units name the installed binary and the /etc files' '
    u=$D/usr/local/lib/systemd/system/fleetfs@.service &&
    grep -q "^ExecStart=/usr/local/bin/fleetfs /run/fleet/%i -f -o coord_id=%i," "$u" &&
    grep -q "^EnvironmentFile=/etc/fleetfs/%i.env$" "$u" &&
    grep -q "^Type=notify$" "$u" &&
    grep -q "^ExecStart=/usr/local/bin/fleetfs %h/fleet -f$" "$D/usr/local/lib/systemd/user/fleetfs.service" &&
    ! grep -q "@[A-Z]*@" "$u" "$D/usr/local/lib/systemd/user/fleetfs.service"
'

# systemd-analyze verify checks that ExecStart= exists: run it in a private
# mount namespace where the DESTDIR's bin/ is /usr/local/bin.
if command -v systemd-analyze >/dev/null && unshare -m --propagation private true 2>/dev/null; then
    test_expect_success 'systemd-analyze verify: both units are clean' '
        mkdir -p xdg && chmod 700 xdg &&
        unshare -m --propagation private bash -c "
            mount --bind \"\$D/usr/local/bin\" /usr/local/bin &&
            systemd-analyze verify --man=no \"\$D/usr/local/lib/systemd/system/fleetfs@.service\" &&
            XDG_RUNTIME_DIR=$TEST_DIR/xdg systemd-analyze verify --user --man=no \
                \"\$D/usr/local/lib/systemd/user/fleetfs.service\"" >verify.out 2>&1 &&
        cat verify.out &&
        test ! -s verify.out
    '
    # the sandbox FUSE allows (doc/operations.md, "Sandboxing"): exposure as
    # systemd-analyze scores it, and none of the options that would give the
    # service its own mount namespace (the mount would be invisible outside)
    test_expect_success 'systemd-analyze security: the system unit is sandboxed, its mount stays visible' '
        u=$D/usr/local/lib/systemd/system/fleetfs@.service &&
        systemd-analyze security --offline=true "$u" >sec.out 2>&1 &&
        tail -n1 sec.out &&
        level=$(sed -n "s/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p" sec.out) &&
        awk -v l="$level" "BEGIN { exit !(l > 0 && l < 5) }" &&
        grep -q "^NoNewPrivileges=yes$" "$u" &&
        grep -q "^DeviceAllow=/dev/fuse rw$" "$u" &&
        ! grep -E "^(ProtectSystem|ProtectHome|PrivateTmp|PrivateDevices|PrivateMounts|ProtectKernel[A-Za-z]*|ProtectControlGroups|ProtectHostname|ProtectProc|ReadWritePaths|ReadOnlyPaths|InaccessiblePaths|TemporaryFileSystem|BindPaths)=" "$u"
    '
else
    echo "# systemd-analyze or unshare -m not available: units not verified"
fi

test_expect_success 'make uninstall removes every file install put there' '
    make -s -C "$FLEET_ROOT" uninstall B="$B" DESTDIR="$D" >uninstall.out 2>&1 &&
    find "$D" -type f >left &&
    test_cmp /dev/null left &&
    test ! -e "$D/usr/local/share/doc/fleetfs" &&
    make -s -C "$FLEET_ROOT" uninstall B="$B" DESTDIR="$TEST_DIR/root2" PREFIX=/opt/ff >/dev/null &&
    test -z "$(find "$TEST_DIR/root2" -type f)"
'

test_done
