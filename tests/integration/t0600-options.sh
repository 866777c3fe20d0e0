#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The command line and the config file: help, unknown options, bad values,
# credentials kept out of argv and config, precedence, a broker that is
# not there at start, quorum mailboxes, SIGTERM.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0600
new_vhost $FLEET_VHOST

test_expect_success 'fleetfs --help lists every option of SPEC section 8' '
    "$FLEETFS" --help >help &&
    for o in coord_id peers broker_uri_env broker_uri vhost queue_type max_length message_ttl \
             prefetch max_message send_timeout state_dir inject inject_target key trusted_keys ca config; do
        grep -q "^ *$o" help || { echo "missing: $o"; exit 1; }
    done &&
    "$FLEETFS" --version | grep -q "^fleetfs [0-9]"
'

test_expect_success 'an unknown option is an error with a message, not ignored' '
    mkdir -p m &&
    test_must_fail "$FLEETFS" m -f -o coord_id=x,bogus=1 2>err &&
    grep -q "unknown option .bogus." err &&
    test_must_fail "$FLEETFS" m -f --frobnicate 2>err &&
    grep -q "unknown flag" err &&
    ! mountpoint -q m
'

test_expect_success 'bad values name the option and what it takes' '
    test_must_fail "$FLEETFS" m -f -o prefetch=lots 2>err && grep -q "prefetch" err &&
    test_must_fail "$FLEETFS" m -f -o coord_id=Bad.Name 2>err && grep -q "coord_id" err &&
    test_must_fail "$FLEETFS" m -f -o queue_type=stream 2>err && grep -q "queue_type" err &&
    test_must_fail "$FLEETFS" m -f -o send_timeout=-1 2>err && grep -q "send_timeout" err &&
    test_must_fail "$FLEETFS" m -f -o peers=a::b 2>err && grep -q "peers" err &&
    test_must_fail "$FLEETFS" m -f -o max_message=2MiB 2>err && grep -q "max_message.*1\.\.1020KiB" err &&
    "$FLEETFS" --help | grep -q "max_message.*1\.\.1020KiB" &&
    test_must_fail "$FLEETFS" 2>err && grep -q "usage" err
'

test_expect_success 'agents and groups: a bad name is refused at start (exit 2), saying what it takes' '
    if "$FLEETFS" m -f -o coord_id=x,agents=w1:W2 </dev/null 2>err; then echo 0 >rc; else echo $? >rc; fi &&
    echo 2 >want && test_cmp want rc &&
    grep -q "agents: .W2. is not an agent name (expected \[a-z\]\[a-z0-9_-\]{0,31})" err &&
    if "$FLEETFS" m -f -o coord_id=x,agents=w1@x </dev/null 2>err; then echo 0 >rc; else echo $? >rc; fi &&
    test_cmp want rc && grep -q "not an agent name" err &&
    if "$FLEETFS" m -f -o coord_id=x,groups=all </dev/null 2>err; then echo 0 >rc; else echo $? >rc; fi &&
    test_cmp want rc && grep -q "groups: .all. is every entity.s group already" err &&
    printf "[fleetfs]\ncoord_id = x\n[agent Bad]\n" >agent1.conf &&
    if "$FLEETFS" m -f -o config=$TEST_DIR/agent1.conf </dev/null 2>err; then echo 0 >rc; else echo $? >rc; fi &&
    test_cmp want rc && grep -q "agent1.conf: \[agent Bad\]: .Bad. is not an agent name" err &&
    printf "[fleetfs]\ncoord_id = x\n[agent w1]\ncommand = rm\n" >agent2.conf &&
    if "$FLEETFS" m -f -o config=$TEST_DIR/agent2.conf </dev/null 2>err; then echo 0 >rc; else echo $? >rc; fi &&
    test_cmp want rc && grep -q "\[agent w1\]: unknown key .command." err &&
    if "$FLEETFS" m -f -o coord_id=x,agents=x </dev/null 2>err; then echo 0 >rc; else echo $? >rc; fi &&
    test_cmp want rc && grep -q "agent .x. and the lead would type into the same pane" err &&
    ! mountpoint -q m &&
    "$FLEETFS" --help >help && grep -q "^ *agents " help && grep -q "^ *groups " help &&
    grep -q "\[agent NAME\]" help
'

test_expect_success 'a password on the command line is refused and not echoed' '
    test_must_fail "$FLEETFS" m -f -o broker_uri=amqp://u:hunter2@127.0.0.1:1/ 2>err &&
    grep -q "FLEET_BROKER_URI" err &&
    ! grep -q hunter2 err
'

test_expect_success 'the config file is read, -o wins over it, unknown keys in it are errors' '
    printf "[fleetfs]\ncoord_id = conf\npeers = one:two\nvhost = $FLEET_VHOST\nstate_dir = $TEST_DIR/state/conf\n" >fleetfs.conf &&
    mount_fleet conf config=$TEST_DIR/fleetfs.conf peers=three &&
    grep -q "^coord_id: conf$" conf/status &&
    ls conf/peers >peers && echo three >want && test_cmp want peers &&
    printf "[fleetfs]\nnonsense = 1\n" >bad.conf &&
    test_must_fail "$FLEETFS" m -f -o config=$TEST_DIR/bad.conf 2>err &&
    grep -q "bad.conf" err && grep -q nonsense err &&
    printf "[fleetfs]\nbroker_uri = amqp://u:pw@h/\n" >pw.conf &&
    test_must_fail "$FLEETFS" m -f -o config=$TEST_DIR/pw.conf 2>err &&
    ! grep -q ":pw@" err
