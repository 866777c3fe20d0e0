#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# doc/operations.md run as printed, so that it cannot drift from what
# fleetfs, make install, the units and scripts/broker do (issue 22).
#
# Every indented block of operations.md (a command session, a config or
# unit file, a line of output) is found by the first test and must be in
# the table below: either run and compared here, or listed as not run,
# with the reason, as a planned skip (what needs systemd as init, a second
# real host, dpkg on this system, a full disk). A new block that is in
# neither fails that test: whoever adds one decides which it is.
#
# The doc's absolute paths (/etc/fleetfs, /run/fleet, /var/lib/fleetfs,
# /usr/local, /home/u, /fleet) go under this test's temp root; its broker
# (broker.example.net:5672, vhost /coord) is this file's private broker;
# `sudo` is dropped and `make install` gets DESTDIR. The `$` sessions run
# through tests/tools/doc-tour, which compares what each command prints
# with what the doc shows (times, keys, passwords and ports masked). The
# units are not run by systemd (the container has none as init): their
# ExecStart runs the way systemd runs it, as in t0910.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: the commands and files of operations.md; the daemon code they start runs under ASan in t0100-t0910" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
command -v systemd-analyze >/dev/null || test_skip_all "no systemd-analyze (package systemd)"
command -v amqp-get >/dev/null || test_skip_all "no amqp-get (package amqp-tools)"
command -v mount.fuse3 >/dev/null || test_skip_all "no mount.fuse3 (package fuse3)"
unshare -m --propagation private true 2>/dev/null || test_skip_all "unshare -m is not permitted here"
broker_start_own

OPS=$FLEET_ROOT/doc/operations.md
B=${FLEETFS_BUILD:-build}
R=$TEST_DIR/root           # the doc's /etc, /run, /var/lib, /usr/local, /fleet
H=$TEST_DIR/home/u         # the doc's /home/u
RUN=$FLEET_ROOT/tests/tools/notify-listen
TOUR=$FLEET_ROOT/tests/tools/doc-tour
export R H B

# the doc's paths under the temp root (sed; DOC_SUBST of doc-tour)
ROOTED="s|/etc/fleetfs|$R/etc/fleetfs|g; s|/run/fleet|$R/run/fleet|g; s|/var/lib/fleetfs|$R/var/lib/fleetfs|g; s|/home/u|$H|g; s| /fleet | $R/fleet |g"
UNROOTED="s|$R/|/|g; s|$H|/home/u|g"

# block ERE: the text of the first indented block (split at blank lines)
# whose lines, joined by spaces, match ERE; indent removed
block() {
    local line
    # the pattern through the environment: awk -v would process its
    # backslashes (gawk turns \[ into [, mawk keeps it)
    line=$(blocks | P="$1" awk -F'\t' '$2 ~ ENVIRON["P"] { print $1; exit }')
    [[ -n $line ]] || { echo "block: none matches $1" >&2; return 1; }
    tail -n +"$line" "$OPS" | awk '/^ *$/ || !/^    / { exit } { sub(/^    /, ""); print }'
}
# between START END: the indented lines (indent removed, blank lines kept)
# from the first line matching START to the next matching END
between() {
    # fails when the end is not found: a doc that lost its marker must not
    # hand the rest of the file on as the block
    S="$1" E="$2" awk 'BEGIN { s = ENVIRON["S"]; e = ENVIRON["E"] }
        $0 ~ s { on = 1; next } on && $0 ~ e { done = 1; exit }
        on && /^    / { sub(/^    /, ""); print; next } on && /^ *$/ { print }
        END { if (!done) { print "between: \"" e "\" not found after \"" s "\"" >"/dev/stderr"; exit 1 } }' "$OPS"
}
# every block of the doc, one line each: LINE<TAB>its lines joined by spaces.
# A block starts with a line indented 4 or more after a blank line (an
# indented line straight after prose continues a list item).
blocks() {
    awk '
        function flush() { if (b != "") print start "\t" b; b = "" }
        /^ *$/ { flush(); blank = 1; next }
        /^    / && (blank || b != "") { l = $0; sub(/^ +/, "", l); if (b == "") { start = NR; b = l } else b = b " " l; blank = 0; next }
        { flush(); blank = 0 }
        END { flush() }' "$OPS"
}
# unit_value KEY [UNIT]: the installed unit's KEY=, %i as mac, under $R
unit_value() {
    sed -n "s/^$1=//p" "${2:-$R/usr/local/lib/systemd/system/fleetfs@.service}" |
        sed -E -e "s|%i|mac|g" -e "s|%h|$H|g" -e "s#(^|[ =,])/(etc|run|var|usr/local)/#\1$R/\2/#g"
}
# listen NAME: a notify socket for NAME (tests/tools/notify-listen), log NAME.notify
listen() {
    { "$RUN" "$TEST_DIR/$1.sock" "$TEST_DIR/$1.notify" & } &&
        at_exit "kill $! 2>/dev/null; true" &&
        wait_for 20 "grep -q listening '$TEST_DIR/$1.notify'"
}
in_ns() { nsenter -t "$(cat "$TEST_DIR/ns.pid")" -m -- "$@"; }

