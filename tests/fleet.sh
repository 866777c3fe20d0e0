# SPDX-License-Identifier: Apache-2.0
# tests/fleet.sh — mount helpers for the integration tests; source after lib.sh.
#
#   mount_fleet NAME [OPT...]   mount $TEST_DIR/NAME as lead NAME, signing with
#                               its own key (fleet_key) unless OPTs say insecure (foreground
#                               daemon in the background, log in $TEST_DIR/NAME.log,
#                               state in $TEST_DIR/state/NAME); OPTs are -o items
#                               (FLEET_VHOST, when set, becomes -o vhost=)
#   unmount_fleet NAME          fusermount3 -u and wait for the daemon to exit
#                               (fails if it exits non-zero, e.g. a sanitizer report)
#   kill_fleet NAME             kill -9 the daemon and lazily unmount
#   fleet_gone NAME             true once the daemon has exited
#   msgids FILE                 the msgIds of a JSON Lines file, one per line
#   sent_state LEAD MSGID       the state of MSGID in LEAD's own sent file
#   last_sent_id LEAD           the msgId of the newest entry of LEAD's sent
#   fleet_reader MOUNT LOG      read and ack the inbox, log the msgIds acked (an oracle)
#   broker_count QUEUE          messages ready + unacked in QUEUE per rabbitmqctl
#                               (nothing for no such queue; fails if rabbitmqctl fails)
#   broker_close_consumer_channel QUEUE
#                               the broker closes the channel consuming QUEUE in
#                               $FLEET_VHOST with 406 (as after an ack of an unknown tag)
#   broker_queues               "QUEUE MESSAGES" for every queue of the vhost in use (the
#                               same count; fails if rabbitmqctl fails)
#   broker_connections          the names of $FLEET_VHOST's client connections, sorted, per
#                               the broker (a name carries the client's port: a reconnect
#                               makes a new one)

# fleet_key NAME: a key pair for lead NAME in $TEST_DIR/keys, its public half
# in the shared trust directory $TEST_DIR/trust (every test mount trusts
# every other; a peer's key added later is picked up when it first writes).
fleet_key() {
  local name=$1
  mkdir -p "$TEST_DIR/keys" "$TEST_DIR/trust"
  if [[ ! -f $TEST_DIR/keys/$name.key ]]; then
    "$FLEETFS" keygen "$TEST_DIR/keys/$name.key" >/dev/null || return 1
    cp "$TEST_DIR/keys/$name.key.pub" "$TEST_DIR/trust/$name.pub"
  fi
}

mount_fleet() {
  local name=$1 opts
  shift
  opts="coord_id=$name,state_dir=$TEST_DIR/state/$name,send_timeout=3s"
  [[ -n ${FLEET_VHOST:-} ]] && opts="$opts,vhost=$FLEET_VHOST"
  if [[ " $* " != *" insecure "* && " $* " != *" key="* ]]; then
    fleet_key "$name" || return 1
    opts="$opts,key=$TEST_DIR/keys/$name.key,trusted_keys=$TEST_DIR/trust"
  fi
  for o in "$@"; do opts="$opts,$o"; done
  mkdir -p "$TEST_DIR/$name"
  # a host in a network namespace (tests/netns.sh) runs it through nsenter
  local prefix=()
  [[ -s $TEST_DIR/.harness/exec.$name ]] && read -ra prefix <"$TEST_DIR/.harness/exec.$name"
  "${prefix[@]}" "$FLEETFS" "$TEST_DIR/$name" -f -o "$opts" </dev/null >>"$TEST_DIR/$name.log" 2>&1 &
  echo $! >"$TEST_DIR/.harness/pid.$name"
  at_exit "unmount_fleet $name >/dev/null 2>&1"
  test_log_on_failure "$TEST_DIR/$name.log"
  wait_for 15 "mountpoint -q '$TEST_DIR/$name' && test -r '$TEST_DIR/$name/status'" || {
    echo "mount_fleet $name: not mounted; log:" >&2
    cat "$TEST_DIR/$name.log" >&2
    return 1
  }
}

# fleet_gone NAME: the daemon has exited (a zombie waiting for its new
# parent to reap it counts as exited, but only once it is alone: after a
# kill -9 the main thread shows Z while the other threads still exit and
# still hold /dev/fuse open, and a stat then ends ECONNABORTED, not the
# ENOTCONN of a mount whose daemon is gone)
fleet_gone() {
  local pid tasks
  pid=$(cat "$TEST_DIR/.harness/pid.$1" 2>/dev/null) || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null || return 1
  tasks=$(ls "/proc/$pid/task" 2>/dev/null | wc -l)
  test "$tasks" -le 1
}

