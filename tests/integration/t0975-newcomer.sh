#!/usr/bin/env bash
# What a newcomer trips on (issue 22), each through a real mount: one
# write(2) the kernel cuts into several FUSE requests, mount-point
# mistakes, configuration that cannot heal, an unset URI variable, URI
# passwords with separators in them, and the messages that must say what
# to do. What is counted is what the shell and the broker (rabbitmqctl)
# saw, never what fleetfs says it did.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared
FLEET_VHOST=t0950
new_vhost $FLEET_VHOST

# one_write FILE BYTES: BYTES bytes of "x" in ONE write(2) (dd, one block)
one_write() {
    head -c "$2" /dev/zero | tr "\\0" x >payload &&
    dd if=payload of="$1" bs="$2" count=1 iflag=fullblock status=none 2>&1
}

# The kernel passes at most 1 MiB per FUSE request; a bigger write(2)
# arrives as several requests. max_message stays below one request, so a
# write that is cut is always refused whole at its first piece.
test_expect_success 'max_message at or above one FUSE request (1 MiB) is refused at start' '
    mkdir -p m &&
    test_must_fail timeout 20 "$FLEETFS" m -f -o coord_id=x,insecure,max_message=1MiB 2>err &&
    grep -q "max_message.*1020KiB" err &&
    ! mountpoint -q m
'

test_expect_success 'splitter mounts with the largest max_message' '
    mount_fleet splitter peers=far max_message=1020KiB &&
    echo "first" >splitter/peers/far/send &&
    n=$(broker_count lead.far.inbox) && test "$n" = 1
'

test_expect_success 'one write of 2 MiB: EMSGSIZE, nothing published' '
    test_must_fail one_write splitter/peers/far/send 2097152 >err &&
    grep -q "Message too long" err &&
    n=$(broker_count lead.far.inbox) && test "$n" = 1
'

test_expect_success 'one write of 1 MiB + 1 byte: EMSGSIZE, nothing published' '
    test_must_fail one_write splitter/peers/far/send 1048577 >err &&
    grep -q "Message too long" err &&
    n=$(broker_count lead.far.inbox) && test "$n" = 1
'

test_expect_success 'one write of exactly max_message (1020 KiB): one message' '
    one_write splitter/peers/far/send 1044480 &&
    n=$(broker_count lead.far.inbox) && test "$n" = 2 &&
    test $(wc -l <splitter/leads/splitter/sent) = 2
'

test_expect_success 'one write of max_message + 1: EMSGSIZE, nothing published' '
    test_must_fail one_write splitter/peers/far/send 1044481 >err &&
    grep -q "Message too long" err &&
    n=$(broker_count lead.far.inbox) && test "$n" = 2
'

test_done
