#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The far host's side of the control plane (SPEC section 11, issue 17):
# beta runs agents for alpha. The test is the requester: tests/tools/ctlsign
# signs a request with alpha's (or another host's) key and rawpub puts it
# into control.beta; beta's answers are read back from lead.alpha.receipts
# with amqp-get (no alpha mount takes them). Panes are counted with tmux
# itself, what was typed by the stand-in agent's own record of its input
# (tests/tools/fake-agent), refusals in beta's log and in its answers.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
command -v tmux >/dev/null || test_skip_all "tmux is not installed"
broker_use_shared
FLEET_VHOST=t1040
new_vhost $FLEET_VHOST
URI=$(broker_uri $FLEET_VHOST)

tmux_private

ctl_tools
AGENT=$BIN/tools/fake-agent

CTL_FAR=beta
request() { ctl_request "$@"; }
answer() { ctl_answer "$@"; }
state_of() { answer "$@" | jq -r .state | tail -n1; }
detail_of() { answer "$@" | jq -r .detail | tail -n1; }
# beta, the far host: tmux, profiles from beta.conf, alpha may ask
mount_beta() {
  mount_fleet beta inject=tmux inject_commands=fake-agent spawn_from=alpha \
    config="$TEST_DIR/beta.conf" heartbeat=1s
}
# a daemon that died by itself: its mount let go
reap_fleet() {
  fusermount3 -uz "$TEST_DIR/$1" 2>/dev/null || umount -l "$TEST_DIR/$1" 2>/dev/null
  rm -f "$TEST_DIR/.harness/pid.$1"
}
panes() { tmux list-panes -a | wc -l; }
marked() { tmux list-windows -a -F '#{@fleetfs_spawn}' | grep -c . || true; }
briefs() { grep -c "fleet brief from alpha, request $(jq -r .msgId "$1.json")" typed.worker || true; }

cat >beta.conf <<EOF
[profile worker]
command = $AGENT $TEST_DIR/typed.worker
dir_root = $TEST_DIR/work
max = 1
ready_timeout = 8s
# the stand-in agent records outside its dir; the sandbox is t1051's
sandbox = none

[profile noisy]
command = $AGENT --never-quiet
ready_timeout = 4s
max = 3
sandbox = none
EOF

test_expect_success 'beta offers profiles worker and noisy to alpha; hosts declared' '
    mkdir -p work/repo other &&
    ln -s "$TEST_DIR/other" work/escape &&
    tmux -f /dev/null new-session -d -s far -x 200 -y 50 "sleep 100000" &&
    for h in alpha beta gamma; do
        FLEET_BROKER_URI=$URI "$FLEETFS" declare $h >/dev/null && fleet_key $h || exit 1
    done &&
    mount_beta &&
    wait_for 10 "grep -q \"consuming control.beta\" beta.log" &&
    test $(panes) = 1
'

test_expect_success 'a spawn: ready, its pane titled w1, the brief typed once, the agent served' '
    request w1 alpha --profile worker --name w1 --dir repo --brief "your task: count to three" &&
    wait_for 20 "test -n \"\$(state_of w1)\"" &&
    answer w1 &&
    test "$(state_of w1)" = ready &&
    answer w1 | jq -e ".gid == \"w1@beta\" and .from == \"beta\" and .to == \"alpha\"" &&
    test $(panes) = 2 &&
    tmux list-panes -a -F "#{pane_title} #{pane_current_path}" | grep -x "w1 $TEST_DIR/work/repo" &&
    wait_for 5 "grep -q \"your task: count to three\" typed.worker" &&
    test $(briefs w1) = 1 &&
    grep -q "you are w1@beta; write to alpha: echo .\.\.\.. > $TEST_DIR/beta/agents/w1@beta/to/alpha" typed.worker &&
    test -d beta/agents/w1@beta &&
    grep -q "spawn: started w1@beta for alpha" beta.log
'

test_expect_success 'a message to w1@beta is typed into its pane after the brief' '
    "$RAWPUB" "$URI" "agent.w1@beta.inbox" --sign "$TEST_DIR/keys/alpha.key" --from alpha \
        --to w1@beta --text "after the brief" >/dev/null &&
    wait_for 10 "grep -q \"after the brief\" typed.worker" &&
    grep -q "fleet message from alpha" typed.worker &&
    test $(briefs w1) = 1
'

# refused REQ WORDS [WHO]: answered refused with WORDS, logged with them
refused() {
  test "$(state_of $1 ${3:-})" = refused &&
    detail_of $1 ${3:-} | grep -F "$2" &&
    grep "spawn: refused .*$(jq -r .msgId $1.json)" beta.log | grep -F "$2"
}

test_expect_success 'every refusal is answered, and no pane is made for any' '
    request g1 gamma --profile worker --name g1 &&
    request p1 alpha --profile nosuch --name p1 &&
    request t1 alpha --profile worker --name w1 &&
    request d1 alpha --profile worker --name d1 --dir .. &&
    request d2 alpha --profile worker --name d2 --dir /etc &&
    request d3 alpha --profile worker --name d3 --dir escape &&
    request m1 alpha --profile worker --name m1 --dir repo &&
    request x1 alpha --type spawned &&
    wait_for 15 "test -n \"\$(state_of x1)\" && test -n \"\$(state_of g1 gamma)\"" &&
    test $(panes) = 2 && test $(marked) = 1 && test $(briefs w1) = 1
'

test_expect_success 'refused: a requester not in spawn_from (gamma, trusted)' '
    refused g1 "requester not in spawn_from" gamma
'

test_expect_success 'refused: an unknown profile' '
    refused p1 "unknown profile"
'

test_expect_success 'refused: a name taken (w1 runs)' '
    refused t1 "name taken"