unmount_fleet() {
  local name=$1 pid rc=0
  pid=$(cat "$TEST_DIR/.harness/pid.$name" 2>/dev/null) || return 0
  # umount(2) says EBUSY while any request is in flight on the mount (the
  # daemon's own inotify truncates included): retry, as a person would
  local try err=
  for try in 1 2 3 4 5 6 7 8 9 10; do
    err=$(fusermount3 -u "$TEST_DIR/$name" 2>&1) && break
    mountpoint -q "$TEST_DIR/$name" || break
    sleep 0.3
  done
  if ! wait_for 15 "fleet_gone $name"; then
    echo "unmount_fleet $name: daemon $pid did not exit (fusermount3: ${err:-ok}); log tail:" >&2
    tail -n 5 "$TEST_DIR/$name.log" >&2
    # every thread's stack before the kill: where it hangs is what the
    # next person needs (bounded; only where gdb is installed)
    if command -v gdb >/dev/null; then
      echo "unmount_fleet $name: the threads of daemon $pid:" >&2
      timeout 60 gdb -p "$pid" -batch -nx -ex "thread apply all bt" </dev/null 2>&1 |
        grep -E '^(Thread|#)' | head -n 400 >&2
    fi
    kill -9 "$pid" 2>/dev/null
    rc=1
  fi
  # the exit status of a background job of another shell is not ours to
  # wait for; the daemon's log says how it ended
  if grep -qE 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:' "$TEST_DIR/$name.log"; then
    echo "unmount_fleet $name: sanitizer report in the log:" >&2
    grep -A30 -E 'Sanitizer|runtime error' "$TEST_DIR/$name.log" >&2
    rc=1
  fi
  if mountpoint -q "$TEST_DIR/$name"; then
    echo "unmount_fleet $name: $TEST_DIR/$name is still mounted (fusermount3: ${err:-ok})" >&2
    rc=1
  fi
  rm -f "$TEST_DIR/.harness/pid.$name"
  return $rc
}

kill_fleet() {
  local name=$1 pid
  pid=$(cat "$TEST_DIR/.harness/pid.$name" 2>/dev/null) || return 1
  kill -9 "$pid" &&
    wait_for 5 "fleet_gone $name" &&
    { fusermount3 -uz "$TEST_DIR/$name" 2>/dev/null || umount -l "$TEST_DIR/$name"; } &&
    rm -f "$TEST_DIR/.harness/pid.$name"
}

msgids() {
  jq -r .msgId "$1"
}

sent_state() {
  jq -r "select(.msgId == \"$2\") | .state" "$1/leads/$1/sent"
}

last_sent_id() {
  tail -n1 "$1/leads/$1/sent" | jq -r .msgId
}

# Prints nothing (status 0) for a queue that does not exist; when
# rabbitmqctl itself fails it says why on stderr and returns 1 (so a
# broken count never reads as zero or as "absent": use
# `n=$(broker_count Q) && test ...` where the status matters).
broker_queues() {
  local out err=$TEST_DIR/.harness/broker_queues.err
  out=$(rmqctl list_queues -q -p "${FLEET_VHOST:-/}" name messages 2>"$err") || {
    echo "rabbitmqctl list_queues failed:" >&2
    cat "$err" >&2
    return 1
  }
  printf '%s\n' "$out"
}