'

test_expect_success 'broker_uri_env names the variable that holds the URI' '
    MY_URI=$FLEET_BROKER_URI FLEET_BROKER_URI=amqp://guest:guest@127.0.0.1:1/ \
        mount_fleet envy broker_uri_env=MY_URI &&
    grep -q "^broker: connected$" envy/status
'

test_expect_success 'no broker at start: the mount comes up, says why, and sends fail with ECOMM' '
    FLEET_BROKER_URI=amqp://guest:topsecret@127.0.0.1:1/ mount_fleet lonely peers=beta &&
    grep -qE "^broker: (unreachable|connecting)" lonely/status &&
    grep -q "127.0.0.1:1" lonely/status &&
    ! grep -q topsecret lonely/status lonely.log &&
    grep -q "guest:\*\*\*@" lonely/status &&
    test_must_fail bash -c "echo hi >lonely/peers/beta/send" 2>err &&
    grep -q "Communication error on send" err
'

test_expect_success 'several broker URIs (cluster nodes): a dead first one, the next is used' '
    FLEET_BROKER_URI="amqp://guest:guest@127.0.0.1:1/%2f $FLEET_BROKER_URI" mount_fleet multi &&
    wait_for 15 "grep -q \"^broker: connected$\" multi/status" &&
    grep -q "^broker_uri: .*:$BROKER_PORT/" multi/status &&
    unmount_fleet multi
'

# LavinMQ takes x-queue-type quorum and makes its one kind of queue: status
# says the type the broker made, not the one asked for
test_expect_success 'quorum mailboxes work end to end; status says the type the broker made' '
    new_vhost t0600q &&
    FLEET_VHOST=t0600q mount_fleet qa peers=qb queue_type=quorum &&
    FLEET_VHOST=t0600q mount_fleet qb peers=qa queue_type=quorum &&
    echo "raft says hi" >qa/peers/qb/send &&
    wait_for 5 "grep -q \"raft says hi\" qb/leads/qb/inbox" &&
    rmqctl list_queues -q -p t0600q name type >types &&
    if test "$(broker_kind)" = lavinmq; then
        grep -q "lead.qb.inbox[[:space:]]classic$" types &&
        grep -q "^queue_type: classic (asked quorum: LavinMQ ignores x-queue-type; not replicated)$" qb/status
    else
        grep -q "lead.qb.inbox.*quorum" types &&
        grep -q "^queue_type: quorum$" qb/status
    fi
'

test_expect_success 'fleetfs keygen: 0600 secret, one-line public key, never overwrites' '
    "$FLEETFS" keygen k1 >out &&
    test "$(stat -c %a k1)" = 600 &&
    test $(wc -l <k1.pub) = 1 && grep -q "^ed25519 " k1.pub &&
    grep -q "trusted_keys" out &&
    test_must_fail "$FLEETFS" keygen k1 2>err && grep -qi "exists" err &&
    cmp k1.pub k1.pub
'

test_expect_success 'signed by default: no key and no insecure means no mount, with a message' '
    test_must_fail "$FLEETFS" m -f -o coord_id=nokey,vhost=$FLEET_VHOST,state_dir=$TEST_DIR/state/nokey 2>err &&
    grep -q "fleetfs keygen" err && grep -q "insecure" err &&
    ! mountpoint -q m &&
    chmod 644 k1 &&
    test_must_fail "$FLEETFS" m -f -o coord_id=nokey,vhost=$FLEET_VHOST,state_dir=$TEST_DIR/state/nokey,key=$TEST_DIR/k1,trusted_keys=$TEST_DIR 2>err &&
    grep -q "chmod 600" err
'

test_expect_success 'insecure: status says so on its first line' '
    mount_fleet loose insecure &&
    head -n1 loose/status | grep -q "^security: INSECURE" &&
    grep -q "^signing: off$" loose/status &&
    unmount_fleet loose
'

test_expect_success 'max_idle_threads=N mounts (libfuse takes it in its loop, not as a mount option); a bad N is refused' '
    mount_fleet idle insecure max_idle_threads=2 &&
    grep -q "^security: INSECURE" idle/status &&
    unmount_fleet idle &&
    ! grep -q "unknown option" idle.log &&
    test_must_fail "$FLEETFS" m -f -o coord_id=x,insecure,max_idle_threads=0 2>err &&
    grep -q "max_idle_threads=0: give a whole number from 1 to 1000" err &&
    test_must_fail "$FLEETFS" m -f -o coord_id=x,insecure,max_idle_threads=many 2>err &&
    grep -q "max_idle_threads=many" err &&
    ! mountpoint -q m
'

test_expect_success 'SIGTERM unmounts cleanly' '
    kill -TERM $(cat .harness/pid.envy) &&
    wait_for 10 "! mountpoint -q envy" &&
    wait_for 10 "grep -q unmounted envy.log"
'

test_expect_success 'unmount the rest' '
    unmount_fleet conf && unmount_fleet lonely && unmount_fleet qa && unmount_fleet qb &&
    unmount_fleet envy
'

test_done
