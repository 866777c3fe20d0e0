# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/lib.sh: a small git-t/-style harness for the integration tests.
# Source it at the top of tests/integration/tNNNN-name.sh (bash):
#
#   #!/usr/bin/env bash
#   . "$(dirname "$0")/../lib.sh"
#   broker_use_shared
#   new_vhost t1234
#   test_expect_success 'what it proves' '
#       some command &&
#       other command >out &&
#       grep expected out
#   '
#   test_done
#
# Writing snippets (as in git's t/):
# - A snippet is eval'd in a subshell; its result is the exit status of the
#   whole snippet, i.e. of its LAST command. There is no `set -e`: chain every
#   command with && so a failure anywhere fails the test. A line without &&
#   silently discards the status of the line before it.
# - Chain-lint (as git's t/): before a snippet runs, "(exit 117) && SNIPPET"
#   is evaluated; if the && chain is broken anywhere (a line without &&, a
#   stray `;` or `&` between commands), the test FAILS with "chain-lint"
#   and its body is not run. Put a background job in braces: `{ cmd & } &&`;
#   use `if ...; then ...; fi &&` where a status must be kept for later.
# - A subshell: variables set in one snippet do not reach the next one or the
#   file. Keep state in files under $TEST_DIR, or set it up outside snippets.
#   Cleanups registered with at_exit and brokers started with
#   broker_start_own do carry over (they are recorded in $TEST_DIR).
# - The working directory is $TEST_DIR; stdin is /dev/null; stdout and stderr
#   are captured and shown (indented) only when the test fails, or always
#   with VERBOSE=1.
# - KEEP=1 keeps $TEST_DIR (and a private broker's data) after the file ends.
#
# Functions:
#   test_expect_success DESC SNIPPET   run one test, print ok/not ok N - DESC (time)
#   test_log_on_failure FILE           a failing test also prints FILE's last lines
#                                      (TEST_LOG_LINES, 12); mount_fleet and
#                                      herdr_start register their logs
#   test_done                          print "# FILE: N passed, N failed, N skipped"; exit 1 if
#                                      any failed
#   test_skip_all [--planned] REASON   skip the whole file: prints "# SKIP FILE: REASON" and
#                                      "# FILE: N passed, N failed, 1 skipped". Without --planned
#                                      (something the machine lacks: root, a tool, a namespace)
#                                      it is a FAILURE instead when FLEET_NO_SKIP=1 (scripts/run-tests
#                                      sets it: CI has everything, so nothing may skip there);
#                                      --planned is a skip by design (e.g. a sanitizer build)
#   test_skip_planned DESC REASON      one test not run, by design: "ok N - DESC # SKIP (planned):
#                                      REASON", counted as skipped (never a failure)
#   test_fail_all REASON               end the file now as one failure ("# FAIL FILE: REASON"),
#                                      for what must work here (e.g. as root, a network namespace)
#   test_cmp EXPECTED ACTUAL           diff -u, fails if the files differ
#   test_eq WHAT GOT WANT              GOT = WANT, else says WHAT, GOT and WANT on stderr
#   test_must_fail CMD...              succeeds only if CMD exits non-zero (not by a signal)
#   wait_for TIMEOUT_S CONDITION       poll CONDITION (shell code) every 0.1 s; 1 on timeout
#   test_absent TIMEOUT_S MARKER EVENT wait for MARKER (proof that the window passed), then
#                                      fail if EVENT (the unwanted thing) holds
#   at_exit CMD                        run CMD (shell code) at exit, in reverse order of registration
#   broker_use_shared                  use the run's shared broker ($FLEET_TEST_BROKER_ENV);
#                                      without it, start a private one
#   broker_start_own [--bind ADDR]     start a private broker in $TEST_DIR/broker and use it
#                                      (--bind: also listen on ADDR, see scripts/broker)
#   broker_start_own_tls CERTDIR       the same with a TLS listener too (CERTDIR: ca.pem,
#                                      server.pem, server.key; see tests/tls.sh)
#   broker_kill                        kill -9 the private broker (data kept)
#   broker_freeze, broker_thaw         SIGSTOP the private broker and wait until all of its
#                                      threads have stopped; SIGCONT it
#   broker_stop                        stop the private broker cleanly (data kept)
#   broker_restart                     (stop if running, then) start the private broker on
#                                      the same data, port and node name
#   broker_load                        re-read the current broker's env (done before every snippet)
#   rmqctl ARGS...                     rabbitmqctl -n NODE ARGS... against the current broker
#                                      (list_queues -q [-p V] with name, messages, consumers...
#                                      columns and eval EXPR are
#                                      answered by the broker's fleetctl node, which the
#                                      first such call starts: tests/tools/fleetctl.erl);
#                                      on LavinMQ (BROKER_KIND=lavinmq) `scripts/broker ctl`
#                                      answers the same commands, same output, from its
#                                      HTTP API (scripts/broker-lavinmq); eval fails there
#   broker_kind                        rabbitmq or lavinmq: the broker in use
#   lavinmq_skip KEY DESC              on LavinMQ, when tests/lavinmq-exclusions lists KEY
#                                      (FILE-ID.N, e.g. t0375.9: one test of a file), the test
#                                      DESC is a planned skip with the list's reason; status 0
#                                      then, else 1: `lavinmq_skip t0375.9 DESC || test_expect_success DESC ...`
#   new_vhost NAME                     create vhost NAME with full rights for guest; prints nothing
#   broker_uri [VHOST]                 print amqp://guest:guest@127.0.0.1:PORT/<vhost, url-encoded>
#                                      (BROKER_HOST instead of 127.0.0.1: a LavinMQ with --bind)
#   cluster_start_own [N]              an N-node cluster (default 3) in $TEST_DIR/cluster, used
#                                      from then on (FLEET_BROKER_URI lists every node)
#   cluster_kill I, cluster_stop_node I, cluster_start_node I, cluster_ctl I ARGS...,
#   cluster_running I                  node I of that cluster (1-based)
#
# The broker: FLEET_BROKER_KIND=lavinmq (tests/integration/run passes it on)
# makes the shared broker and every broker_start_own a private LavinMQ
# (scripts/broker --kind lavinmq); a file that cannot run there is listed in
# tests/lavinmq-exclusions with its reason.
#
# Variables: FLEET_ROOT (repository), TEST_NAME, TEST_DIR, FLEETFS (the daemon
# binary: $FLEET_ROOT/${FLEETFS_BUILD:-build}/fleetfs unless already set), and
# after a broker_* call: FLEET_BROKER_URI, BROKER_PORT, BROKER_DIST_PORT,
# BROKER_NODE, BROKER_DIR, BROKER_PGID; with TLS also FLEET_BROKER_TLS_URI and
# BROKER_TLS_PORT; BROKER_KIND, and on LavinMQ BROKER_HTTP_PORT (its HTTP
# API on 127.0.0.1, guest:guest an administrator: LAVINMQ_API for t0950).