# Each block of operations.md, by the start of its text (an ERE on its
# lines joined by spaces): "run" (the test here that runs or compares it)
# or "skip" (the reason it is not run here).
cat >known <<'EOF'
^make sudo make install|run|Installing: make install into a temp DESTDIR puts the files where the doc says; uninstall removes them
^sudo apt install \./fleetfs_|skip|installs into this system's /usr (apt has no temp root); t0950 builds the package, installs it with dpkg --root into a scratch root and runs fleetfs and fleetfs-broker from there
^\$ mkdir -p /etc/fleetfs/trusted|run|Installing: the key, trust and environment-file sessions print what the doc shows
^\$ install -m 0600 /dev/null /etc/fleetfs/mac\.env|run|Installing: the key, trust and environment-file sessions print what the doc shows
^\[fleetfs\] peers = fleet01:fleet02 key = /etc/fleetfs/mac\.key|run|fleetfs@.service: ExecStart with the doc's env file, mac.conf and key: READY, Status "broker: connected (...)"
^\$ sudo systemctl daemon-reload|skip|systemctl and journalctl need systemd as init, which the test container does not run; the unit's ExecStart runs as systemd would (fleetfs@.service test here, and t0910)
^\[Service\] User=alice|skip|a user other than root mounts through the setuid fusermount3 with /dev/fuse usable by that user (root-only here) under systemd; checked here: the drop-in's keys are the shipped unit's (it overrides, not adds)
^\[Unit\] Description=fleetfs: lead|run|fleetfs@.service: the doc's unit, its sandbox block and its systemd-analyze score are the installed unit's
^\[Service\] Type=notify NotifyAccess=main|run|fleetfs@.service: the doc's unit, its sandbox block and its systemd-analyze score are the installed unit's
^\[Install\] WantedBy=multi-user\.target|run|fleetfs@.service: the doc's unit, its sandbox block and its systemd-analyze score are the installed unit's
^NoNewPrivileges=yes|run|fleetfs@.service: the doc's unit, its sandbox block and its systemd-analyze score are the installed unit's
^→ Overall exposure level|run|fleetfs@.service: the doc's unit, its sandbox block and its systemd-analyze score are the installed unit's
^\[fleetfs\] peers = fleet01:fleet02 key = /home/u/|run|fleetfs.service (user): the doc's fleetfs.conf in ~/.config/fleetfs, coord_id the short host name, state in ~/.local/state
^\$ systemctl --user daemon-reload|skip|systemctl --user, journalctl and loginctl need a systemd user manager, which the test container does not run; the user unit's ExecStart runs as systemd would (test here)
^fleetfs  /fleet  fuse\.fleetfs|run|mount(8): the doc's fstab line and its mount -t line mount, with the URI from the env file
^# mount -t fuse\.fleetfs|run|mount(8): the doc's fstab line and its mount -t line mount, with the URI from the env file
^\[fleetfs\] agents = w1:w2|run|Local agents and profiles: the doc's config sections are accepted by a mount as printed
^\[agent w2\]|run|Local agents and profiles: the doc's config sections are accepted by a mount as printed
^# a section alone declares an agent too \[agent w3\]|run|Local agents and profiles: the doc's config sections are accepted by a mount as printed
^\[fleetfs\] # who may start and stop agents here|run|Local agents and profiles: the doc's config sections are accepted by a mount as printed
^\[profile worker\]|run|Local agents and profiles: the doc's config sections are accepted by a mount as printed
^\[Mount\] EnvironmentFile=|skip|a drop-in for systemd's fleet.mount: no systemd as init here; the same environment file feeds mount(8) in the fstab test here (sh -c 'set -a; . ENV; exec mount ...')
^[0-9-]+T[0-9:.]+Z fleetfs warn: broker: connection lost|run|Logs: the doc's log line is what a broker shutdown logs
^state_dir: degraded:|skip|needs a full disk: t0380 puts the state_dir on a small tmpfs, fills it, and checks this line
^fleetfs: not mounting: state_dir DIR is in use|run|fleetfs@.service: a second fleetfs on the same state_dir is refused with the doc's line
^rabbitmqctl list_consumers -p /coord|run|fleetfs@.service: rabbitmqctl list_consumers and list_connections show the connection the doc names
^amqp-get --url=|run|fleetfs@.service: amqp-get takes a dead letter off fleet.dlq with an operator's login; a host's login gets 403
^\$ export RABBITMQCTL='rabbitmqctl -n rabbit@broker'|run|Broker logins: host add, passwd and remove print what the doc shows
^\$ fleetfs-broker host update|run|Broker logins: host add, passwd and remove print what the doc shows
^\$ fleetfs-broker host passwd|run|Broker logins: host add, passwd and remove print what the doc shows
^\$ fleetfs-broker host remove|run|Broker logins: host add, passwd and remove print what the doc shows
EOF

