#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# [profile NAME] sections and spawn_from (SPEC section 11): a bad profile
# stops fleetfs at start, exit status 2, with a message that names the file,
# the profile and the key; nothing is mounted. No broker is needed: the
# configuration is refused before one is touched.
. "$(dirname "$0")/../lib.sh"

# start_refused CONF WORDS: fleetfs with config CONF exits 2 saying WORDS
# (and naming the file when the fault is in one section; a profile that
# does not fit the options is only known once -o is read as well)
start_refused() {
    printf '%s\n' "$1" >bad.conf &&
    { "$FLEETFS" m -f -o config="$TEST_DIR/bad.conf" 2>err; rc=$?; } &&
    test "$rc" = 2 &&
    { test "${3:-}" = cross || grep -q "bad.conf" err; } &&
    grep -qF -- "$2" err &&
    ! mountpoint -q m
}

test_expect_success 'a profile the daemon could not run is refused at start (exit 2)' '
    mkdir -p m &&
    start_refused "[profile w]
command = /bin/sh -c claude" "[profile w]: command: sh is a shell" &&
    start_refused "[profile w]
command = no-such-agent-program" "is not an executable program" &&
    start_refused "[profile w]
kind = claude
dir_root = $TEST_DIR/nowhere" "dir_root: $TEST_DIR/nowhere is not an existing directory" &&
    start_refused "[profile w]
kind = claude
max = 0" "max: expected a number 1..1000" &&
    start_refused "[profile W]
kind = claude" "a profile name is" &&
    start_refused "[profile w]
kind = claude
env = LD_PRELOAD=x" "unknown key '"'"'env'"'"'"
'

test_expect_success 'a profile that does not fit inject, and a bad spawn_from, are refused too' '
    start_refused "[fleetfs]
inject = tmux
[profile w]
kind = claude" "inject=tmux starts a command, and this profile has none" cross &&
    start_refused "[fleetfs]
inject = none
[profile w]
kind = claude" "inject=none: there is no terminal" cross &&
    start_refused "[fleetfs]
spawn_from = alpha::beta" "spawn_from: empty name" &&
    { "$FLEETFS" m -f -o coord_id=x,spawn_from=Bad 2>err; test $? = 2; } &&
    grep -q "spawn_from: .Bad. is not a lead name" err
'

test_expect_success 'fleetfs --help lists spawn_from' '
    "$FLEETFS" --help | grep -q "^ *spawn_from"
'

test_done