FLEET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
export FLEET_ROOT
TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}
# an absolute FLEETFS_BUILD is made relative to FLEET_ROOT, so that the
# files that spell a tool's path $FLEET_ROOT/${FLEETFS_BUILD:-build}/...
# find it too
if [[ ${FLEETFS_BUILD:-} == /* ]]; then
  FLEETFS_BUILD=$(realpath -m --relative-to="$FLEET_ROOT" "$FLEETFS_BUILD")
  export FLEETFS_BUILD
fi
if [[ -z ${FLEETFS:-} ]]; then
  case ${FLEETFS_BUILD:-build} in
    /*) FLEETFS=${FLEETFS_BUILD}/fleetfs ;;
    *) FLEETFS=$FLEET_ROOT/${FLEETFS_BUILD:-build}/fleetfs ;;
  esac
fi
export FLEETFS

TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/fleetfs-test.${TEST_NAME//[^A-Za-z0-9_.-]/_}.XXXXXX") || {
  echo "lib.sh: cannot create a temp dir" >&2
  exit 1
}
export TEST_DIR
mkdir -p "$TEST_DIR/.harness/at_exit"
cd "$TEST_DIR" || exit 1

_test_count=0
_test_passed=0
_test_failed=0
_test_done_called=0
_test_skipped=0
_test_cleaned=0

# ---------------------------------------------------------------- running tests

_test_now() { echo "${EPOCHREALTIME/[.,]/}"; }   # microseconds

# _nap SECS: sleep without a process. On this kind of machine (a PVM guest)
# each fork and exec costs about 8 ms of CPU, and wait_for, polling ten
# times a second with `sleep 0.1` and a $(...) for the time, spent a fifth
# of a core per waiting test in forks alone: with four test files waiting
# at once on CI's two cores, the waiting itself slowed the run. A read with
# a timeout on a pipe this shell holds both ends of never gets data or EOF.
exec {_NAP_FD}<> <(:)
_nap() { read -r -t "$1" -u "$_NAP_FD" _ || :; }

# test_expect_failure DESC SNIPPET: a known breakage (git's word): what a
# user should see, which fleetfs cannot give today (the reason is in a
# comment and in the docs). Run as test_expect_success is; when it fails
# as known: "not ok N - DESC # TODO known breakage", counted as skipped;
# when it passes, it counts as a failure that says to make it a
# test_expect_success, so a mended breakage cannot go unnoticed.
test_expect_failure() {
  if [[ $# -ne 2 ]]; then
    echo "bug in the test script: test_expect_failure takes DESC and SNIPPET, got $# args" >&2
    exit 1
  fi
  _test_expect_known=1 test_expect_success "$1" "$2"
}

test_expect_success() {
  if [[ $# -ne 2 ]]; then
    echo "bug in the test script: test_expect_success takes DESC and SNIPPET, got $# args" >&2
    exit 1
  fi
  local desc=$1 snippet=$2 out rc t0 t1 el
  _test_count=$((_test_count + 1))
  out=$TEST_DIR/.harness/out.$_test_count
  t0=$(_test_now)
  if ! _test_chain_lint "$snippet"; then
    rc=117
    echo "chain-lint: broken &&-chain (a command is not joined by && to the one after it," \
      "so a failure there would be ignored); fix the snippet" >"$out"
  else
    (
      broker_load 2>/dev/null
      cd "$TEST_DIR" || exit 1
      eval "$snippet"
    ) </dev/null >"$out" 2>&1
    rc=$?
  fi
  t1=$(_test_now)
  el=$(( (t1 - t0) / 10000 ))
  el=$(printf '%d.%02d s' $((el / 100)) $((el % 100)))
  if [[ -n ${_test_expect_known:-} && $rc -ne 117 ]]; then
    if [[ $rc -eq 0 ]]; then
      _test_failed=$((_test_failed + 1))
      echo "not ok $_test_count - $desc # TODO known breakage vanished: it passes now;" \
        "make it a test_expect_success ($el)"
    else
      _test_skipped=$((_test_skipped + 1))
      echo "not ok $_test_count - $desc # TODO known breakage ($el)"
      echo "# SKIP $TEST_NAME: $desc: known breakage"
      if [[ -n ${VERBOSE:-} && -s $out ]]; then sed 's/^/#     /' "$out"; fi
    fi
  elif [[ $rc -eq 0 ]]; then
    _test_passed=$((_test_passed + 1))
    echo "ok $_test_count - $desc ($el)"
    if [[ -n ${VERBOSE:-} && -s $out ]]; then sed 's/^/#     /' "$out"; fi
  else
    _test_failed=$((_test_failed + 1))
    echo "not ok $_test_count - $desc ($el, exit $rc)"
    echo "#   snippet:"
    printf '%s\n' "$snippet" | sed '/^[[:space:]]*$/d; s/^/#     /'
    if [[ -s $out ]]; then
      local n
      n=$(wc -l <"$out")
      echo "#   output${n:+ ($n lines)}:"
      if ((n > 200)); then
        echo "#     ... (first $((n - 200)) lines cut; KEEP=1 keeps $out)"
      fi
      tail -n 200 "$out" | sed 's/^/#     /'
    else
      echo "#   (no output)"
    fi
    _test_show_logs
  fi
  return 0
}

# test_log_on_failure FILE: a log (a daemon's, a fake's) whose last lines a
# failing test prints after its own output, so that a CI run, which keeps
# no files, still shows what the daemons said when the test failed
test_log_on_failure() {
  grep -qxF -- "$1" "$TEST_DIR/.harness/logs" 2>/dev/null || printf '%s\n' "$1" >>"$TEST_DIR/.harness/logs"
}
_test_show_logs() {
  local f
  [[ -s $TEST_DIR/.harness/logs ]] || return 0
  while IFS= read -r f; do
    [[ -s $f ]] || continue
    echo "#   ${f#"$TEST_DIR"/}, its last ${TEST_LOG_LINES:-12} lines:"
    tail -n "${TEST_LOG_LINES:-12}" "$f" | cut -c1-300 | sed 's/^/#     /'
  done <"$TEST_DIR/.harness/logs"
}

# git's chain-lint: evaluate "(exit 117) && SNIPPET" followed by a line that
# exits with the status so far. With every command chained by &&, the
# first false short-circuits everything and the status is 117; a line that
# is not joined (a missing &&, a stray ; or &) runs on its own and changes
# it. Caveat, as in git: the commands after such a break do run once here
# (output discarded); the test then fails without running its body.
_test_chain_lint() {
  local rc
  (
    broker_load 2>/dev/null
    cd "$TEST_DIR" || exit 1
    eval "(exit 117) && $1
(exit \$?)"
  ) </dev/null >/dev/null 2>&1
  rc=$?
  [[ $rc -eq 117 ]]
}

test_done() {
  _test_done_called=1
  echo "# $TEST_NAME: $_test_passed passed, $_test_failed failed, $_test_skipped skipped"
  if [[ $_test_failed -gt 0 ]]; then exit 1; fi
  exit 0
}

test_fail_all() {
  echo "# FAIL $TEST_NAME: $*"
  _test_failed=$((_test_failed + 1))
  test_done
}

test_skip_all() {
  local planned=0
  if [[ ${1:-} == --planned ]]; then planned=1; shift; fi
  if [[ $planned -eq 0 && ${FLEET_NO_SKIP:-0} == 1 ]]; then
    test_fail_all "would skip, but FLEET_NO_SKIP=1 says this machine must run it: $*"
  fi
  echo "# SKIP $TEST_NAME: $*"
  _test_skipped=$((_test_skipped + 1))
  test_done
}

# test_skip_planned DESC REASON: a test this file does not run, by design
# (e.g. a documented command that needs systemd as init): counted as
# skipped, listed as "ok N - DESC # SKIP (planned): REASON" and as a
# "# SKIP FILE: DESC: REASON" line; never a failure, FLEET_NO_SKIP or not
test_skip_planned() {
  _test_count=$((_test_count + 1))
  _test_skipped=$((_test_skipped + 1))
  echo "ok $_test_count - $1 # SKIP (planned): $2"
  echo "# SKIP $TEST_NAME: $1: $2"
}

# doc_blocks_listed NAME BLOCKS KNOWN: a document's blocks are each run by
# the test or listed as not run. BLOCKS has one line per block,
# WHERE<TAB>its lines joined by spaces; KNOWN one per listed block,
# ERE|run or skip|what runs it or why not. Prints each block with its
# entry; fails, saying which, on a block no ERE matches and on an ERE
# that matches no block (t0930, t0985).
doc_blocks_listed() {
  local name=$1 blocks=$2 known=$3 where text hit pat kind why rc=0
  local unknown=() stale=()
  while IFS=$'\t' read -r where text; do
    hit=$(awk -F'|' -v t="$text" 't ~ $1 { print $2 ": " $3; exit }' "$known")
    [[ -n $hit ]] || unknown+=("$name:$where: $text")
    echo "$name:$where: ${text:0:70} -> $hit"
  done <"$blocks"
  while IFS='|' read -r pat kind why; do
    cut -f2 "$blocks" | grep -qE -- "$pat" || stale+=("$pat")
  done <"$known"
  if ((${#unknown[@]})); then
    echo "blocks in no list (add each to this test: run it, or say why not):"
    printf '%s\n' "${unknown[@]}"
    rc=1
  fi
  if ((${#stale[@]})); then
    echo "listed blocks no longer in $name:"
    printf '%s\n' "${stale[@]}"
    rc=1
  fi
  return $rc
}

test_cmp() {
  diff -u -- "$1" "$2"
}

# test_eq WHAT GOT WANT: GOT = WANT, or say on stderr which check failed
# and with what (a snippet's failing `test` says nothing by itself)
test_eq() {
  [[ $2 == "$3" ]] && return 0
  echo "test_eq: $1: got '$2', want '$3'" >&2
  return 1
}

test_must_fail() {
  "$@"
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    echo "test_must_fail: command succeeded: $*" >&2
    return 1
  elif [[ $rc -gt 128 && $rc -le 192 ]]; then
    echo "test_must_fail: command died by signal $((rc - 128)): $*" >&2
    return 1
  elif [[ $rc -eq 127 ]]; then
    echo "test_must_fail: command not found: $*" >&2
    return 1
  fi
  return 0
}

wait_for() {
  local timeout=$1 cond=$2 t_end
  t_end=$(( ${EPOCHREALTIME/[.,]/} + ${timeout%.*} * 1000000 ))
  if [[ $timeout == *.* ]]; then
    local frac=${timeout#*.}000000
    t_end=$((t_end + 10#${frac:0:6}))
  fi
  while :; do
    if eval "$cond"; then return 0; fi
    if (( ${EPOCHREALTIME/[.,]/} >= t_end )); then
      echo "wait_for: timed out after ${timeout} s: $cond" >&2
      return 1
    fi
    _nap 0.1
  done
}

# test_absent TIMEOUT MARKER EVENT: proves that something did NOT happen.
# A bare sleep before checking for an absence passes on a slow machine
# without proving anything; instead wait (up to TIMEOUT s) for MARKER, a
# condition that can only come true after the window in which EVENT would
# have happened (a later message arriving, the injector having looked
# again, a receipt for a later message), then fail if EVENT (shell code,
# true when the unwanted thing happened) holds. No MARKER in time is a
# failure too: an absence proven by nothing is no proof.
test_absent() {
  if [[ $# -ne 3 ]]; then
    echo "bug in the test script: test_absent takes TIMEOUT MARKER EVENT, got $# args" >&2
    return 2
  fi
  local timeout=$1 marker=$2 event=$3
  wait_for "$timeout" "$marker" || {
    echo "test_absent: the marker never came, so the absence proves nothing: $marker" >&2
    return 1
  }
  if eval "$event"; then
    echo "test_absent: it happened: $event" >&2
    return 1
  fi
  return 0
}

# ---------------------------------------------------------------- cleanup

# Registered commands live in files, so a registration made inside a test
# snippet (a subshell) is still run when the file exits.
at_exit() {
  local d=$TEST_DIR/.harness/at_exit n
  n=$(find "$d" -maxdepth 1 -type f | wc -l)
  printf '%s\n' "$*" >"$d/$(printf '%06d' $((n + 1)))"
}

# tmux_private: fleetfs and this file talk to the same private tmux server,
# the one under TEST_DIR/tmux (a TMUX inherited from a surrounding tmux would
# win otherwise), killed when the file exits
tmux_private() {
  unset TMUX TMUX_PANE
  export TMUX_TMPDIR=$TEST_DIR/tmux
  mkdir -p "$TMUX_TMPDIR"
  at_exit "tmux kill-server 2>/dev/null || true"
}

_test_cleanup() {
  [[ $_test_cleaned -eq 1 ]] && return
  _test_cleaned=1
  cd / || true
  local f
  # reverse order of registration
  while IFS= read -r f; do
    [[ -n $f ]] || continue
    ( eval "$(<"$f")" ) </dev/null >&2 || echo "# at_exit: failed: $(<"$f")" >&2
  done < <(find "$TEST_DIR/.harness/at_exit" -maxdepth 1 -type f 2>/dev/null | sort -r)
  # a private broker started by this file: leave no node behind
  if [[ -s $TEST_DIR/broker/pgid ]]; then
    if [[ -n ${KEEP:-} ]]; then
      "$FLEET_ROOT/scripts/broker" stop --dir "$TEST_DIR/broker" >/dev/null 2>&1
    else
      "$FLEET_ROOT/scripts/broker" kill --dir "$TEST_DIR/broker" >/dev/null 2>&1
    fi
  fi
  # a cluster started by this file (cluster_start_own)
  if [[ -s $TEST_DIR/cluster/node1/node.conf ]]; then
    if [[ -n ${KEEP:-} ]]; then
      "$FLEET_ROOT/scripts/broker" cluster stop --dir "$TEST_DIR/cluster" >/dev/null 2>&1
    else
      "$FLEET_ROOT/scripts/broker" cluster kill-all --dir "$TEST_DIR/cluster" >/dev/null 2>&1
    fi
  fi
  if [[ -n ${KEEP:-} ]]; then
    echo "# KEEP: $TEST_DIR" >&2
    return
  fi
  # never rm -rf through a live mount: lazily unmount whatever is left
  local mnt left=0
  while IFS= read -r mnt; do
    fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || left=1
  done < <(awk -v d="$TEST_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  if [[ $left -eq 1 ]]; then
    echo "# cleanup: a mount under $TEST_DIR is still there; not removing it" >&2
    return
  fi
  rm -rf "$TEST_DIR"
}

_test_on_exit() {
  local rc=$?
  # a second Ctrl-C or TERM, or a reader gone away (SIGPIPE), must not cut
  # the cleanup short
  trap '' INT TERM HUP PIPE
  _test_cleanup
  if [[ $_test_done_called -eq 0 ]]; then
    echo "# $TEST_NAME: exited (status $rc) before test_done" >&2
    [[ $rc -eq 0 ]] && rc=1
  fi
  exit "$rc"
}
trap _test_on_exit EXIT
trap 'echo "# $TEST_NAME: interrupted" >&2; exit 130' INT
trap 'echo "# $TEST_NAME: terminated" >&2; exit 143' TERM HUP

# ---------------------------------------------------------------- broker

# $TEST_DIR/.harness/broker_env names the env file of the broker in use.
_broker_select() {
  printf '%s\n' "$1" >"$TEST_DIR/.harness/broker_env"
  broker_load
}

broker_load() {
  local f
  [[ -s $TEST_DIR/.harness/broker_env ]] || return 1
  f=$(<"$TEST_DIR/.harness/broker_env")
  [[ -r $f ]] || { echo "broker_load: no env file $f" >&2; return 1; }
  # shellcheck disable=SC1090
  . "$f"
}

broker_use_shared() {
  if [[ -n ${FLEET_TEST_BROKER_ENV:-} ]]; then
    [[ -r $FLEET_TEST_BROKER_ENV ]] || {
      echo "broker_use_shared: FLEET_TEST_BROKER_ENV=$FLEET_TEST_BROKER_ENV is not readable" >&2
      exit 1
    }
    _broker_select "$FLEET_TEST_BROKER_ENV"
  else
    echo "# no FLEET_TEST_BROKER_ENV: starting a private broker for $TEST_NAME" >&2
    broker_start_own
  fi
}

_broker_own_only() {
  if [[ ${BROKER_DIR:-} != "$TEST_DIR/broker" ]]; then
    echo "$1: the current broker is not this file's own (use broker_start_own)" >&2
    return 1
  fi
}

# scripts/broker start, quiet unless it fails
_broker_start() {
  local log=$TEST_DIR/.harness/broker-start.log dir=$1
  shift
  "$FLEET_ROOT/scripts/broker" start --dir "$dir" "$@" >/dev/null 2>"$log" || {
    echo "scripts/broker start --dir $dir $* failed:" >&2
    cat "$log" >&2
    return 1
  }
}

broker_start_own() {
  _broker_start "$TEST_DIR/broker" "$@" || return 1
  _broker_select "$TEST_DIR/broker/env"
}

broker_kill() {
  broker_load && _broker_own_only broker_kill || return 1
  "$FLEET_ROOT/scripts/broker" kill --dir "$BROKER_DIR" 2>/dev/null
}

# broker_freeze: SIGSTOP the private broker and return once every thread of
# every process in its group has stopped. kill(2) returns before that: the
# stop is carried out by the broker's own threads as each is next
# scheduled, and on a loaded machine one of them can still take a publish
# and confirm it a good part of a second later (CI's t0310 4 under ASan).
# Fails, saying which threads still run, if they have not stopped in 10 s.
broker_freeze() {
  broker_load && _broker_own_only broker_freeze || return 1
  kill -STOP -- "-$BROKER_PGID" || return 1
  local i left
  for ((i = 0; i < 1000; i++)); do
    left=$(ps -e -L -o pgid=,lwp=,stat=,comm= | awk -v g="$BROKER_PGID" '$1 == g && $3 !~ /^[TZ]/')
    [[ -z $left ]] && return 0
    sleep 0.01
  done
  echo "broker_freeze: still running 10 s after SIGSTOP: $left" >&2
  return 1
}

# broker_thaw: SIGCONT the private broker (undoes broker_freeze)
broker_thaw() {
  broker_load && _broker_own_only broker_thaw || return 1
  kill -CONT -- "-$BROKER_PGID"
}

broker_stop() {
  broker_load && _broker_own_only broker_stop || return 1
  "$FLEET_ROOT/scripts/broker" stop --dir "$BROKER_DIR" 2>/dev/null
}

broker_restart() {
  broker_load && _broker_own_only broker_restart || return 1
  if [[ -s $BROKER_DIR/pgid ]]; then
    "$FLEET_ROOT/scripts/broker" stop --dir "$BROKER_DIR" 2>/dev/null || return 1
  fi
  _broker_start "$BROKER_DIR" || return 1
  broker_load
}

broker_kind() {
  [[ -n ${BROKER_DIR:-} ]] || broker_load 2>/dev/null
  echo "${BROKER_KIND:-rabbitmq}"
}

lavinmq_skip() {
  local key=$1 desc=$2 why
  [[ $(broker_kind) == lavinmq ]] || return 1
  why=$(sed -n "s/^${key//./\\.}[[:space:]]\{1,\}//p" "$FLEET_ROOT/tests/lavinmq-exclusions" | head -n 1)
  [[ -n $why ]] || return 1
  test_skip_planned "$desc" "not on LavinMQ: $why"
  return 0
}

rmqctl() {
  [[ -n ${BROKER_DIR:-} ]] || broker_load || {
    echo "rmqctl: no broker in use (call broker_use_shared or broker_start_own)" >&2
    return 1
  }
  local rc
  # the two questions asked most, through the broker's fleetctl node
  if [[ ${BROKER_KIND:-rabbitmq} == lavinmq ]]; then
    : # no Erlang node: scripts/broker ctl asks LavinMQ's HTTP API
  elif [[ $1 == list_queues ]] && _fleetctl_columns "${@:2}"; then
    _fleetctl "queues $_fleetctl_q"; rc=$?
    [[ $rc -eq 99 ]] || return "$rc"
  elif [[ $# -eq 2 && $1 == eval ]]; then
    _fleetctl "eval"$'\n'"$2"; rc=$?
    [[ $rc -eq 99 ]] || return "$rc"
  fi
  "$FLEET_ROOT/scripts/broker" ctl --dir "$BROKER_DIR" -- "$@"
}

# _fleetctl REQUEST: REQUEST (tests/tools/fleetctl.erl) answered by the
# current broker's fleetctl node, which is started on first use: its output
# on stdout (why, on stderr, when it failed) and rabbitmqctl's status, or
# status 99 when there is no fleetctl to ask (then ask rabbitmqctl).  A
# rabbitmqctl boots an Erlang VM and its CLI, about 1.4 s of CPU, for
# every call; fleetctl boots once per broker node and answers in
# milliseconds.  FLEET_FLEETCTL=0 asks rabbitmqctl for everything.
_fleetctl() {
  local dir=$BROKER_DIR port out rc fd
  [[ ${FLEET_FLEETCTL:-1} == 1 ]] || return 99
  [[ -s $dir/fleetctl.port ]] || _fleetctl_start || return 99
  port=$(cat "$dir/fleetctl.port" 2>/dev/null) || return 99
  if ! { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
    rm -f "$dir/fleetctl.port" # its node went away: the next call starts another
    return 99
  fi
  printf '%s\n%%%%END\n' "$1" >&"$fd"
  out=$(cat <&"$fd")
  exec {fd}<&-
  [[ $out =~ ^rc=([0-9]+) ]] || return 99
  rc=${BASH_REMATCH[1]}
  out=${out#"rc=$rc"}
  out=${out#$'\n'}
  if [[ $rc -eq 0 ]]; then
    printf '%s\n' "$out"
  else
    printf '%s\n' "$out" >&2
  fi
  return "$rc"
}

# _fleetctl_columns ARGS...: whether ARGS (of list_queues) are -q [-p VHOST]
# COLUMN... with columns fleetctl knows; sets _fleetctl_q to "VHOST COLUMN..."
_fleetctl_columns() {
  local vh=/ c
  [[ ${1:-} == -q ]] || return 1
  shift
  if [[ ${1:-} == -p ]]; then
    vh=${2:-}
    shift 2 || return 1
  fi
  [[ $# -gt 0 && $vh =~ ^[A-Za-z0-9/._-]+$ ]] || return 1
  for c in "$@"; do
    [[ $c =~ ^(name|messages|messages_ready|messages_unacknowledged|consumers)$ ]] || return 1
  done
  _fleetctl_q="$vh $*"
}

_fleetctl_start() {
  local dir=$BROKER_DIR
  [[ -n ${BROKER_NODE:-} && -d $dir/home ]] || return 1
  (
    flock 9 || exit 1
    [[ -s $dir/fleetctl.port ]] && exit 0
    local pid
    cd "$dir" || exit 1
    [[ -s fleetctl.beam ]] || erlc -o . "$FLEET_ROOT/tests/tools/fleetctl.erl" >>fleetctl.log 2>&1 ||
      exit 1
    # one scheduler, no busy-waiting (as scripts/broker does for the broker)
    HOME=$dir/home setsid erl -noshell -hidden +S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none \
      -sname "fleetctl$$x$RANDOM@localhost" -pa . \
      -s fleetctl main "$BROKER_NODE" "$dir/fleetctl.port" </dev/null >>fleetctl.log 2>&1 &
    pid=$!
    for _ in $(seq 300); do
      [[ -s fleetctl.port ]] && exit 0
      kill -0 "$pid" 2>/dev/null || exit 1 # it could not reach the node
      sleep 0.05
    done
    exit 1
  ) 9>"$dir/fleetctl.lock"
}

new_vhost() {
  local vh=$1 out rc b='<<"' e='">>'
  if [[ $vh =~ ^[A-Za-z0-9._-]+$ ]] && { [[ -n ${BROKER_DIR:-} ]] || broker_load; } &&
      [[ ${BROKER_KIND:-rabbitmq} != lavinmq ]]; then
    # both steps in one fleetctl round trip (rabbitmqctl: two VMs booted)
    out=$(_fleetctl "eval"$'\n'"ok = rabbit_vhost:add($b$vh$e, ${b}fleetfs-test$e),
        rabbit_auth_backend_internal:set_permissions(${b}guest$e, $b$vh$e, $b.*$e, $b.*$e,
                                                      $b.*$e, ${b}fleetfs-test$e)." 2>&1)
    rc=$?
    [[ $rc -eq 0 && $out == ok ]] && return 0
    [[ $rc -eq 99 ]] || { echo "new_vhost $vh: $out" >&2; return 1; }
  fi
  out=$(rmqctl add_vhost "$vh" 2>&1) || { echo "new_vhost $vh: $out" >&2; return 1; }
  out=$(rmqctl set_permissions -p "$vh" guest '.*' '.*' '.*' 2>&1) ||
    { echo "new_vhost $vh: $out" >&2; return 1; }
  return 0
}

broker_uri() {
  local vh=${1-/} enc='' c i
  [[ -n ${BROKER_PORT:-} ]] || broker_load || return 1
  for ((i = 0; i < ${#vh}; i++)); do
    c=${vh:i:1}
    case $c in
      [A-Za-z0-9._~-]) enc+=$c ;;
      *) enc+=$(printf '%%%02X' "'$c") ;;
    esac
  done
  echo "amqp://guest:guest@${BROKER_HOST:-127.0.0.1}:$BROKER_PORT/$enc"
}

# broker_start_own_tls CERTDIR: like broker_start_own, with a TLS listener
# serving CERTDIR/server.pem and server.key (CA CERTDIR/ca.pem); the env
# then also has FLEET_BROKER_TLS_URI (amqps://guest:guest@localhost:PORT/%2f)
# and BROKER_TLS_PORT. On a stopped own broker it starts the same node
# (same data and ports) with these certificates instead of the old ones.
broker_start_own_tls() {
  local certdir=$1 log=$TEST_DIR/.harness/broker-start.log
  [[ -n $certdir ]] || { echo "broker_start_own_tls: CERTDIR missing" >&2; return 1; }
  "$FLEET_ROOT/scripts/broker" start --dir "$TEST_DIR/broker" --tls "$certdir" \
    >/dev/null 2>"$log" || {
    echo "scripts/broker start --dir $TEST_DIR/broker --tls $certdir failed:" >&2
    cat "$log" >&2
    return 1
  }
  _broker_select "$TEST_DIR/broker/env"
}

# ---------------------------------------------------------------- cluster

# cluster_start_own [N]: an N-node (default 3) RabbitMQ cluster of private
# nodes in $TEST_DIR/cluster (scripts/broker cluster), used from now on:
# FLEET_BROKER_URI lists every node's URI (node 1 first), CLUSTER_URI_I,
# CLUSTER_PORT_I and CLUSTER_NODE_I name node I, and rmqctl talks to node 1.
# Every node is killed when the file ends.
cluster_start_own() {
  local n=${1:-3} log=$TEST_DIR/.harness/cluster-start.log
  "$FLEET_ROOT/scripts/broker" cluster start --nodes "$n" --dir "$TEST_DIR/cluster" \
    >/dev/null 2>"$log" || {
    echo "scripts/broker cluster start --nodes $n failed:" >&2
    cat "$log" >&2
    return 1
  }
  _broker_select "$TEST_DIR/cluster/env"
}

# cluster_kill I / cluster_stop_node I / cluster_start_node I: node I of the
# own cluster: kill -9 (data kept), stop cleanly, (re)start (it rejoins)
cluster_kill() { "$FLEET_ROOT/scripts/broker" cluster kill "$1" --dir "$TEST_DIR/cluster" 2>/dev/null; }
cluster_stop_node() { "$FLEET_ROOT/scripts/broker" cluster stop-node "$1" --dir "$TEST_DIR/cluster" 2>/dev/null; }
cluster_start_node() {
  "$FLEET_ROOT/scripts/broker" cluster start-node "$1" --dir "$TEST_DIR/cluster" >/dev/null 2>&1 ||
    "$FLEET_ROOT/scripts/broker" cluster start-node "$1" --dir "$TEST_DIR/cluster" >/dev/null
}

# cluster_ctl I ARGS...: rabbitmqctl against node I
cluster_ctl() {
  local i=$1
  shift
  "$FLEET_ROOT/scripts/broker" cluster ctl "$i" --dir "$TEST_DIR/cluster" -- "$@"
}

# cluster_running I: the running members as node I sees them, sorted, one a line
cluster_running() {
  cluster_ctl "$1" cluster_status --formatter json | jq -r '.running_nodes[]' | sort
}