test_expect_success 'every block of operations.md is run here or listed as not run, with the reason' '
    blocks >blocks &&
    test -s blocks &&
    doc_blocks_listed operations.md blocks known
'

# the blocks not run here, each as a planned skip with its reason
while IFS="|" read -r pat kind why; do
    [[ $kind == skip ]] || continue
    line=$(blocks | awk -F'\t' -v p="$pat" '$2 ~ p { print $1; exit }')
    test_skip_planned "operations.md:${line:-?}: ${pat//\\/}" "$why"
done <known

# ---------------------------------------------------------------- Installing

test_expect_success 'Installing: make install into a temp DESTDIR puts the files where the doc says; uninstall removes them' '
    block "^make sudo make install" >install.sh &&
    cat install.sh &&
    test "$(head -n1 install.sh)" = make &&
    sed -e "s/  *#.*//; s/^sudo //; s|^make|make -s -C $FLEET_ROOT B=$B|; s|install\$|install DESTDIR=$R|" \
        install.sh >install.run &&
    bash -e install.run >install.out 2>&1 &&
    P=$R/usr/local &&
    test -x $P/bin/fleetfs &&
    test -f $P/share/man/man1/fleetfs.1 &&
    test -x $P/bin/fleetfs-broker &&
    test -f $P/share/man/man1/fleetfs-broker.1 &&
    grep -q "operator.s command for the hosts. broker logins, .bin/fleetfs-broker." "$OPS" &&
    test -f $P/lib/systemd/system/fleetfs@.service &&
    test -f $P/lib/systemd/user/fleetfs.service &&
    test -f $P/share/doc/fleetfs/operations.md &&
    cmp "$FLEETFS" $P/bin/fleetfs &&
    grep -q "installs .bin/fleetfs., the manual page .share/man/man1/fleetfs.1., the" "$OPS" &&
    make -s -C "$FLEET_ROOT" install B="$B" DESTDIR="$TEST_DIR/scratch" >/dev/null &&
    make -s -C "$FLEET_ROOT" uninstall B="$B" DESTDIR="$TEST_DIR/scratch" >/dev/null &&
    test -z "$(find "$TEST_DIR/scratch" -type f)"
'

# The broker's side first (the env file needs a login): vhost /coord, and
# the login mac that scripts/broker host add makes for the doc's lead.
rmqctl add_vhost /coord >/dev/null &&
    rmqctl set_permissions -p /coord guest '.*' '.*' '.*' >/dev/null &&
    "$FLEET_ROOT/scripts/broker" host add mac --dir "$BROKER_DIR" --vhost /coord >mac.login 2>mac.add ||
    test_fail_all "cannot make the login mac on the private broker: $(cat mac.add)"
MAC_URI=$(sed -n 's/^FLEET_BROKER_URI=//p' mac.login)
GUEST_URI=$(broker_uri /coord)

