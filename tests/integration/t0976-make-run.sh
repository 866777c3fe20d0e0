#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make run` as a newcomer meets it (issue 46), through a real terminal: a
# tmux pane running an interactive bash, on a copy of the tree as it is
# (the files git knows, with the working tree's changes, and the plain
# build), with no FLEET_* variable set, so make run starts its own broker.
# The README's one-minute tour is run as printed against it
# (tests/tools/doc-tour: what each command prints compared with what the
# README shows), then its shell-script example; every other block of the
# README is listed here as run or not run, with the reason. Then Ctrl-C
# (tmux send-keys C-c): the pane's last lines, make's exit status as the
# shell saw it (a make killed by SIGINT prints "make: *** ... Error 130",
# and the shell then drops the rest of the line, its `echo EXIT=$?`), /proc/mounts and the broker's process group say that it
# unmounted, stopped the broker and exited 0 saying so in one line. And a
# second Ctrl-C kills it: fleetfs is stopped (SIGSTOP) so the first cannot
# finish, and the second leaves nothing mounted or running.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: make run builds and runs the plain build; the daemon's code it runs is under ASan in t0100-t0730" ;; esac
for t in tmux jq fusermount3; do command -v $t >/dev/null || test_skip_all "$t is not installed"; done
tmux_private

