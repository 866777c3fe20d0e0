# SPDX-License-Identifier: Apache-2.0
# tests/herdr.sh — a fake herdr for the injection tests; source after lib.sh.
#
#   herdr_start          start tests/fake_herdr on $HERDR_SOCKET_PATH with the
#                        state in $TEST_DIR/herdr.json (write it first: herdr_state)
#   herdr_stop           stop it (the socket goes away)
#   herdr_state JSON     replace the whole state (atomically)
#   herdr_set JQ-FILTER  edit the state with jq, e.g. '.panes[0].agent_status="working"'
#   prompts              number of texts the fake accepted (typed)
#   refused              number of prompts the fake refused
#   herdr_calls          number of requests the fake answered (any method)
#   herdr_looked_again N  true once fleetfs made N more requests than now:
#                        `n=$(herdr_calls) && test_absent 10 "herdr_looked_again 2 $n" ...`
#   pane NAME STATUS [LABEL]  a PaneInfo JSON object for herdr_state

FAKE_HERDR=$FLEET_ROOT/${FLEETFS_BUILD:-build}/fake-herdr
export HERDR_SOCKET_PATH=$TEST_DIR/herdr.sock
HERDR_LOG=$TEST_DIR/herdr-prompts.jsonl

herdr_state() {
  printf '%s\n' "$1" >"$TEST_DIR/herdr.json.tmp" && mv "$TEST_DIR/herdr.json.tmp" "$TEST_DIR/herdr.json"
}

herdr_set() {
  jq -c "$1" "$TEST_DIR/herdr.json" >"$TEST_DIR/herdr.json.tmp" &&
    mv "$TEST_DIR/herdr.json.tmp" "$TEST_DIR/herdr.json"
}

herdr_start() {
  "$FAKE_HERDR" --socket "$HERDR_SOCKET_PATH" --state "$TEST_DIR/herdr.json" --log "$HERDR_LOG" \
    </dev/null >>"$TEST_DIR/fake-herdr.out" 2>&1 &
  echo $! >"$TEST_DIR/.harness/pid.herdr"
  test_log_on_failure "$TEST_DIR/fake-herdr.out"
  test_log_on_failure "$HERDR_LOG"
  at_exit "kill \$(cat $TEST_DIR/.harness/pid.herdr 2>/dev/null) 2>/dev/null"
  wait_for 5 "test -S '$HERDR_SOCKET_PATH'"
}

herdr_stop() {
  kill "$(cat "$TEST_DIR/.harness/pid.herdr")" && wait_for 5 "! test -S '$HERDR_SOCKET_PATH'"
}

prompts() {
  if [[ -f $HERDR_LOG ]]; then wc -l <"$HERDR_LOG"; else echo 0; fi
}

refused() {
  if [[ -f $HERDR_LOG.refused ]]; then wc -l <"$HERDR_LOG.refused"; else echo 0; fi
}

herdr_calls() {
  if [[ -f $HERDR_LOG.calls ]]; then wc -l <"$HERDR_LOG.calls"; else echo 0; fi
}

herdr_looked_again() {
  (( $(herdr_calls) >= $2 + $1 ))
}

pane() {
  local name=$1 status=$2 label=${3:-}
  jq -cn --arg n "$name" --arg s "$status" --arg l "$label" \
    '{pane_id: ("w1:p" + ($n|length|tostring) + $n), workspace_id: "w1", tab_id: "w1:t1",
      agent: "claude", name: $n, agent_status: $s} + (if $l != "" then {label: $l} else {} end)'
}