test_expect_success 'Installing: the key, trust and environment-file sessions print what the doc shows' '
    mkdir -p tour1 &&
    { DOC_START=$TEST_DIR/tour1 \
    DOC_SUBST="$ROOTED; s|amqp://mac:SECRET@broker.example.net:5672/%2Fcoord|$MAC_URI|" \
    DOC_UNSUBST="$UNROOTED" PATH="$R/usr/local/bin:$PATH" \
        "$TOUR" "$OPS" "^Each host needs a signing key" "^## systemd" "$TEST_DIR/tour1" >result; echo $? >result.rc; } &&
    cat result && test "$(cat result.rc)" = 0 &&
    test $(grep -c "^ok" result) = 5 &&
    test "$(stat -c %a "$R/etc/fleetfs/mac.key")" = 600 &&
    cmp "$R/etc/fleetfs/mac.key.pub" "$R/etc/fleetfs/trusted/mac.pub" &&
    test "$(stat -c %a "$R/etc/fleetfs/mac.env")" = 600 &&
    test "$(cat "$R/etc/fleetfs/mac.env")" = "FLEET_BROKER_URI=$MAC_URI"
'

# ---------------------------------------------------------------- the units

test_expect_success 'fleetfs@.service: the doc'"'"'s unit, its sandbox block and its systemd-analyze score are the installed unit'"'"'s' '
    u=$R/usr/local/lib/systemd/system/fleetfs@.service &&
    sed -n "/^The unit as installed/,/^### /p" "$OPS" | sed -n "s/^    //p" >doc.unit &&
    grep -v "^#" "$u" | grep -v "^\$" >inst.unit &&
    test_cmp inst.unit doc.unit &&
    block "^NoNewPrivileges=yes" >doc.sandbox &&
    test $(wc -l <doc.sandbox) -ge 10 &&
    grep -A$(($(wc -l <doc.sandbox) - 1)) -x "NoNewPrivileges=yes" inst.unit >inst.sandbox &&
    test_cmp inst.sandbox doc.sandbox &&
    block "^\\[Service\\] User=alice" >dropin &&
    grep -x "User=alice" dropin &&
    for k in $(sed -n "s/^\\([A-Za-z]*\\)=.*/\\1/p" dropin | grep -v "^User\$"); do grep -q "^$k=" inst.unit || exit 1; done &&
    block "^→ Overall exposure" >doc.score &&
    systemd-analyze security --offline=true "$u" >sec.out 2>&1 &&
    tail -n1 sec.out >inst.score &&
    test_cmp doc.score inst.score
'

test_expect_success 'fleetfs@.service: ExecStart with the doc'"'"'s env file, mac.conf and key: READY, Status "broker: connected (...)"' '
    block "^\\[fleetfs\\] peers = fleet01:fleet02 key = /etc/fleetfs/mac.key" | sed -e "$ROOTED" >"$R/etc/fleetfs/mac.conf" &&
    grep -q "^key = $R/etc/fleetfs/mac.key\$" "$R/etc/fleetfs/mac.conf" &&
    test "$(unit_value EnvironmentFile)" = "$R/etc/fleetfs/mac.env" &&
    mkdir -p -m 0700 "$R/run/$(unit_value RuntimeDirectory)" "$R/var/lib/$(unit_value StateDirectory)" &&
    listen mac &&
    execstart=$(unit_value ExecStart) &&
    echo "$execstart" &&
    { ( set -a && . "$R/etc/fleetfs/mac.env" && set +a &&
        exec env NOTIFY_SOCKET="$TEST_DIR/mac.sock" $execstart ) >>mac.log 2>&1 & } &&
    echo $! >.harness/pid.mac &&
    at_exit "kill $! 2>/dev/null; fusermount3 -u -z $R/run/fleet/mac 2>/dev/null; true" &&
    wait_for 15 "grep -q READY=1 mac.notify" &&
    wait_for 10 "grep -q \"STATUS=broker: connected (amqp://mac:\\*\\*\\*@127.0.0.1:$BROKER_PORT/%2Fcoord)\" mac.notify" &&
    grep "STATUS=broker: connected" mac.notify | head -n1 &&
    grep -q "^# Status: \"broker: connected (...)\"" <(block "^\\\$ sudo systemctl daemon-reload" | sed -n "s/^\\\$ systemctl status fleetfs@mac *//p") &&
    m=$R/run/fleet/mac &&
    grep -qx "coord_id: mac" $m/status &&
    ls $m/peers >peers && cat peers && grep -qx fleet01 peers && grep -qx fleet02 peers &&
    grep -q "^signing: on (ed25519; 1 trusted keys in $R/etc/fleetfs/trusted)\$" $m/status &&
    test -e "$R/var/lib/fleetfs/mac/lock"