'

test_expect_success 'refused: a dir outside dir_root, by .., absolute, and through a symlink' '
    refused d1 "dir not allowed" && refused d2 "dir not allowed" && refused d3 "dir not allowed"
'

test_expect_success 'refused: over max (worker runs once already)' '
    refused m1 "over max"
'

test_expect_success 'refused: malformed (a spawned envelope sent as a request)' '
    refused x1 "malformed request"
'

test_expect_success 'a replayed request is refused: no second pane, no second brief' '
    "$RAWPUB" "$URI" control.beta --body-file w1.json >/dev/null &&
    wait_for 10 "test \"\$(answer w1 | wc -l)\" = 2" &&
    answer w1 | tail -n1 | jq -e ".state == \"refused\"" &&
    detail_of w1 | grep -q replayed &&
    grep -q "spawn: refused alpha.s spawn request $(jq -r .msgId w1.json) (w1): replayed" beta.log &&
    test $(panes) = 2 && test $(briefs w1) = 1
'

test_expect_success 'not answered, to fleet.dlq: a forged request, garbage, another host key' '
    dlq0=$(broker_count fleet.dlq) &&
    request f1 alpha --profile worker --name f1 --tamper &&
    "$CTLSIGN" "$TEST_DIR/keys/gamma.key" --from alpha --to beta --profile worker --name f2 >f2.json &&
    "$RAWPUB" "$URI" control.beta --body-file f2.json >/dev/null &&
    "$RAWPUB" "$URI" control.beta --body "{\"v\":1,\"type\":\"spawn\"" >/dev/null &&
    wait_for 10 "grep -q \"no control envelope\" beta.log" &&
    grep -q "refused spawn request $(jq -r .msgId f1.json) claiming to be from alpha: signature" beta.log &&
    grep -q "refused spawn request $(jq -r .msgId f2.json) claiming to be from alpha: signature" beta.log &&
    wait_for 10 "test \"\$(broker_count fleet.dlq)\" = $((${dlq0:-0} + 3))" &&
    test -z "$(answer f1)" && test -z "$(answer f2)" &&
    test $(panes) = 2
'

test_expect_success 'an agent that never becomes ready: failed with the reason, no pane left' '
    request n1 alpha --profile noisy --name n1 &&
    wait_for 20 "test -n \"\$(state_of n1)\"" &&
    test "$(state_of n1)" = failed &&
    detail_of n1 &&
    test -n "$(detail_of n1)" &&
    grep -q "spawn: n1@beta for alpha (request $(jq -r .msgId n1.json)) failed" beta.log &&
    test $(panes) = 2 && test $(marked) = 1 &&
    test ! -d beta/agents/n1@beta
'

test_expect_success 'stop: the pane closed, the agent retired' '
    request s1 alpha --type stop --gid w1@beta &&
    wait_for 10 "test -n \"\$(state_of s1)\"" &&
    test "$(state_of s1)" = stopped &&
    test $(panes) = 1 && test $(marked) = 0 &&
    wait_for 5 "test ! -d beta/agents/w1@beta"
'

# a brief present but empty is none: signed as absent, nothing typed,
# and neither the answer nor the log says a brief was typed
test_expect_success 'a spawn with an empty brief: ready, nothing typed, not logged as typed' '
    request e1 alpha --profile worker --name e1 --brief "" &&
    jq -e ".brief == \"\"" e1.json &&
    wait_for 20 "test -n \"\$(state_of e1)\"" &&
    test "$(state_of e1)" = ready &&
    ! detail_of e1 | grep "brief" &&
    grep "spawn: e1@beta is ready for alpha (request $(jq -r .msgId e1.json))" beta.log >ready.line &&
    grep "its brief empty: nothing typed" ready.line &&
    ! grep "brief typed" ready.line &&
    test $(briefs e1) = 0 &&
    request s3 alpha --type stop --gid e1@beta &&
    wait_for 10 "test \"\$(state_of s3)\" = stopped" &&
    test $(panes) = 1 && test $(marked) = 0
'

test_expect_success 'stop refused: an agent beta did not start' '
    request s2 alpha --type stop --gid w9@beta &&
    wait_for 10 "test -n \"\$(state_of s2)\"" &&
    test "$(state_of s2)" = refused &&
    detail_of s2 | grep -q "not an agent this host started"
'

test_expect_success 'beta killed -9 in the middle of a start and restarted: failed, no pane left' '
    request k1 alpha --profile noisy --name k1 &&
    wait_for 10 "test \$(marked) = 1" &&
    kill_fleet beta &&
    test $(marked) = 1 &&
    mount_beta &&
    wait_for 10 "test -n \"\$(state_of k1)\"" &&
    test "$(state_of k1)" = failed &&
    detail_of k1 | grep -q "restarted during the start" &&
    test $(marked) = 0 && test $(panes) = 1 &&
    test "$(answer k1 | wc -l)" = 1
'

test_expect_success 'beta killed -9 after the agent was ready, before its answer: failed, no pane left' '
    kill_fleet beta &&
    FLEETFS_TEST_DIE_BEFORE_ANSWER=1 mount_beta &&
    request r1 alpha --profile worker --name r1 --brief "brief of r1" &&
    wait_for 20 "fleet_gone beta" &&
    reap_fleet beta &&
    test $(marked) = 1 &&
    test -z "$(answer r1)" &&
    mount_beta &&
    wait_for 10 "test -n \"\$(state_of r1)\"" &&
    test "$(state_of r1)" = failed &&
    detail_of r1 | grep -q "restarted after the agent was ready" &&
    test $(marked) = 0 && test $(panes) = 1 &&
    test ! -d beta/agents/r1@beta &&
    test "$(answer r1 | wc -l)" = 1
'

test_done
