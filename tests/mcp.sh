# SPDX-License-Identifier: Apache-2.0
# tests/mcp.sh — the official MCP TypeScript SDK's client for the tests of
# `fleetfs mcp` (t0940, t0942): installed from the npm registry into build/
# once (shared by the tests, under a lock), and mcp()/call() to drive it.
# Source after tests/lib.sh; skips the whole test without node and npm.
MCP_SDK_VERSION=1.32.2
MCP_SDK_DIR=$FLEET_ROOT/build/npm-mcp-sdk
command -v node >/dev/null && command -v npm >/dev/null ||
  test_skip_all "node and npm are missing (scripts/install-deps installs them)"

# mcp_sdk_install: the SDK of MCP_SDK_VERSION and the client script in MCP_SDK_DIR
mcp_sdk_install() {
  local pkg=$MCP_SDK_DIR/node_modules/@modelcontextprotocol/sdk/package.json
  mkdir -p "$MCP_SDK_DIR" &&
  (
    flock 9 &&
    if ! test -f "$pkg" || ! grep -q "\"version\": \"$MCP_SDK_VERSION\"" "$pkg"; then
      npm install --prefix "$MCP_SDK_DIR" --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/sdk@$MCP_SDK_VERSION" >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
    fi
  ) 9>"$MCP_SDK_DIR/.lock" &&
  cp "$FLEET_ROOT/tests/tools/mcp_client.mjs" "$MCP_SDK_DIR/mcp_client.mjs"
}

# mcp MOUNT tools | mcp MOUNT call NAME ARGS...: the SDK client's output;
# MCP_AS=<gid> starts the server with --as <gid>
mcp() {
  local m=$1
  shift
  MCP_AS=${MCP_AS:-} timeout 60 node "$MCP_SDK_DIR/mcp_client.mjs" "$FLEETFS" "$TEST_DIR/$m" "$@"
}
# the one call's fields
call() { mcp "$1" call "$2" "$3" >out.json && cat out.json; }

# One long-lived server for a whole snippet (a session of the SDK client):
#   sess_start MOUNT       start it (MCP_AS as for mcp); input through a FIFO
#   sess_call NAME ARGS    one call; prints its answer line (waits up to 60 s)
#   sess_end               close its stdin; wait for the client to exit 0
# The answers accumulate in $TEST_DIR/sess.out, one line a call. A daemon
# started during a session must not keep the FIFO open (the client would
# never see the end of its input): start it with {SESS_FD}>&-.
sess_start() {
  rm -f "$TEST_DIR/sess.in" "$TEST_DIR/sess.out" &&
  mkfifo "$TEST_DIR/sess.in" && : >"$TEST_DIR/sess.out" &&
  { MCP_AS=${MCP_AS:-} node "$MCP_SDK_DIR/mcp_client.mjs" "$FLEETFS" "$TEST_DIR/$1" session \
      <"$TEST_DIR/sess.in" >"$TEST_DIR/sess.out" 2>"$TEST_DIR/sess.err" & } &&
  SESS_PID=$! &&
  exec {SESS_FD}>"$TEST_DIR/sess.in" &&
  SESS_N=0
}
sess_call() {
  local args=${2:-'{}'}
  SESS_N=$((SESS_N + 1)) &&
  printf '%s %s\n' "$1" "$args" >&"$SESS_FD" &&
  wait_for 60 "test \$(wc -l <\"$TEST_DIR/sess.out\") -ge $SESS_N" &&
  sed -n "${SESS_N}p" "$TEST_DIR/sess.out"
}
sess_end() {
  exec {SESS_FD}>&- &&
  wait "$SESS_PID"
}