'

test_expect_success 'fleetfs@.service: rabbitmqctl list_consumers and list_connections show the connection the doc names' '
    block "^rabbitmqctl list_consumers" >ctl.sh &&
    cat ctl.sh && test $(wc -l <ctl.sh) = 2 &&
    sed -e "s|^rabbitmqctl |\"$FLEET_ROOT/scripts/broker\" ctl --dir \"$BROKER_DIR\" -- |" ctl.sh >ctl.run &&
    bash -e ctl.run >ctl.out 2>&1 &&
    cat ctl.out &&
    grep -q "^lead\\.mac\\.inbox" ctl.out &&
    grep -qF "{\"connection_name\",\"fleetfs mac@$(hostname)\"}" ctl.out
'

test_expect_success 'fleetfs@.service: amqp-get takes a dead letter off fleet.dlq with an operator'"'"'s login; a host'"'"'s login gets 403' '
    "$FLEET_ROOT/$B/tools/rawpub" "$GUEST_URI" lead.mac.inbox --body "not an envelope" --confirm &&
    wait_for 10 "grep -q \"fleet.dlq\" mac.log" &&
    wait_for 10 "test \"\$(rmqctl list_queues -p /coord -q name messages | awk \"\\\$1 == \\\"fleet.dlq\\\" { print \\\$2 }\")\" = 1" &&
    block "^amqp-get --url=" >dlq.sh &&
    cat dlq.sh &&
    sed -e "s|admin:PASSWORD@broker.example.net:5672|guest:guest@127.0.0.1:$BROKER_PORT|" dlq.sh >dlq.run &&
    bash dlq.run >dlq.out 2>&1 &&
    cat dlq.out && test "$(cat dlq.out)" = "not an envelope" &&
    sed -e "s|amqp://admin:PASSWORD@broker.example.net:5672/%2Fcoord|$MAC_URI|" dlq.sh >dlq.host &&
    ! grep -q "guest:guest" dlq.host &&
    test_must_fail bash dlq.host >dlq.host.out 2>&1 &&
    cat dlq.host.out && grep -q "ACCESS_REFUSED" dlq.host.out
'

test_expect_success 'fleetfs@.service: a second fleetfs on the same state_dir is refused with the doc'"'"'s line' '
    block "^fleetfs: not mounting: state_dir DIR is in use" >doc.lock &&
    mkdir -p second &&
    { ( set -a && . "$R/etc/fleetfs/mac.env" && set +a &&
        exec "$R/usr/local/bin/fleetfs" "$TEST_DIR/second" -f -o "coord_id=mac,config=$R/etc/fleetfs/mac.conf,state_dir=$R/var/lib/fleetfs/mac,takeover_grace=1s" ) >second.out 2>&1; echo $? >second.rc; } &&
    test "$(cat second.rc)" = 1 &&
    cat second.out &&
    grep "^fleetfs: not mounting: state_dir" second.out |
        sed -e "s|$R/var/lib/fleetfs/mac|DIR|g; s/(pid [0-9]*)/(pid N)/; s/waited [0-9]* ms/waited 15000 ms/" >got.lock &&
    test_cmp doc.lock got.lock
'

test_expect_success 'fleetfs@.service: SIGTERM unmounts (STOPPING=1, "unmounted" in the log)' '
    pid=$(cat .harness/pid.mac) &&
    kill -TERM $pid &&
    wait_for 15 "fleet_gone mac" &&
    grep -q STOPPING=1 mac.notify &&
    ! mountpoint -q "$R/run/fleet/mac" &&
    grep -q "unmounted" mac.log
'