README=$FLEET_ROOT/README
SRC=$TEST_DIR/fleetfs
BUILD=$FLEET_ROOT/${FLEETFS_BUILD:-build}
[[ ${FLEETFS_BUILD:-} == /* ]] && BUILD=$FLEETFS_BUILD
ME=$(hostname -s | tr '[:upper:]' '[:lower:]')
at_exit "for m in \$(awk -v d=$SRC/ 'index(\$5, d) == 1 { print \$5 }' /proc/self/mountinfo); do fusermount3 -uz \$m; done; $FLEET_ROOT/scripts/broker kill --dir $SRC/.run/broker >/dev/null 2>&1 || true"

# pane_text [SESSION]: what the pane shows, its history included, blank lines dropped
pane_text() { tmux capture-pane -p -J -S -500 -t "${1:-run}" | grep -v '^$'; }
# term_pending PID: a SIGTERM is pending for the (stopped) process PID
term_pending() {
    local v
    v=$(sed -n 's/^ShdPnd:[[:space:]]*//p' "/proc/$1/status") && (( (16#$v >> 14) & 1 ))
}
# blocks: every indented block of the README (4 spaces after a blank
# line), one a line: LINE<TAB>its lines joined by spaces (as t0985's)
blocks() {
    awk 'function flush() { if (b != "") print start "\t" b; b = "" }
        /^ *$/ { flush(); blank = 1; next }
        /^    / && (blank || b != "") { l = $0; sub(/^ +/, "", l); if (b == "") { start = NR; b = l } else b = b " " l; blank = 0; next }
        { flush(); blank = 0 }
        END { flush() }' "$README"
}
# pane_shell SESSION: a tmux session running an interactive bash with no
# FLEET_* variable (make run then starts its own broker)
pane_shell() {
    tmux -f /dev/null new-session -d -s "$1" -x 250 -y 60 \
        "env $(env | sed -n 's/^\(FLEET_[A-Z_]*\)=.*/-u \1/p' | tr '\n' ' ') PS1='$ ' bash --norc --noprofile -i"
}
# under_src: the mounts under the copy, one a line
under_src() { awk -v d="$SRC/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo; }
# lead_pid: the make run fleetfs's pid (the first of its processes)
lead_pid() { pgrep -o -f "build/fleetfs $SRC/fleet -f"; }
# readme_block START: the indented block of the README right after the line
# matching START (its indent removed), up to the next line of prose
readme_block() {
    awk -v s="$1" '$0 ~ s { on = 1; next } on && /^    / { sub(/^    /, ""); print; got = 1; next }
        on && got && !/^$/ { exit }' "$README"
}
# masked: times, msgIds, ports, node names, this copy's path and host name
# as the README's (/root/fleetfs, vm), tmux's pane ids
masked() {
    sed -E -e "s|$SRC|/root/fleetfs|g" -e "s/\\b$ME\\b/vm/g" \
        -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+Z/<time>/g' \
        -e 's/[0-9a-f]{32}/<msgId>/g' -e 's/127\.0\.0\.1:[0-9]+/127.0.0.1:<port>/g' \
        -e 's/fleetfs-[0-9a-f]+@[A-Za-z0-9.-]+/<node>/g' -e 's/in [0-9]+ s;/in <n> s;/' \
        -e 's/\(%[0-9]+\)/(%N)/g'
}

test_expect_success 'a copy of the tree as it is, with its plain build' '
    mkdir -p "$SRC" &&
    (cd "$FLEET_ROOT" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d "" f; do test -e "$f" && printf "%s\0" "$f"; done |
        tar --null -T - -cf -) | tar -C "$SRC" -xf - &&
    mkdir -p "$SRC/build" &&
    (cd "$BUILD" && tar -cf - obj libfleetfs.a fleetfs tests tools fake-herdr) | tar -C "$SRC/build" -xf - &&
    test -x "$SRC/build/fleetfs" && test -x "$SRC/scripts/run" && ! test -e "$SRC/.run"
'

# the README's blocks: each is run here or listed as not run, with the reason
cat >known <<'EOF'
^make run +# install|run|make run, in the pane; make test is the whole suite (CI's .ci/run): not run from inside it
^\$ make run make run: starting|run|the banner make run prints is the README's
^\$ tmux new-session -d -s beta|run|the one-minute tour runs as printed
^\$ echo "I take the parser|run|the one-minute tour runs as printed
^\$ id=\$\(jq -r \.msgId fleet-beta|run|the one-minute tour runs as printed
^\^C[0-9-]+T|run|Ctrl-C: one line, exit 0, nothing mounted or running
^#!/bin/sh # standup\.sh|run|the shell-script example prints what the README shows
^sent [0-9a-f]+ to beta|run|the shell-script example prints what the README shows
^claude mcp add fleet -- fleetfs mcp /fleet$|skip|needs Claude Code's CLI; t0940 runs fleetfs mcp MOUNT, the command it registers, through the MCP SDK's client
^fleetfs keygen ~/\.config/fleetfs/key|skip|needs a second host and a TLS broker: t0975 runs fleetfs(1)'s EXAMPLES as printed (the same keygen, trust and mount), t0810 TLS, t0830 the logins
^doc/README\.md|run|the map of doc/ names every document there, and nothing gone
EOF
test_expect_success 'every block of the README is run here or listed as not run, with the reason' '
    blocks >blocks &&
    test $(wc -l <blocks) -ge 10 &&
    doc_blocks_listed README blocks known &&
    test $(wc -l <"$README") -le 200
'
while IFS="|" read -r pat kind why; do
    [[ $kind == skip ]] && test_skip_planned "README: ${pat//\\/}" "$why"
done <known

test_expect_success 'the README'"'"'s map of doc/ names every document there, each that exists' '
    readme_block "^The documents" | awk "{ print \$1 }" | sort >named &&
    (cd "$FLEET_ROOT" && ls doc/*) | sort >there &&
    test_cmp there named
'

test_expect_success 'make run in a terminal: its own broker, ./fleet mounted, the banner the README shows' '
    pane_shell run &&
    tmux send-keys -t run "cd $SRC && make run; echo EXIT=\$?" Enter &&
    wait_for 240 "mountpoint -q $SRC/fleet && test -r $SRC/fleet/status" &&
    wait_for 20 "pane_text | grep -q \"fleetfs info: broker: connected\"" &&
    pane_text | sed -n "/^make run: starting/,/fleetfs info: broker: connected/p" | masked >banner.got &&
    readme_block "^In a clone" | sed 1d | masked >banner.want &&
    test $(wc -l <banner.want) -ge 9 &&
    test_cmp banner.want banner.got &&
    test -s "$SRC/.run/broker/pgid"
'

test_expect_success 'the one-minute tour, in a second shell, prints what the README shows' '
    { DOC_START=$SRC DOC_UNSUBST="s|$SRC|/root/fleetfs|g; s/\\b$ME\\b/vm/g" DOC_MASK="s/\\(%[0-9]+\\)/(%N)/g" \
        timeout 120 "$FLEET_ROOT/tests/tools/doc-tour" "$README" "^Terminal 2, the same directory" \
        "^Ctrl-C in terminal 1" "$TEST_DIR/tour" >result; echo $? >result.rc; } &&
    cat result && test "$(cat result.rc)" = 0 &&
    test $(grep -c "^ok" result) = 13
'

test_expect_success 'what the tour typed reached the agent in beta'"'"'s pane (its own record)' '
    grep -q "I take the parser, you take codegen" "$SRC/.run/beta-pane.log"
'

test_expect_success 'the shell-script example prints what the README shows; the reply is consumed, the send typed' '
    readme_block "^One write is one message; a failed write" >standup.sh &&
    head -n 1 standup.sh | grep -qx "#!/bin/sh" &&
    (cd "$SRC" && sh "$TEST_DIR/standup.sh") >standup.out 2>&1 &&
    masked <standup.out >got &&
    readme_block "^Run after the tour, it prints" | masked >want &&
    test_cmp want got &&
    test ! -s "$SRC/fleet/self/inbox" &&
    wait_for 20 "grep -q \"parser: done, 42 tests green\" $SRC/.run/beta-pane.log"
'

test_expect_success 'Ctrl-C: unmounted, the broker stopped, one line, exit 0 (no make error)' '
    pid=$(lead_pid) && test -n "$pid" &&
    pgid=$(cat "$SRC/.run/broker/pgid") && test -n "$(pgrep -g "$pgid")" &&
    tmux send-keys -t run C-c &&
    wait_for 120 "pane_text | grep -qE \"^(EXIT=|make: \\*\\*\\*)\"" &&
    pane_text >pane && tail -n 6 pane &&
    ! grep "^make: \*\*\*" pane &&
    wait_for 5 "pane_text | grep -q \"^EXIT=\"" &&
    pane_text >pane &&
    grep -x "EXIT=0" pane &&
    test $(grep -c "^make run: stopped" pane) = 1 &&
    sed -n "/^\\^C/,/^make run: stopped/p" pane | masked >end.got &&
    readme_block "^Ctrl-C in terminal 1" | masked >end.want &&
    test_cmp end.want end.got &&
    under_src >left && test_cmp /dev/null left &&
    ! kill -0 "$pid" 2>/dev/null &&
    test -z "$(pgrep -g "$pgid")"
'

# The second Ctrl-C. fleetfs is stopped (SIGSTOP), so the first Ctrl-C's
# SIGTERM waits, pending, and make run waits for it; the second must not.
test_expect_success 'a second Ctrl-C kills it: fleetfs and the broker gone, nothing mounted' '
    pane_shell run2 &&
    tmux send-keys -t run2 "cd $SRC && make run; echo EXIT=\$?" Enter &&
    wait_for 240 "mountpoint -q $SRC/fleet && test -r $SRC/fleet/status" &&
    pid=$(lead_pid) && test -n "$pid" &&
    pgid=$(cat "$SRC/.run/broker/pgid") && test -n "$(pgrep -g "$pgid")" &&
    kill -STOP "$pid" &&
    tmux send-keys -t run2 C-c &&
    wait_for 20 "term_pending $pid" &&
    under_src | grep -qx "$SRC/fleet" &&
    tmux send-keys -t run2 C-c &&
    wait_for 60 "pane_text run2 | grep -q \"^EXIT=\"" &&
    pane_text run2 >pane2 && tail -n 4 pane2 &&
    grep -q "make run: killed on the second Ctrl-C" pane2 &&
    ! grep -x "EXIT=0" pane2 &&
    under_src >left && test_cmp /dev/null left &&
    wait_for 10 "! kill -0 $pid 2>/dev/null" &&
    wait_for 10 "test -z \"\$(pgrep -g $pgid)\""
'

test_done