# queue_process suspend|resume QUEUE: QUEUE's process in the broker (vhost
# FLEET_VHOST) stops or goes on answering (sys:suspend/resume): publishes to
# it are taken and never confirmed, a passive declare of it never answers
queue_process() {
  local out
  out=$(rmqctl eval "
      {ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"$FLEET_VHOST\">>, queue, <<\"$2\">>)),
      sys:$1(amqqueue:get_pid(Q))." 2>&1) && grep -q ok <<<"$out" || {
    echo "queue_process $1 $2: $out" >&2
    return 1
  }
}

broker_connections() {
  rmqctl list_connections -q name vhost | awk -v v="$FLEET_VHOST" '$NF == v { print $1 }' | sort
}

broker_count() {
  local out
  out=$(broker_queues) || { echo "(broker_count $1)" >&2; return 1; }
  out=$(awk -v q="$1" '$1 == q { print $2 }' <<<"$out")
  # a queue whose process did not answer (fleetctl) has no count: fail,
  # never read as a number or as "no such queue"
  [[ $out != unanswered ]] || { echo "broker_count $1: its queue does not answer" >&2; return 1; }
  [[ -z $out ]] || printf '%s\n' "$out"
}

# The broker runs an ack of a delivery tag that does not exist on the
# channel consuming QUEUE, as if the client had sent it: the channel is
# closed with 406 PRECONDITION_FAILED and its unacked messages requeued.
broker_close_consumer_channel() {
  local out
  out=$(rmqctl eval "
      {ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"${FLEET_VHOST:-/}\">>, queue, <<\"$1\">>)),
      [rabbit_channel:do(element(1, C), {'basic.ack', 987654321, false})
       || C <- rabbit_amqqueue:consumers(Q)]." 2>&1) && grep -q ok <<<"$out" || {
    echo "broker_close_consumer_channel $1: $out" >&2
    return 1
  }
}

# _pubconn WHO: Erlang expressions that bind Conn to WHO's publishing
# connection (its reader process) in vhost FLEET_VHOST, found by the name
# fleetfs gives it, and ChSupSup to that connection's channel supervisor
_pubconn() {
  printf '%s' "
      IsPub = fun(N) -> binary:match(N, <<\"fleetfs $1@\">>) =/= nomatch andalso
                        binary:match(N, <<\"(publishing)\">>) =/= nomatch end,
      [Conn] = [P || P <- rabbit_networking:connections_local(),
                     [{vhost, V}, {client_properties, CP}] <-
                         [rabbit_reader:info(P, [vhost, client_properties])],
                     V =:= <<\"${FLEET_VHOST:-/}\">>,
                     {_, longstr, N} <- [lists:keyfind(<<\"connection_name\">>, 1, CP)],
                     IsPub(N)],
      {dictionary, D} = erlang:process_info(Conn, dictionary),
      [ConnSup | _] = proplists:get_value('\$ancestors', D),
      [Helper] = [P || {helper_sup, P, _, _} <- supervisor:which_children(ConnSup)],
      [ChSupSup] = [P || {channel_sup_sup, P, _, _} <- supervisor:which_children(Helper)],"
}

# broker_close_publish_channel WHO [hold]: the broker runs an ack of a
# delivery tag never given on WHO's publish channel (channel 1 of its
# publishing connection), as if fleetfs had sent it: the channel is closed
# with 406 PRECONDITION_FAILED, its unconfirmed publishes' fate unknown.
# With hold, the connection's channel supervisor is suspended first: the
# channel.open fleetfs sends then is answered only after
# broker_release_publish_channel WHO (RabbitMQ's reader, which asks that
# supervisor to start the channel, reads nothing more of the connection
# meanwhile). RabbitMQ only.
broker_close_publish_channel() {
  local out hold=
  # kept under a name: the held connection's reader answers nothing, so
  # the release cannot look the connection up again
  [[ ${2:-} == hold ]] && hold="true = register(fleetfs_test_held_$1, ChSupSup), ok = sys:suspend(ChSupSup),"
  out=$(rmqctl eval "$(_pubconn "$1")
      [Ch] = [P || P <- rabbit_channel:list_local(),
                   rabbit_channel:info(P, [connection, number]) =:=
                       [{connection, Conn}, {number, 1}]],
      $hold
      ok = rabbit_channel:do(Ch, {'basic.ack', 987654321, false}),
      {closed, Conn}." 2>&1) && grep -q closed <<<"$out" || {
    echo "broker_close_publish_channel $1: $out" >&2
    return 1
  }
}

broker_release_publish_channel() {
  local out
  out=$(rmqctl eval "P = whereis(fleetfs_test_held_$1), unregister(fleetfs_test_held_$1),
      sys:resume(P)." 2>&1) && grep -q ok <<<"$out" || {
    echo "broker_release_publish_channel $1: $out" >&2
    return 1
  }
}

# broker_publish_conn WHO: WHO's publishing connection as the broker
# names it (its pid): the same before and after means it was not made again
broker_publish_conn() {
  rmqctl eval "$(_pubconn "$1") Conn."
}

# fleet_header FROM MSGID MOUNT [REPLYTO]: the header line the injector types
# above a message from FROM, received by the lead mounted at $TEST_DIR/MOUNT.
fleet_header() {
  local re=""
  [[ -n ${4:-} ]] && re=", in reply to $4"
  printf "[fleet message from %s, msgId %s%s - reply: echo '...' > %s/peers/%s/reply/%s]\n" \
    "$1" "$2" "$re" "$TEST_DIR/$3" "$1" "$2"
}

# fleet_reader MOUNT LOG: what a careful reading script does, as an oracle
# that does not ask fleetfs what it did: read MOUNT's inbox, ack exactly the
# msgIds read, and append them to LOG once the ack succeeded (a failed ack
# is read again next round); every 0.2 s until ./stop exists. The lead is
# MOUNT's own name. Run it in the background ({ fleet_reader beta r.log & }).
fleet_reader() {
  local inbox=$1/leads/${1##*/}/inbox ack=$1/leads/${1##*/}/ack
  while [[ ! -e stop ]]; do
    msgids "$inbox" >batch 2>/dev/null
    if [[ -s batch ]] && cat batch >"$ack" 2>>reader.err; then
      cat batch >>"$2"
    fi
    _nap 0.2
  done
}

# ---- the control plane played from outside (t1040, t1041, t1042) ----------
# They need URI, CTLSIGN, RAWPUB (built tools: ctl_tools) and CTL_FAR, the
# host asked.
# presence_of MOUNT ID: the presence: line of MOUNT's peers/ID/status
# ("live (2s ago)", "stale (40s ago)", ...); a read of peers/ID looks ID up
# by name (which addresses it where the host does not hear the whole fleet)
presence_of() { sed -n 's/^presence: //p' "$1/peers/$2/status"; }
# roster_bindings_of LEAD: the binding keys of LEAD's roster queue in
# $FLEET_VHOST, per the broker, sorted
roster_bindings_of() {
  rmqctl list_bindings -q -p "$FLEET_VHOST" source_name destination_name routing_key |
    awk -F'\t' -v q="roster.$1." '$1 == "fleet.roster" && index($2, q) == 1 { print $3 }' | sort
}

# ctl_tools: BIN (the build's directory), CTLSIGN and RAWPUB in it; the
# file is skipped without ctlsign and without amqp-get.
ctl_tools() {
  command -v amqp-get >/dev/null || test_skip_all "amqp-get (amqp-tools) is not installed"
  BIN=$FLEET_ROOT/${FLEETFS_BUILD:-build}
  [[ ${FLEETFS_BUILD:-} == /* ]] && BIN=$FLEETFS_BUILD
  CTLSIGN=$BIN/tools/ctlsign
  RAWPUB=$BIN/tools/rawpub
  test -x "$CTLSIGN" || test_skip_all "no $CTLSIGN: build it with make"
}
# ctl_request FILE WHO ARG...: WHO signs a request to CTL_FAR
# (tests/tools/ctlsign ARGs, with WHO's key from fleet_key), kept in
# FILE.json, and it is put into control.CTL_FAR.
ctl_request() {
  local f=$1 who=$2
  shift 2
  "$CTLSIGN" "$TEST_DIR/keys/$who.key" --from "$who" --to "$CTL_FAR" "$@" >"$f.json" &&
    "$RAWPUB" "$URI" "control.$CTL_FAR" --body-file "$f.json" >/dev/null
}
# ctl_answer FILE [WHO]: CTL_FAR's answers to the request in FILE.json
# that WHO (default alpha) received, one JSON a line; every body taken
# from lead.WHO.receipts so far is kept in $TEST_DIR/answers.WHO.
ctl_answer() {
  local who=${2:-alpha}
  while amqp-get -u "$URI" -q "lead.$who.receipts" >>"$TEST_DIR/answers.$who" 2>/dev/null; do
    echo >>"$TEST_DIR/answers.$who"
  done
  jq -c --arg id "$(jq -r .msgId "$1.json")" \
    'select(.type == "spawned" and .requestId == $id)' "$TEST_DIR/answers.$who" 2>/dev/null
}

# Heartbeat rates as the broker counts them (t1003, t1005): a test binds
# its own queue $Q to fleet.roster and counts what is routed to it.
now_ms() { echo $(( ${EPOCHREALTIME/[.,]/} / 1000 )); }
# roster_beats: messages routed to $Q so far (its count and fleet.dlq's)
roster_beats() {
    local out
    out=$(broker_queues) || return 1
    awk -v q=$Q '$1 == q || $1 == "fleet.dlq" { n += $2 } END { print n + 0 }' <<<"$out"
}
# roster_rate_for FILE SECONDS: heartbeats a second routed to $Q over about
# SECONDS, x100, into FILE (the log gets the count). rabbitmqctl takes a
# second or two on a busy machine: the window is timed from the end of one
# count to the end of the next, not taken as SECONDS.
roster_rate_for() {
    local c0 c1 t0 t1
    c0=$(roster_beats) && t0=$(now_ms) && sleep "$2" && c1=$(roster_beats) && t1=$(now_ms) || return 1
    echo $(( (c1 - c0) * 100000 / (t1 - t0) )) >"$1"
    echo "$1: $((c1 - c0)) heartbeats routed to $Q in $((t1 - t0)) ms" | tee -a "$TEST_DIR/times"
}