test_expect_success 'fleetfs.service (user): the doc'"'"'s fleetfs.conf in ~/.config/fleetfs, coord_id the short host name, state in ~/.local/state' '
    me=$(hostname -s) &&
    mkdir -p "$H/.config/fleetfs/trusted" &&
    "$R/usr/local/bin/fleetfs" keygen "$H/.config/fleetfs/key" >/dev/null &&
    cp "$H/.config/fleetfs/key.pub" "$H/.config/fleetfs/trusted/$me.pub" &&
    install -m 0600 /dev/null "$H/.config/fleetfs/broker.env" &&
    echo "FLEET_BROKER_URI=$GUEST_URI" >"$H/.config/fleetfs/broker.env" &&
    block "^\\[fleetfs\\] peers = fleet01:fleet02 key = /home/u/" | sed -e "$ROOTED" >"$H/.config/fleetfs/fleetfs.conf" &&
    u=$R/usr/local/lib/systemd/user/fleetfs.service &&
    cat "$H/.config/fleetfs/fleetfs.conf" &&
    grep -q "^key = $H/.config/fleetfs/key\$" "$H/.config/fleetfs/fleetfs.conf" &&
    test "$(unit_value EnvironmentFile "$u")" = "$H/.config/fleetfs/broker.env" &&
    test "$(unit_value ExecStart "$u")" = "$R/usr/local/bin/fleetfs $H/fleet -f" &&
    unit_value ExecStartPre "$u" | sed "s/^-//" >pre.sh && cat pre.sh &&
    { bash pre.sh 2>/dev/null; true; } && test -d "$H/fleet" &&
    listen user &&
    { ( set -a && . "$H/.config/fleetfs/broker.env" && set +a &&
        exec env -u XDG_CONFIG_HOME -u XDG_STATE_HOME HOME="$H" NOTIFY_SOCKET="$TEST_DIR/user.sock" $(unit_value ExecStart "$u") ) >>user.log 2>&1 & } &&
    echo $! >.harness/pid.user &&
    at_exit "kill $! 2>/dev/null; fusermount3 -u -z $H/fleet 2>/dev/null; true" &&
    wait_for 15 "grep -q READY=1 user.notify" &&
    grep -qx "coord_id: $me" "$H/fleet/status" &&
    ls "$H/fleet/peers" >upeers && grep -qx fleet01 upeers && grep -qx fleet02 upeers &&
    test -e "$H/.local/state/fleetfs/$me/lock" &&
    wait_for 10 "grep -q \"^broker: connected\$\" $H/fleet/status"
'

# ---------------------------------------------------------------- agents, profiles

test_expect_success 'Local agents and profiles: the doc'"'"'s config sections are accepted by a mount as printed' '
    between "^## Configuring local agents" "^Rules, all checked at start" >agents.conf &&
    cat agents.conf && grep -q "^\[agent w3\]" agents.conf &&
    mount_fleet agentsdoc insecure "config=$TEST_DIR/agents.conf" &&
    grep -qx "coord_id: agentsdoc" agentsdoc/status &&
    unmount_fleet agentsdoc &&
    between "^## Profiles and spawn_from" "^The host takes requests from its own queue" | sed -e "s|/srv/work|$R/srv/work|" >spawn.conf &&
    cat spawn.conf && grep -q "^\[profile worker\]" spawn.conf &&
    mkdir -p "$R/srv/work" bin &&
    printf "#!/bin/sh\nexit 0\n" >bin/claude && chmod +x bin/claude &&
    PATH=$TEST_DIR/bin:$PATH mount_fleet spawndoc insecure "config=$TEST_DIR/spawn.conf" &&
    grep -qx "coord_id: spawndoc" spawndoc/status &&
    unmount_fleet spawndoc &&
    ! grep -E "fleetfs (error|warn): .*(config|profile|agent)" agentsdoc.log spawndoc.log
'

# ---------------------------------------------------------------- mount(8)

