#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A broker URI that cannot work says what it asked for and how to fix it,
# in status and in the log, and never prints the password: a trailing '/'
# (the empty vhost), a vhost that does not exist, a wrong password, a port
# where nothing listens. The mount is served meanwhile.
. "$(dirname "$0")/../lib.sh"
. "$FLEET_ROOT/tests/fleet.sh"
broker_use_shared

base="amqp://guest:guest@127.0.0.1:$BROKER_PORT"
free_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# broker_line NAME: the broker: line of NAME's status
broker_line() { grep "^broker: " "$1/status"; }

# LavinMQ (1.0.1) takes the empty vhost for '/': there the mount connects,
# and its mailbox is in '/' (doc/operations.md, "Running on LavinMQ")
if [[ $(broker_kind) == lavinmq ]]; then
test_expect_success 'trailing slash on LavinMQ: the empty vhost is its default one, the mount works there' '
    FLEET_BROKER_URI="$base/" mount_fleet slash insecure &&
    wait_for 10 "grep -q \"^broker: connected\" slash/status" &&
    wait_for 10 "rmqctl list_queues -q -p / name >q && grep -qx lead.slash.inbox q" &&
    unmount_fleet slash
'
else
test_expect_success 'trailing slash: the empty vhost is named, and how to write the default one' '
    FLEET_BROKER_URI="$base/" mount_fleet slash insecure &&
    wait_for 10 "grep -q \"^broker: unreachable\" slash/status" &&
    broker_line slash >line &&
    grep -q "asks for the empty vhost '\'''\''" line &&
    grep -q "for the default vhost '\''/'\'' write amqp://127.0.0.1:$BROKER_PORT with no path, or amqp://127.0.0.1:$BROKER_PORT/%2f" line &&
    grep -q "asks for the empty vhost" slash.log &&
    wait_for 10 "grep -q \"presence: roster connection failed: .*asks for the empty vhost\" slash.log" &&
    ls slash/peers >/dev/null &&
    unmount_fleet slash
'
fi

test_expect_success 'a vhost that does not exist is named, with how to create it' '
    FLEET_BROKER_URI="$base/nosuch" mount_fleet novhost insecure &&
    wait_for 10 "grep -q \"^broker: unreachable\" novhost/status" &&
    broker_line novhost >line &&
    grep -q "the broker has no vhost '\''nosuch'\''" line &&
    grep -q "rabbitmqctl add_vhost '\''nosuch'\''" line &&
    unmount_fleet novhost
'

test_expect_success 'a wrong password: which user, and which variable holds the password; never the password' '
    FLEET_BROKER_URI="amqp://guest:Wr0ngSecret@127.0.0.1:$BROKER_PORT/%2f" mount_fleet badpw insecure &&
    wait_for 10 "grep -q \"^broker: unreachable\" badpw/status" &&
    broker_line badpw >line &&
    grep -q "refused the login of user '\''guest'\''" line &&
    grep -q "password in the environment variable FLEET_BROKER_URI (named by broker_uri_env)" line &&
    grep -q "refused the login of user" badpw.log &&
    wait_for 10 "grep -q \"presence: roster connection failed: .*refused the login of user '\''guest'\''\" badpw.log" &&
    ! grep -q Wr0ngSecret badpw/status badpw.log &&
    unmount_fleet badpw
'

test_expect_success 'the variable named by broker_uri_env is the one named' '
    MY_FLEET_URI="amqp://guest:Wr0ngSecret@127.0.0.1:$BROKER_PORT/%2f" \
        mount_fleet badpw2 insecure broker_uri_env=MY_FLEET_URI &&
    wait_for 10 "grep -q \"^broker: unreachable\" badpw2/status" &&
    grep -q "password in the environment variable MY_FLEET_URI" badpw2/status &&
    unmount_fleet badpw2
'

test_expect_success 'a port where nothing listens: said so, with the usual ports' '
    FLEET_BROKER_URI="amqp://guest:guest@127.0.0.1:$free_port" mount_fleet noport insecure &&
    wait_for 10 "grep -q \"^broker: unreachable\" noport/status" &&
    broker_line noport >line &&
    grep -q "nothing listens on 127.0.0.1:$free_port (connection refused)" line &&
    grep -q "usually 5672, 5671 for amqps://" line &&
    grep -q "nothing listens on 127.0.0.1:$free_port" noport.log &&
    grep -q "^broker_node: none (not connected)$" noport/status &&
    unmount_fleet noport
'

test_expect_success 'several URIs: FLEETFS_URI_START picks the first tried; status names the node' '
    FLEETFS_URI_START=1 FLEET_BROKER_URI="amqp://guest:guest@127.0.0.1:$free_port/%2f $base/%2f" \
        mount_fleet twouris insecure &&
    wait_for 10 "grep -q \"^broker: connected$\" twouris/status" &&
    if test "$(broker_kind)" = lavinmq; then
        grep -q "^broker_node: 127.0.0.1:$BROKER_PORT (LavinMQ [0-9.]*; heartbeat 10 s)$" twouris/status
    else
        grep -q "^broker_node: 127.0.0.1:$BROKER_PORT (RabbitMQ [0-9.]*, cluster [^;]*; heartbeat 10 s)$" twouris/status
    fi &&
    ! grep -q "unreachable" twouris.log &&
    unmount_fleet twouris
'

# On a quorum fleet the dead-letter queue is quorum too (it must survive a
# node like the mailboxes); a dead-letter queue that cannot be declared
# (here: one of the other type) is logged and never takes the connection
# down with it.
# (LavinMQ takes x-queue-type quorum and makes its one kind of queue: there
# the three are that kind, and status says so)
test_expect_success 'quorum fleet: mailbox, receipts and fleet.dlq are quorum queues (on LavinMQ: what it made, said)' '
    new_vhost t0360q &&
    FLEET_VHOST=t0360q mount_fleet qa insecure queue_type=quorum &&
    wait_for 10 "grep -q \"^consumer: ok$\" qa/status" &&
    if test "$(broker_kind)" = lavinmq; then t=classic; else t=quorum; fi &&
    wait_for 10 "rmqctl list_queues -q -p t0360q name type >types && grep -q \"^fleet.dlq[[:space:]]*$t\" types" &&
    grep -q "^lead.qa.inbox[[:space:]]*$t" types &&
    grep -q "^lead.qa.receipts[[:space:]]*$t" types &&
    if test $t = classic; then
        grep -q "^queue_type: classic (asked quorum: LavinMQ ignores x-queue-type; not replicated)$" qa/status
    else
        grep -q "^queue_type: quorum$" qa/status
    fi
'

test_expect_success 'a dead-letter declare the broker refuses is logged, the connection and consumer stay' '
    FLEET_VHOST=t0360q mount_fleet qc insecure queue_type=classic &&
    wait_for 10 "grep -q \"cannot declare fleet.dlx/fleet.dlq (406\" qc.log" &&
    grep -q "fleet.dlq exists with other arguments" qc.log &&
    wait_for 10 "grep -q \"^consumer: ok$\" qc/status" &&
    grep -q "^broker: connected$" qc/status &&
    ! grep -q "connection lost" qc.log &&
    unmount_fleet qc && unmount_fleet qa
'

test_done
