#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every errno of SPEC section 5 that a healthy broker can produce, provoked
# through a real mount, seen by the shell exactly as a user sees it.
# (ECOMM and ETIMEDOUT need a broker that is down or frozen: t0300.)
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0200
new_vhost $FLEET_VHOST

# send_err PEER  — send stdin's bytes in ONE write(2); prints the shell's error
one_write() {
    dd of="$1" bs=4M iflag=fullblock status=none 2>&1
}

test_expect_success 'alpha and beta mount' '
    mount_fleet alpha peers=beta:gamma max_message=64KiB &&
    mount_fleet beta peers=alpha
'

test_expect_success 'EINVAL: an empty message (echo with nothing to say)' '
    test_must_fail bash -c "echo >alpha/peers/beta/send" 2>err &&
    grep -q "write error: Invalid argument" err
'

test_expect_success 'EINVAL: not valid UTF-8' '
    test_must_fail bash -c "printf \"caf\\xe9\\n\" >alpha/peers/beta/send" 2>err &&
    grep -q "write error: Invalid argument" err &&
    printf "a\\0b" >nul && test_must_fail one_write alpha/peers/beta/send <nul
'

test_expect_success 'EMSGSIZE: one byte over max_message, in one write' '
    head -c 65537 /dev/zero | tr "\\0" x >big &&
    test_must_fail one_write alpha/peers/beta/send <big >err &&
    grep -q "Message too long" err &&
    head -c 65536 /dev/zero | tr "\\0" y >max &&
    one_write alpha/peers/beta/send <max
'

test_expect_success 'EMSGSIZE: 1 MiB and more, as one write' '
    head -c 3000000 /dev/zero | tr "\\0" z >huge &&
    test_must_fail one_write alpha/peers/beta/send <huge >err &&
    grep -q "Message too long" err
'

test_expect_success 'ENOENT: a peer that is not configured' '
    test_must_fail bash -c "echo hi >alpha/peers/nobody/send" 2>err &&
    grep -q "No such file or directory" err
'

# a message sent after the refused ones arrives after anything they might
# have published (one publisher, one queue: in order)
test_expect_success 'nothing refused reached the peer: only the good message is there' '
    echo "sent after the refused ones" >alpha/peers/beta/send &&
    test_absent 5 "grep -q \"sent after the refused ones\" beta/leads/beta/inbox" \
        "test \$(wc -l <beta/leads/beta/inbox) != 2" &&
    test "$(head -n1 beta/leads/beta/inbox | jq -r ".body | length")" = 65536
'

test_expect_success 'ENOSPC: the peer mailbox is full (x-max-length, reject-publish)' '
    new_vhost t0200small &&
    FLEET_VHOST=t0200small mount_fleet small peers=tiny max_length=2 &&
    echo one >small/peers/tiny/send &&
    echo two >small/peers/tiny/send &&
    test_must_fail bash -c "echo three >small/peers/tiny/send" 2>err &&
    grep -q "write error: No space left on device" err &&
    n=$(FLEET_VHOST=t0200small broker_count lead.tiny.inbox) && test "$n" = 2 &&
    test $(wc -l <small/leads/small/sent) = 2
'

test_expect_success 'ENXIO: the peer mailbox does not exist and may not be created' '
    rmqctl add_user limited s3cret >/dev/null &&
    rmqctl set_permissions -p $FLEET_VHOST limited "^(lead\\.lim\\..*|fleet\\..*)\$" ".*" ".*" >/dev/null &&
    FLEET_BROKER_URI="amqp://limited:s3cret@127.0.0.1:$BROKER_PORT/$FLEET_VHOST" mount_fleet lim peers=ghost &&
    grep -q "^broker: connected$" lim/status &&
    test_must_fail bash -c "echo boo >lim/peers/ghost/send" 2>err &&
    grep -q "write error: No such device or address" err &&
    ! grep -q s3cret lim/status lim.log
'

# RabbitMQ's 406 names the argument; LavinMQ's does not, and fleetfs says so
# and how to find it (its text: "declared with other arguments")
test_expect_success 'a mailbox declared with other arguments: the mount refuses, naming the argument (or saying the broker did not)' '
    mkdir -p mism &&
    test_must_fail "$FLEETFS" mism -f -o coord_id=beta,vhost=$FLEET_VHOST,state_dir=$TEST_DIR/state/mism,max_length=5,key=$TEST_DIR/keys/beta.key,trusted_keys=$TEST_DIR/trust 2>err &&
    grep -q "configuration mismatch" err &&
    if test "$(broker_kind)" = lavinmq; then
        grep -q "declared with other arguments (the broker does not say which argument differs" err
    else
        grep -q "inequivalent arg .x-max-length." err &&
        ! grep -q "does not say which argument" err
    fi &&
    ! mountpoint -q mism
'

test_expect_success 'a second mount with the same coord_id fails loudly and never consumes' '
    mkdir -p beta2 &&
    test_must_fail "$FLEETFS" beta2 -f -o coord_id=beta,vhost=$FLEET_VHOST,state_dir=$TEST_DIR/state/beta2,key=$TEST_DIR/keys/beta.key,trusted_keys=$TEST_DIR/trust,takeover_grace=1s 2>err &&
    grep -q "another fleetfs is already the consumer of lead.beta.inbox" err &&
    ! mountpoint -q beta2 &&
    rmqctl list_consumers -q -p $FLEET_VHOST queue_name >consumers &&
    test "$(grep -c "^lead.beta.inbox" consumers)" = 1
'

test_expect_success 'the same in daemon mode: the parent exits non-zero' '
    test_must_fail "$FLEETFS" beta2 -o coord_id=beta,vhost=$FLEET_VHOST,state_dir=$TEST_DIR/state/beta2,key=$TEST_DIR/keys/beta.key,trusted_keys=$TEST_DIR/trust,takeover_grace=1s 2>err &&
    grep -q "another fleetfs" err && ! mountpoint -q beta2
'

test_expect_success 'beta still serves after all this' '
    echo "still here?" >alpha/peers/beta/send &&
    wait_for 5 "grep -q \"still here\" beta/leads/beta/inbox"
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta && unmount_fleet small && unmount_fleet lim
'

test_done