test_expect_success 'mount(8): the doc'"'"'s fstab line and its mount -t line mount, with the URI from the env file' '
    { unshare -m --propagation private sleep 100000 & } &&
    echo $! >ns.pid &&
    at_exit "in_ns sh -c \"grep -o \\\" $TEST_DIR/[^ ]*\\\" /proc/self/mounts | sort -r | xargs -r -n1 umount -l\"; kill $(cat ns.pid); true" &&
    wait_for 5 "test \"\$(readlink /proc/$(cat ns.pid)/ns/mnt)\" != \"\$(readlink /proc/self/ns/mnt)\"" &&
    in_ns mount --bind "$R/usr/local/bin" /usr/local/bin &&
    echo "state_dir = $R/var/lib/fleetfs/mac" >>"$R/etc/fleetfs/mac.conf" &&
    block "^fleetfs  /fleet  fuse.fleetfs" | sed -e "$ROOTED" >fstab &&
    cat fstab && grep -q " $R/fleet " fstab &&
    in_ns mount --bind "$TEST_DIR/fstab" /etc/fstab &&
    mkdir -p "$R/fleet" &&
    in_ns sh -c "set -a; . $R/etc/fleetfs/mac.env; exec mount $R/fleet" 2>fstab.err &&
    in_ns findmnt -n -o FSTYPE,SOURCE "$R/fleet" >mnt && cat mnt &&
    test "$(cat mnt)" = "fuse.fleetfs fleetfs" &&
    in_ns grep -qx "coord_id: mac" "$R/fleet/status" &&
    wait_for 10 "in_ns grep -q \"^broker: connected\$\" $R/fleet/status" &&
    wait_for 10 "in_ns umount $R/fleet 2>/dev/null || ! in_ns mountpoint -q $R/fleet" &&
    block "^# mount -t fuse.fleetfs" | sed -e "s/^# //" -e "$ROOTED" >mountt &&
    cat mountt && grep -q " $R/fleet -o " mountt &&
    wait_for 10 "! pgrep -f \"fleetfs fleetfs $R/fleet\" >/dev/null" &&
    in_ns sh -c "set -a; . $R/etc/fleetfs/mac.env; exec $(cat mountt)" 2>mountt.err &&
    in_ns grep -qx "coord_id: mac" "$R/fleet/status" &&
    in_ns ls "$R/fleet/peers" | grep -qx fleet01 &&
    wait_for 10 "in_ns umount $R/fleet 2>/dev/null || ! in_ns mountpoint -q $R/fleet" &&
    ! grep -q "$MAC_URI" fstab.err mountt.err
'

# ---------------------------------------------------------------- broker logins
# The session runs the fleetfs-broker that make install put under $R (the
# Installing test above), found on PATH as an operator's shell finds it,
# with FLEETFS unset: the fleetfs it declares with is the one beside it.

test_expect_success 'Broker logins: host add, passwd and remove print what the doc shows' '
    mkdir -p tour2 &&
    { DOC_START=$TEST_DIR/tour2 \
    DOC_SUBST="s|rabbitmqctl -n rabbit@broker|$R/usr/local/bin/fleetfs-broker ctl --dir $BROKER_DIR --|; s|broker.example.net:5672|127.0.0.1:$BROKER_PORT|g" \
    DOC_UNSUBST="s|127.0.0.1:$BROKER_PORT|broker.example.net:5672|g" \
    DOC_MASK="s#(amqp://fleet01:)[^@]*@#\\1<password>@#" \
    PATH="$R/usr/local/bin:$PATH" \
        env -u FLEETFS "$TOUR" "$OPS" "^## Broker logins" "^## Running on a cluster" "$TEST_DIR/tour2" >result; echo $? >result.rc; } &&
    cat result && test "$(cat result.rc)" = 0 &&
    grep -q "^ok .* fleetfs-broker host add fleet01 " result &&
    test $(grep -c "^ok" result) = 5 &&
    rmqctl list_users -q >users && ! grep -q "^fleet01" users
'

# last: it stops the broker
test_expect_success 'Logs: the doc'"'"'s log line is what a broker shutdown logs' '
    block "^[0-9-]*T[0-9:.]*Z fleetfs warn: broker: connection lost" >doc.logline &&
    test $(wc -l <doc.logline) = 1 &&
    broker_stop &&
    wait_for 20 "grep -q \" fleetfs warn: broker: connection lost\" user.log" &&
    grep " fleetfs warn: broker: connection lost" user.log | head -n1 >got.logline &&
    cat got.logline &&
    test_cmp <(sed -E "s/^[0-9-]+T[0-9:.]+Z/<time>/" doc.logline) <(sed -E "s/^[0-9-]+T[0-9:.]+Z/<time>/" got.logline) &&
    kill -TERM $(cat .harness/pid.user) &&
    wait_for 15 "fleet_gone user" &&
    ! mountpoint -q "$H/fleet"
'

test_done
