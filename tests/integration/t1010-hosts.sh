#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A fleet of three hosts: alpha, beta and gamma each in its own network
# namespace (tests/netns.sh), each with its own state, key and trust
# directory, all on one broker that they reach only over their link to a
# bridge. Each sends to each; every message arrives once; every host's
# peers/*/status tells the truth about the other two.
. "$(dirname "$0")/../lib.sh"
case ${FLEETFS_BUILD:-build} in *san*) test_skip_all --planned "plain run only: network namespaces around the same code t0100 and t1000 run under ASan" ;; esac
. "$FLEET_ROOT/tests/fleet.sh"
. "$FLEET_ROOT/tests/netns.sh"
netns_require
netns_setup || { echo "# netns_setup failed" >&2; exit 1; }
FLEET_VHOST=t1000
new_vhost $FLEET_VHOST

HOSTS="alpha beta gamma"
others() { for h in $HOSTS; do [[ $h == "$1" ]] || echo "$h"; done; }

test_expect_success 'three namespaces, each reaching the broker only over its own link' '
    netns_host alpha && netns_host beta && netns_host gamma &&
    for h in $HOSTS; do
        host_exec $h ip -4 -o addr show dev eth0 | grep -q "inet $(host_addr $h)/24" &&
        host_exec $h timeout 3 bash -c "echo >/dev/tcp/$(_netns_subnet).1/$BROKER_PORT" &&
        ! host_exec $h timeout 3 bash -c "echo >/dev/tcp/127.0.0.1/$BROKER_PORT" 2>/dev/null || exit 1
    done
'

test_expect_success 'each host mounts, with its own key and trust directory, connected over the bridge' '
    host_mount alpha peers=beta:gamma &&
    host_mount beta peers=alpha:gamma &&
    host_mount gamma peers=alpha:beta &&
    for h in $HOSTS; do
        wait_for 10 "grep -q \"^broker: connected$\" $h/status" &&
        grep -q "^broker_uri: amqp://guest:\*\*\*@$(_netns_subnet).1:$BROKER_PORT/" $h/status &&
        ls hosts/$h/trust >trust-of-$h &&
        others $h | sed "s/$/.pub/" >want && echo $h.pub >>want && sort -o want want &&
        test_cmp want trust-of-$h || exit 1
    done
'

test_expect_success 'each sends to each: six messages, each arrives once, from the right host' '
    for f in $HOSTS; do
        for t in $(others $f); do
            echo "from $f to $t" >$f/peers/$t/send || exit 1
        done
    done &&
    for t in $HOSTS; do
        wait_for 10 "test \$(wc -l <$t/leads/$t/inbox) = 2" &&
        jq -r "\"\(.from) \(.body)\"" $t/leads/$t/inbox | sort >got &&
        for f in $(others $t); do echo "$f from $f to $t"; done | sort >want &&
        test_cmp want got || exit 1
    done
'

test_expect_success 'peers/*/status is right on every host: present, empty, one consumer, reading, live' '
    for h in $HOSTS; do
        for p in $(others $h); do
            wait_for 5 "grep -q \"^messages: 0$\" $h/peers/$p/status" &&
            wait_for 15 "grep -q \"^presence: live\" $h/peers/$p/status" &&
            cat $h/peers/$p/status >st &&
            grep -q "^version: [0-9]" st &&
            grep -q "^mailbox: present$" st &&
            grep -q "^messages: 0$" st &&
            grep -q "^consumers: 1$" st &&
            grep -q "^state: reading$" st || { echo "$h sees $p:"; cat st; exit 1; }
        done
    done
'

test_expect_success 'acks flow back: every sender sees acked for both its messages' '
    for h in $HOSTS; do echo all >$h/leads/$h/ack || exit 1; done &&
    for h in $HOSTS; do
        wait_for 10 "test \"\$(jq -r .state $h/leads/$h/sent | sort -u)\" = acked" || exit 1
    done
'

test_expect_success 'a host that unmounts shows as not reading on the other two' '
    unmount_fleet gamma &&
    for h in alpha beta; do
        wait_for 10 "grep -q \"^consumers: 0$\" $h/peers/gamma/status" &&
        grep -q "^state: not-reading$" $h/peers/gamma/status || exit 1
    done
'

test_expect_success 'unmount cleanly' '
    unmount_fleet alpha && unmount_fleet beta
'

test_expect_success 'the namespaces, links and bridge go away with the test' '
    netns_teardown &&
    ! ip netns list | grep -q "ff${NETNS_TAG}-" &&
    ! ip link show | grep -q "ff${NETNS_TAG}"
'

test_done
