# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/faults/faults.sh — streams of messages through a fault, and their
# reconciliation against what the test itself observed; source after
# lib.sh and fleet.sh (and herdr.sh when the receiver types).
#
# The oracle rule: delivered and duplicates are counted from observers the
# test owns, never from what fleetfs says it did (its history, sent or
# status counters are the thing under test):
#   - the writer's own record of every write(2) and its result;
#   - the reader's own log: every inbox line it read, and the result of the
#     ack(2) write of exactly those msgIds (never a blind `ack all`);
#   - the fake herdr's prompt log: every text typed into the pane;
#   - the broker's own queue counts (rabbitmqctl): what is left in the
#     mailbox, and the dead letters in fleet.dlq.
#
# FROM, TO and NAME below are a lead (its coord_id, whose mount is
# $TEST_DIR/<coord_id>) or a local agent of one (its gid NAME@COORD_ID): an
# agent's files are agents/<gid>/ of its host's mount, it sends through
# agents/<gid>/to/TO, a lead sends to an agent through agents/<gid>/send,
# and an agent's mailbox in the broker is agent.<gid>.inbox.
#
#   stream_start FROM TO N TAG      in the background, write N messages "TAG I" (I = 1..N)
#                                   to FROM's send file for TO, one write(2) each, recording
#                                   "I ok" or "I ERRNO" per write in $TEST_DIR/TAG.writes
#                                   ("I ETIMEDOUT MSGID": the newest entry of FROM's sent,
#                                   the address for the resend); after a failed write it waits
#                                   0.1 s, as a script would; STREAM_PACE=S: S seconds before
#                                   every write
#   stream_written TAG FROM N       the record of one write(2) that carried the N lines
#                                   "TAG 1".."TAG N" and succeeded, for reconcile
#   stream_wait TAG [TIMEOUT]       wait for that sender to finish
#   stream_progress TAG             how many writes it has done so far
#   after_fault FROM TO TAG [K]     once the stream is done and the fault over: the fate
#                                   of each write that failed ETIMEDOUT awaited at TO
#                                   (consumed there, or TO's mailbox empty: _fate_known),
#                                   then every one TO did not consume published again
#                                   under its msgId (resend_timedout: FROM's resend file,
#                                   one write each, results in TAG.resent), then K
#                                   (default 3) more writes
#                                   "TAG I" (I = N+1..N+K), each of which must succeed;
#                                   reconcile then requires them consumed, so both sides are
#                                   proven to work again
#   receiver_killed TAG NAME        right after kill_fleet NAME mid-stream: note what the test
#                                   had seen consumed by then (prompt log and NAME's reader's
#                                   ack log line counts, the stream's progress) in TAG.kills
#   reader_start NAME [PAUSE [show]] in the background, as a script would: read NAME's inbox
#                                   (a fresh cat every PAUSE s, default 0.2), log every line
#                                   read ($TEST_DIR/NAME.read: pass, msgId, body), then ack
#                                   exactly those msgIds (one write(2) for all: a dd of a file,
#                                   since bash writes each line apart; on ENOENT one msgId per
#                                   write) and log each result ($TEST_DIR/NAME.acked: pass,
#                                   msgId, ok or ERRNO). Errors are logged, never fatal: the
#                                   broker or the mount may be away. It survives remounts.
#                                   With "show" it only reads and logs (never acks): a
#                                   reader that is shown messages and leaves them to expire.
#   reader_stop NAME
#   settled TAG TO                  true once every successful write of TAG has been
#                                   observed consumed at TO (acked by the reader or typed)
#   reconcile TAG TO [OPT...]       compare the writes with the observed consumptions at TO
#                                   and the broker's counts; prints one line
#                                     sent-ok N, failed N (by errno), delivered N (acked N,
#                                     typed N), duplicates N, lost N, uncertain N, arrived
#                                     after ETIMEDOUT N, resent after ETIMEDOUT N, left in
#                                     mailbox N, dead letters N; after the fault N ok
#                                   and succeeds only with: at least --min-ok N successful
#                                   writes of the stream itself (default half of it;
#                                   after_fault's are judged apart); every successful write,
#                                   and every ETIMEDOUT one (resent by after_fault), consumed
#                                   exactly once, its body matched whole ("TAG I" and nothing
#                                   more; anything else starting "TAG " is a stray) — or, at
#                                   most --uncertain N events in all (default 0): the message
#                                   the test's own logs show in flight at a kill
#                                   (receiver_killed: the oldest written and not yet seen
#                                   consumed) that the receiver's history calls uncertain and
#                                   nobody saw, or the messages of one reader ack write cut
#                                   off ECONNABORTED/ENOTCONN by the kill and never seen again;
#                                   at most --faults N (default 1) writes failed ETIMEDOUT (one
#                                   write in flight per fault); nothing shown again after it
#                                   was consumed, nor a second copy under another msgId, even
#                                   one whose ack failed; judged on a second look
#                                   FAULT_LATE_S (default 5) s after the mailbox emptied, so a
#                                   late duplicate counts; every failed write answered
#                                   with a send errno of SPEC section 5 (or ENOBUFS: the broker's
#                                   resource alarm); nothing delivered whose write was refused
#                                   (ECOMM: nothing published; ENOSPC: mailbox full; ENXIO: no
#                                   mailbox; ENOBUFS: publishing blocked) — a refusal that lied; the
#                                   after_fault writes all ok and consumed; TO's mailbox empty
#                                   in the broker (a missing queue or a failed query fails); exactly
#                                   --dlq N (default 0) messages in fleet.dlq (a missing fleet.dlq
#                                   fails) besides torn copies (_torn_copies: a broker killed
#                                   mid-write, at most two a fault; the line then says
#                                   "torn copies N"; fleet.dlq is emptied to look); and TO's
#                                   and FROM's status `rejected:` adding up to --rejected N
#                                   (default the --dlq count) plus the torn copies so far
#   dead_letters_are N [NAME...]    fleet.dlq holds exactly N messages (fails loudly when the
#                                   queue is missing or rabbitmqctl fails), and each NAME's
#                                   status says `rejected: N`; prints what it found
#   both_sides_work FROM TO [HOW]   a write FROM -> TO succeeds, and TO consumes it exactly
#                                   once (counted again after FAULT_LATE_S): HOW read (TO's
#                                   reader acks it; the default while one runs), typed (the
#                                   fake herdr is asked to type it) or hand (the default
#                                   otherwise: a read of the inbox and an ack of that msgId)
#   fault_end TAG A B [HOW]         the end of a test without a stream: dead_letters_are 0 A B,
#                                   both_sides_work A B HOW and B A; one line in TAG.reconciled
#   scaled N                        N * FAULT_SCALE
#   stream_size N                   N * FAULT_SCALE, at most 1000 (soak scales rounds and
#                                   faults, not one stream's length)
FAULT_SCALE=${FAULT_SCALE:-1}

scaled() { echo $(($1 * FAULT_SCALE)); }

stream_size() { local n=$(($1 * FAULT_SCALE)); echo $((n > 1000 ? 1000 : n)); }

# errno name for the message the shell printed
errno_of() {
  case $1 in
    *"Connection timed out"*) echo ETIMEDOUT ;;
    *"Communication error on send"*) echo ECOMM ;;
    *"No space left on device"*) echo ENOSPC ;;
    *"No such device or address"*) echo ENXIO ;;
    *"Message too long"*) echo EMSGSIZE ;;
    *"Invalid argument"*) echo EINVAL ;;
    *"No such file or directory"*) echo ENOENT ;;
    *"Transport endpoint is not connected"*) echo ENOTCONN ;;
    *"Software caused connection abort"*) echo ECONNABORTED ;;
    *"Input/output error"*) echo EIO ;;
    *"No buffer space available"*) echo ENOBUFS ;;
    *) echo "OTHER:$(tr -s ' \n' '__' <<<"$1")" ;;
  esac
}

# _home NAME: the directory of NAME's own files (inbox, ack, history, sent)
_home() {
  case $1 in
    *@*) echo "$TEST_DIR/${1#*@}/agents/$1" ;;
    *) echo "$TEST_DIR/$1/leads/$1" ;;
  esac
}

# _status_file NAME: a lead's mount status, an agent's agents/<gid>/status
_status_file() {
  case $1 in
    *@*) echo "$(_home "$1")/status" ;;
    *) echo "$TEST_DIR/$1/status" ;;
  esac
}

# _box NAME: NAME's mailbox in the broker
_box() {
  case $1 in
    *@*) echo "agent.$1.inbox" ;;
    *) echo "lead.$1.inbox" ;;
  esac
}

# _send_file FROM TO: where FROM writes a message to TO
_send_file() {
  case $1:$2 in
    *@*:*) echo "$(_home "$1")/to/$2" ;;
    *:*@*) echo "$TEST_DIR/$1/agents/$2/send" ;;
    *) echo "$TEST_DIR/$1/peers/$2/send" ;;
  esac
}

# _write_one FROM TO TEXT: one write(2) to FROM's send file for TO; prints ok or the errno
_write_one() {
  local err
  if err=$({ echo "$3" >"$(_send_file "$1" "$2")"; } 2>&1); then
    echo ok
  else
    errno_of "$err"
    return 1
  fi
}

# _timedout_id FROM PREV: the msgId of the write FROM's sent just recorded
# (the newest entry: the stream is FROM's only writer), or "-" when there is
# none or it is PREV (that write made no entry). Taken from fleetfs only as
# an address for the resend: the message must then be consumed exactly once,
# so a wrong msgId shows as a loss.
_timedout_id() {
  local id
  id=$(tail -n 1 "$(_home "$1")/sent" 2>/dev/null | jq -r '.msgId // empty' 2>/dev/null)
  [[ -n $id && $id != "$2" ]] && echo "$id" || echo -
}

_stream_main() {
  local from=$1 to=$2 n=$3 tag=$4 i r prev=-
  for ((i = 1; i <= n; i++)); do
    [[ -z ${STREAM_PACE:-} ]] || sleep "$STREAM_PACE"
    r=$(_write_one "$from" "$to" "$tag $i") || {
      # its fate is unknown: note its msgId for after_fault's resend
      [[ $r != ETIMEDOUT ]] || { prev=$(_timedout_id "$from" "$prev") && r="$r $prev"; }
      # a script backs off a little after an error
      sleep 0.1
    }
    echo "$i $r"
  done >"$TEST_DIR/$tag.writes"
  echo done >"$TEST_DIR/$tag.done"
}

# stream_written TAG FROM N: the record of one write(2) that carried the N
# lines "TAG 1" .. "TAG N" to FROM's send file and succeeded (each line is
# a message), so reconcile can judge them message by message
stream_written() {
  local tag=$1 i
  for ((i = 1; i <= $3; i++)); do echo "$i ok"; done >"$TEST_DIR/$tag.writes"
  echo "$2" >"$TEST_DIR/$tag.from"
  echo done >"$TEST_DIR/$tag.done"
  rm -f "$TEST_DIR/$tag.after" "$TEST_DIR/$tag.resent" "$TEST_DIR/$tag.kills"
}

# resend_timedout TAG [TO]: once the fault is over, every write of TAG that
# failed ETIMEDOUT is published again under its msgId (FROM's resend file,
# as its writer would), one write each; "NUMBER RESULT" per write in
# TAG.resent (EINVAL: no longer unconfirmed, the broker had it). With TO,
# one the test saw consumed at TO is not ("NUMBER consumed"): it arrived,
# and a second copy would be the receiver's `duplicate` or `replayed` dead
# letter (SPEC section 9: a msgId seen before is refused). reconcile then
# wants each of them consumed exactly once.
resend_timedout() {
  local tag=$1 to=${2:-} from i r id rest err
  from=$(cat "$TEST_DIR/$tag.from")
  : >"$TEST_DIR/$tag.resent"
  while read -r i r id rest; do
    [[ $r == ETIMEDOUT ]] || continue
    if [[ -n $to && $(_consumed_n "$to" "$tag $i") -ge 1 ]]; then
      echo "$i consumed" >>"$TEST_DIR/$tag.resent"
    elif [[ -z $id || $id == - ]]; then
      echo "$i no-msgId" >>"$TEST_DIR/$tag.resent"
    elif err=$({ echo "$id" >"$(_home "$from")/resend"; } 2>&1); then
      echo "$i ok" >>"$TEST_DIR/$tag.resent"
    else
      echo "$i $(errno_of "$err")" >>"$TEST_DIR/$tag.resent"
    fi
  done <"$TEST_DIR/$tag.writes"
}

# receiver_killed TAG NAME: call right after kill_fleet NAME while stream
# TAG runs: notes what the test itself had seen consumed at the kill (the
# fake herdr's prompt log and NAME's reader's ack log, their line counts),
# so reconcile can tell which message was in flight then
receiver_killed() {
  local p=0 a=0
  sleep 0.2 # a request the fake took just before the kill is logged
  [[ -n ${HERDR_LOG:-} && -f $HERDR_LOG ]] && p=$(wc -l <"$HERDR_LOG")
  [[ -f $TEST_DIR/$2.acked ]] && a=$(wc -l <"$TEST_DIR/$2.acked")
  echo "$p $a $(stream_progress "$1")" >>"$TEST_DIR/$1.kills"
}

stream_start() {
  local tag=$4
  rm -f "$TEST_DIR/$tag.done" "$TEST_DIR/$tag.writes" "$TEST_DIR/$tag.after" "$TEST_DIR/$tag.resent" "$TEST_DIR/$tag.kills"
  echo "$1" >"$TEST_DIR/$tag.from"
  _stream_main "$@" </dev/null &
  echo $! >"$TEST_DIR/.harness/stream.$tag"
  at_exit "kill \$(cat $TEST_DIR/.harness/stream.$tag) 2>/dev/null || true"
  return 0
}

stream_progress() {
  if [[ -f $TEST_DIR/$1.writes ]]; then wc -l <"$TEST_DIR/$1.writes"; else echo 0; fi
}

stream_wait() {
  wait_for "${2:-600}" "test -f '$TEST_DIR/$1.done'"
}

# _fate_known TAG TO: wait (up to FAULT_FATE_S, default 120 s) until the
# fate of every write of TAG that failed ETIMEDOUT is known at TO: the test
# saw it consumed there, or TO's mailbox in the broker held nothing at two
# looks a second apart (nothing ready, nothing held unacked: a copy that
# is not consumed by then never arrived). A resend before that can be a
# second copy of a message the broker took without confirming it: when
# the stream ends a second after the broker is back, the receiver has not
# read it yet, and its receipt, which would make the resend refused
# EINVAL, waits in the receiver's outbox backoff.
_fate_known() {
  local tag=$1 to=$2 i r rest k left='' empty=0 pending q
  local -a timedout=()
  while read -r i r rest; do
    [[ $r == ETIMEDOUT ]] && timedout+=("$i")
  done <"$TEST_DIR/$tag.writes"
  [[ ${#timedout[@]} -gt 0 ]] || return 0
  for ((k = 0; k < ${FAULT_FATE_S:-120}; k++)); do
    pending=0
    for i in "${timedout[@]}"; do
      [[ $(_consumed_n "$to" "$tag $i") -ge 1 ]] || pending=1
    done
    [[ $pending -eq 1 ]] || return 0
    q=$(broker_queues) || return 1
    left=$(awk -v q="$(_box "$to")" '$1 == q { print $2 }' <<<"$q")
    if [[ $left == 0 ]]; then
      ((empty++ == 0)) || return 0
    else
      empty=0
    fi
    sleep 1
  done
  echo "after_fault: $tag's ETIMEDOUT writes neither consumed at $to nor gone: $(_box "$to") holds ${left:-?} after ${FAULT_FATE_S:-120} s" >&2
  return 1
}

after_fault() {
  local from=$1 to=$2 tag=$3 k=${4:-3} n i r bad=0
  test -f "$TEST_DIR/$tag.done" || { echo "after_fault: stream $tag is not done" >&2; return 1; }
  _fate_known "$tag" "$to" || return 1
  resend_timedout "$tag" "$to"
  n=$(wc -l <"$TEST_DIR/$tag.writes")
  for ((i = n + 1; i <= n + k; i++)); do
    r=$(_write_one "$from" "$to" "$tag $i") || bad=1
    echo "$i $r" >>"$TEST_DIR/$tag.writes"
    echo "$i $r" >>"$TEST_DIR/$tag.after"
  done
  [[ $bad -eq 0 ]] || { echo "after_fault: $from -> $to still fails after the fault:" >&2; cat "$TEST_DIR/$tag.after" >&2; }
  return $bad
}

# ---------------------------------------------------------------- the reader

# _reader_ack NAME PASS ID...: ack exactly these msgIds, logging each result.
# One write(2) for all of them: dd of a file (bash's printf and echo write
# each line with its own write(2), and each write to ack is one request)
_reader_ack() {
  local name=$1 pass=$2 ack log=$TEST_DIR/$1.acked err e id
  ack=$(_home "$1")/ack
  local ids=$TEST_DIR/.harness/reader.$1.ids
  shift 2
  printf '%s\n' "$@" >"$ids"
  if err=$(dd bs=1M status=none <"$ids" 2>&1 >"$ack"); then
    printf "$pass\t%s\tok\n" "$@" >>"$log"
    return 0
  fi
  e=$(errno_of "$err")
  if [[ $e != ENOENT || $# -eq 1 ]]; then
    printf "$pass\t%s\t$e\n" "$@" >>"$log"
    return 0
  fi
  # one of them is gone (typed, or being typed): nothing was acked; one by one
  for id in "$@"; do
    if err=$({ echo "$id" >"$ack"; } 2>&1); then e=ok; else e=$(errno_of "$err"); fi
    printf '%s\t%s\t%s\n' "$pass" "$id" "$e" >>"$log"
  done
}

_reader_main() {
  local name=$1 pause=$2 mode=${3:-} inbox pass=0 snap ids
  inbox=$(_home "$1")/inbox
  while :; do
    pass=$((pass + 1))
    if snap=$(cat "$inbox" 2>/dev/null) && [[ -n $snap ]]; then
      jq -r --arg p "$pass" '[$p, .msgId, .body] | @tsv' <<<"$snap" >"$TEST_DIR/.harness/reader.$name.pass" &&
        cat "$TEST_DIR/.harness/reader.$name.pass" >>"$TEST_DIR/$name.read" &&
        mapfile -t ids < <(cut -f2 "$TEST_DIR/.harness/reader.$name.pass") &&
        [[ ${#ids[@]} -gt 0 && $mode != show ]] && _reader_ack "$name" "$pass" "${ids[@]}"
    fi
    sleep "$pause"
  done
}

reader_start() {
  local name=$1
  touch "$TEST_DIR/$name.read" "$TEST_DIR/$name.acked"
  _reader_main "$name" "${2:-0.2}" "${3:-}" </dev/null >/dev/null 2>&1 &
  echo $! >"$TEST_DIR/.harness/reader.$name"
  at_exit "kill \$(cat $TEST_DIR/.harness/reader.$name) 2>/dev/null || true"
  return 0
}

reader_stop() {
  kill "$(cat "$TEST_DIR/.harness/reader.$1")" 2>/dev/null
  return 0
}

# ---------------------------------------------------------------- observed consumption

# _observed TAG TO: one line per consumption observed at TO of a message of
# stream TAG: "NUMBER acked MSGID PASS" (the reader's ack of it succeeded),
# "NUMBER typed MSGID -" (the fake herdr was asked to type it), and
# "NUMBER reshown MSGID PASS" (shown twice: the reader read it again after
# its msgId was consumed, or read a second copy of the same message under
# another msgId whose ack failed; a second copy whose ack succeeded is an
# extra "acked"). A body is the whole of "TAG NUMBER": one that starts with
# "TAG " and is anything else (trailing junk, a second line) is NUMBER "?",
# a message no write sent
_observed() {
  local tag=$1 to=$2
  if [[ -s $TEST_DIR/$to.read ]]; then
    awk -F '\t' -v tag="$tag " '
      FILENAME == ARGV[1] { if ($3 == "ok") { if (!($2 in acked)) acked[$2] = $1; oks[$2]++ } next }
      index($3, tag) == 1 {
        num = substr($3, length(tag) + 1)
        if (num !~ /^[0-9]+$/) num = "?"
        if (!($2 in body)) {
          body[$2] = num; pass[$2] = $1
          if (num != "?") { ids[num]++; if ($2 in acked) aids[num]++ }
        }
        if (($2 in acked) && $1 > acked[$2]) print num " reshown " $2 " " $1
      }
      END {
        for (id in oks) if (id in body) for (k = 0; k < oks[id]; k++) print body[id] " acked " id " " acked[id]
        # copies of one message under more msgIds than it has successful
        # acks (at least one copy is the message itself): each is shown twice
        for (id in body) {
          num = body[id]
          if (num != "?" && !(id in acked) && ids[num] - (aids[num] > 1 ? aids[num] : 1) > said[num] + 0) {
            said[num]++
            print num " reshown " id " " pass[id]
          }
        }
      }
    ' "$TEST_DIR/$to.acked" "$TEST_DIR/$to.read"
  fi
  if [[ -n ${HERDR_LOG:-} && -s $HERDR_LOG ]]; then
    jq -r --arg t "$tag " '.text | select(. != null) |
      (capture("msgId (?<id>[0-9a-f]{32})") // {id: "?"}) as $h |
      (if index("\n") then .[(index("\n") + 1):] else "" end) as $b |
      select($b | startswith($t)) | ($b | ltrimstr($t)) as $n |
      (if ($n | test("^[0-9]+$")) then $n else "?" end) + " typed " + $h.id + " -"' "$HERDR_LOG"
  fi
  return 0
}

settled() {
  local tag=$1 to=$2
  [[ -s $TEST_DIR/$tag.writes ]] || return 1
  _observed "$tag" "$to" | awk '
    FILENAME == "-" { if ($2 == "acked" || $2 == "typed") seen[$1] = 1; next }
    $2 == "ok" && !($1 in seen) { missing++ }
    END { exit missing ? 1 : 0 }' - "$TEST_DIR/$tag.writes"
}

# ---------------------------------------------------------------- the broker's counts

# _status_rejected NAME: the `rejected:` count NAME's status shows
_status_rejected() {
  sed -n 's/^rejected: //p' "$(_status_file "$1")" 2>/dev/null
}

# _dlq_sample [K]: take up to K (default 5) dead letters out of fleet.dlq and
# print what they are (type, from, to, msgId, ref/state of a receipt, the
# start of the body), to show what went wrong; called only on a failure
_dlq_sample() {
  local k
  for ((k = 0; k < ${1:-5}; k++)); do
    timeout 10 amqp-get -u "$(broker_uri "${FLEET_VHOST:-/}")" -q fleet.dlq 2>/dev/null |
      jq -c '{type, from, to, msgId, ref, state, body: ((.body // "") | .[0:40])}' 2>/dev/null || break
  done | sed 's/^/  dead letter: /'
}

dead_letters_are() {
  local want=$1 q n name r rc=0
  shift
  q=$(broker_queues) || return 1
  n=$(awk '$1 == "fleet.dlq" { print $2 }' <<<"$q")
  if [[ -z $n ]]; then
    echo "dead_letters_are: fleet.dlq does not exist in vhost ${FLEET_VHOST:-/}" >&2
    return 1
  fi
  echo "fleet.dlq: $n (want $want)"
  [[ $n == "$want" ]] || { rc=1; _dlq_sample; }
  for name in "$@"; do
    r=$(_status_rejected "$name")
    echo "$name rejected: ${r:-?} (want $want); $(grep '^rejected_' "$(_status_file "$name")" | tr '\n' ' ')"
    [[ $r == "$want" ]] || rc=1
  done
  return $rc
}

# _consumed_by_hand TO MARK: read TO's inbox, ack the msgId of the line whose
# body is MARK
_consumed_by_hand() {
  local id home
  home=$(_home "$1")
  id=$(jq -r --arg m "$2" 'select(.body == $m) | .msgId' "$home/inbox" 2>/dev/null | head -n 1)
  [[ -n $id ]] && echo "$id" >"$home/ack"
}

# _reader_consumed TO MARK: TO's reader read a line whose body is MARK and
# its ack of that msgId succeeded
_reader_consumed() {
  awk -F '\t' -v m="$2" 'FILENAME == ARGV[1] { if ($3 == m) id[$2] = 1; next }
    ($2 in id) && $3 == "ok" { f = 1 } END { exit !f }' "$TEST_DIR/$1.read" "$TEST_DIR/$1.acked"
}

# _consumed_n TO MARK: how many times the test saw the message whose body
# is MARK consumed at TO: successful acks by TO's reader of a msgId it read
# with that body, plus texts the fake herdr typed with that body
_consumed_n() {
  local a=0 t=0
  if [[ -s $TEST_DIR/$1.acked && -s $TEST_DIR/$1.read ]]; then
    a=$(awk -F '\t' -v m="$2" 'FILENAME == ARGV[1] { if ($3 == m) id[$2] = 1; next }
      ($2 in id) && $3 == "ok" { n++ } END { print n + 0 }' "$TEST_DIR/$1.read" "$TEST_DIR/$1.acked")
  fi
  if [[ -n ${HERDR_LOG:-} && -s $HERDR_LOG ]]; then
    t=$(jq -r --arg m "$2" '(.text // "") | select(index("\n")) | .[(index("\n") + 1):] | select(. == $m)' "$HERDR_LOG" | wc -l)
  fi
  echo $((a + t))
}

# _alive PID: the process exists and is not a zombie (a reader stopped in
# an earlier test's subshell is reaped by whoever adopted it, maybe late)
_alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

both_sides_work() {
  local from=$1 to=$2 how=${3:-} mark r n want=1
  mark="after the fault $from $to $RANDOM$RANDOM"
  r=$(_write_one "$from" "$to" "$mark") || { echo "both_sides_work: $from -> $to failed: $r" >&2; return 1; }
  if [[ -z $how ]]; then
    how=hand
    [[ -s $TEST_DIR/.harness/reader.$to ]] && _alive "$(cat "$TEST_DIR/.harness/reader.$to")" && how=read
  fi
  case $how in
    read) wait_for 60 "_reader_consumed $to '$mark'" ;;
    typed) wait_for 60 "grep -qF '$mark' '$HERDR_LOG'" ;;
    *) wait_for 60 "_consumed_by_hand $to '$mark'" && want=0 ;;
  esac || { echo "both_sides_work: $to did not consume \"$mark\" ($how)" >&2; return 1; }
  # per message: consumed once (by hand: the test's ack, and nothing else),
  # also after a settle window
  _late_look
  n=$(_consumed_n "$to" "$mark")
  [[ $n == "$want" ]] || { echo "both_sides_work: $to consumed \"$mark\" $((n + 1 - want)) times ($how)" >&2; return 1; }
  echo "after the fault: $from -> $to written and consumed once ($how)"
}

# fault_end TAG A B [HOW]: the end of a fault test without a stream:
# fleet.dlq empty and A's and B's `rejected:` 0 (dead_letters_are), then
# both_sides_work A B HOW and B A; one line of what was found goes to
# $TEST_DIR/TAG.reconciled (the file prints it as its reconciliation line)
fault_end() {
  local tag=$1 a=$2 b=$3 how=${4:-} out=$TEST_DIR/$1.end rc=0 ab ba
  dead_letters_are 0 "$a" "$b" >"$out" 2>&1 || rc=1
  ab=$(both_sides_work "$a" "$b" $how 2>&1) || rc=1
  ba=$(both_sides_work "$b" "$a" 2>&1) || rc=1
  {
    printf 'fleet.dlq %s, rejected %s %s %s %s; %s; %s\n' \
      "$(sed -n 's/^fleet.dlq: \([^ ]*\).*/\1/p' "$out")" \
      "$a" "$(_status_rejected "$a")" "$b" "$(_status_rejected "$b")" \
      "${ab#after the fault: }" "${ba#after the fault: }"
    [[ $rc -eq 0 ]] || { echo "NOT OK:"; sed 's/^/  /' "$out"; }
  } | tee "$TEST_DIR/$tag.reconciled"
  return $rc
}

# ---------------------------------------------------------------- reconcile

# _late_look: the settle window after which reconcile observes once more
# (a duplicate that arrives late still counts); FAULT_LATE_S, default 5 s
_late_look() { sleep "${FAULT_LATE_S:-5}"; }

# _kill_seq TAG TO: what the test saw consumed, in order, for reconcile's
# in-flight rule: "typed N" per prompt log line, "acked N RESULT" per line
# of TO's reader ack log (N is "-" for a message of another stream)
_kill_seq() {
  local tag=$1 to=$2
  if [[ -n ${HERDR_LOG:-} && -s $HERDR_LOG ]]; then
    jq -r --arg t "$tag " '(.text // "") | (if index("\n") then .[(index("\n") + 1):] else "" end) |
      if startswith($t) and (ltrimstr($t) | test("^[0-9]+$")) then "typed " + ltrimstr($t) else "typed -" end' "$HERDR_LOG"
  fi
  if [[ -s $TEST_DIR/$to.acked ]]; then
    awk -F '\t' -v tag="$tag " '
      FILENAME == ARGV[1] { if (index($3, tag) == 1) body[$2] = substr($3, length(tag) + 1); next }
      { print "acked " (($2 in body) ? body[$2] : "-") " " $3 }' "$TEST_DIR/$to.read" "$TEST_DIR/$to.acked"
  fi
  return 0
}

# _torn_copies TAG DL WANT: when fleet.dlq holds more than WANT (DL), its
# messages are taken off it (rawpub --take, so the next round starts from
# an empty fleet.dlq) and listed in $TAG.dlq; prints one line per torn
# copy. A torn copy: LavinMQ 1.0.1 killed -9 while it writes a message
# into its memory-mapped segment keeps the start of it, zeros to its end,
# and serves it after its restart (its recovery checks only the first
# field); the receiver refuses it (malformed, bad-receipt) to fleet.dlq.
# The test sees one in fleet.dlq as a body of bytes then NULs to its end,
# or as an empty one without a message id (cut off after its first field),
# which no fleetfs publishes (envelopes are JSON text, always with their
# msgId as message id). Fails only when
# the messages cannot be taken.
_torn_copies() {
  local tag=$1 dl=$2 want=$3 bin out
  : >"$TEST_DIR/$tag.dlq"
  [[ $dl =~ ^[0-9]+$ && $dl -gt $want ]] || return 0
  bin=$FLEET_ROOT/${FLEETFS_BUILD:-build}/tools/rawpub
  [[ ${FLEETFS_BUILD:-} == /* ]] && bin=$FLEETFS_BUILD/tools/rawpub
  out=$("$bin" "$(broker_uri "${FLEET_VHOST:-/}")" fleet.dlq --take) || {
    echo "NOT OK: fleet.dlq's messages could not be taken to look at them (rawpub --take)" >&2
    return 1
  }
  printf '%s\n' "$out" | grep . >"$TEST_DIR/$tag.dlq"
  awk -F '\t' '$4 == "torn"' "$TEST_DIR/$tag.dlq"
}

reconcile() {
  local tag=$1 to=$2 min_ok='' unc=0 dlq=0 rej='' faults=1 w=$TEST_DIR/$1.writes q left dl r rt rf rc hist from k
  local torn torn_all
  shift 2
  while [[ $# -gt 0 ]]; do
    case $1 in
      --min-ok) min_ok=$2 ;;
      --uncertain) unc=$2 ;;
      --dlq) dlq=$2 ;;
      --rejected) rej=$2 ;;
      --faults) faults=$2 ;;
      *) echo "reconcile: unknown option $1" >&2; return 2 ;;
    esac
    shift 2
  done
  [[ -n $rej ]] || rej=$dlq
  [[ -s $w ]] || { echo "reconcile: no writes recorded for $tag" >&2; return 1; }
  # what fleetfs itself calls uncertain (crash mid-typing): the only claim of
  # the product used here, and only to explain a message nobody saw that
  # the test's own observers show in flight at a kill (receiver_killed),
  # bounded by --uncertain
  hist=$(_home "$to")/history
  jq -r --arg t "$tag " 'select(.consumed == "uncertain" and (.body | startswith($t))) | .body | ltrimstr($t)' \
    "$hist" 2>/dev/null >"$TEST_DIR/$tag.uncertain"
  _kill_seq "$tag" "$to" >"$TEST_DIR/$tag.seq"
  [[ -f $TEST_DIR/$tag.kills ]] || : >"$TEST_DIR/$tag.kills"
  # and what the reader itself saw end unknown: a message it read whose ack
  # write failed because the mount died under it (kill -9: ECONNABORTED for
  # a request in flight, ENOTCONN after). fleetfs may have consumed it just
  # before dying (then the redelivery is acked unseen: shown once, as it
  # should be), or not (then it comes back and is observed again). Counted
  # only for a message nobody observed afterwards. One ack write carries
  # every msgId the reader read in that pass, so such a write is one
  # uncertain event however many messages it carried: "NUMBER PASS" lines,
  # and --uncertain bounds the events (crashes mid-typing + ack writes cut).
  : >"$TEST_DIR/$tag.ackcut"
  if [[ -s $TEST_DIR/$to.acked && -s $TEST_DIR/$to.read ]]; then
    awk -F '\t' -v tag="$tag " '
      FILENAME == ARGV[1] { if ($3 == "ECONNABORTED" || $3 == "ENOTCONN") aborted[$2] = $1; next }
      ($2 in aborted) && index($3, tag) == 1 { print substr($3, length(tag) + 1) " " aborted[$2] }
    ' "$TEST_DIR/$to.acked" "$TEST_DIR/$to.read" | sort -u >"$TEST_DIR/$tag.ackcut"
  fi
  # the mailbox must end empty; a redelivery the receiver is acking
  # silently right now (its ack was lost with a node) may take a moment
  # (FAULT_SETTLE_S, default 30 s)
  for ((k = 0; ; k++)); do
    q=$(broker_queues) || {
      echo "NOT OK: the broker's queue counts could not be read (rabbitmqctl list_queues failed)" | tee "$TEST_DIR/$tag.reconciled"
      return 1
    }
    left=$(awk -v q="$(_box "$to")" '$1 == q { print $2 }' <<<"$q")
    [[ $left != 0 && $k -lt ${FAULT_SETTLE_S:-30} ]] || break
    sleep 1
  done
  # observed once the mailbox is empty, then again after a settle window:
  # a duplicate that comes late still counts
  _observed "$tag" "$to" >"$TEST_DIR/$tag.observed1"
  _late_look
  _observed "$tag" "$to" >"$TEST_DIR/$tag.observed"
  dl=$(awk '$1 == "fleet.dlq" { print $2 }' <<<"$q")
  _torn_copies "$tag" "$dl" "$dlq" >"$TEST_DIR/$tag.torn" || return 1
  torn=$(grep -c . "$TEST_DIR/$tag.torn")
  echo $(($(cat "$TEST_DIR/.harness/torn" 2>/dev/null || echo 0) + torn)) >"$TEST_DIR/.harness/torn"
  torn_all=$(cat "$TEST_DIR/.harness/torn")
  from=$(cat "$TEST_DIR/$tag.from" 2>/dev/null)
  # the dead letters' way home (doc/protocol.md section 4): after the
  # settle window the sender's host has taken every dead letter of its own
  # out of lead.<host>.dead (a missing queue or a failed query fails), and
  # no entry of its sent says dead-lettered beyond what fleet.dlq (the
  # broker's own record of every dead letter) holds
  home=$(broker_queues 2>/dev/null | awk -v q="lead.${from#*@}.dead" '$1 == q { print $2 }')
  dlsent=$(jq -r 'select(.state == "dead-lettered") | .msgId' "$(_home "$from")/sent" 2>/dev/null | wc -l)
  rt=$(_status_rejected "$to") rf=$(_status_rejected "$from")
  if [[ $rt =~ ^[0-9]+$ && $rf =~ ^[0-9]+$ ]]; then r=$((rt + rf)); else r="missing ($to: ${rt:-?}, $from: ${rf:-?})"; fi
  [[ -s $TEST_DIR/$tag.after ]] || echo "0 none" >"$TEST_DIR/$tag.after"
  [[ -f $TEST_DIR/$tag.resent ]] || : >"$TEST_DIR/$tag.resent"
  awk -v min_ok="$min_ok" -v unc_max="$unc" -v left="${left:-missing}" -v dl="${dl:-missing}" -v faults="$faults" \
    -v dlq_want="$dlq" -v rej="${r:-missing}" -v rej_want="$rej" -v to="$to" -v from="$from" -v box="$(_box "$to")" \
    -v home="${home:-missing}" -v dlsent="$dlsent" -v torn="$torn" -v torn_all="$torn_all" '
    FILENAME ~ /\.observed1$/ { if ($2 != "reshown") first[$1]++; next }
    FILENAME ~ /\.observed$/ {
      if ($2 == "reshown") { reshown++; next }
      n[$1]++; if ($2 == "acked") acked++; else typed++
      next
    }
    FILENAME ~ /\.uncertain$/ { uncertain[$1] = 1; next }
    FILENAME ~ /\.ackcut$/ { cut[$1] = $2; next }
    FILENAME ~ /\.after$/ { if ($2 != "none") { after[$1] = 1; nafter++; if ($2 != "ok") after_bad++ } next }
    FILENAME ~ /\.resent$/ { resent[$1] = $2; next }
    FILENAME ~ /\.seq$/ { seq[++nseq] = $0; next }
    FILENAME ~ /\.kills$/ { kp[++nkill] = $1; ka[nkill] = $2; kw[nkill] = $3; next }
    { res[$1] = $2; writes++ }
    END {
      # in flight at a kill: the oldest message written by then (ETIMEDOUT
      # or ok) that the test had not yet seen consumed (typed, acked, or
      # its ack cut) in the prompt log and ack log lines of that moment
      for (k = 1; k <= nkill; k++) {
        split("", seen)
        pi = 0; ai = 0
        for (j = 1; j <= nseq; j++) {
          split(seq[j], f, " ")
          if (f[1] == "typed") { if (++pi <= kp[k]) seen[f[2]] = 1 }
          else if (++ai <= ka[k] && f[3] ~ /^(ok|ECONNABORTED|ENOTCONN)$/) seen[f[2]] = 1
        }
        best = ""
        for (i in res)
          if ((res[i] == "ok" || res[i] == "ETIMEDOUT") && !(i in seen) && !(i in after) && (kw[k] == "" || i + 0 <= kw[k] + 0) && (best == "" || i + 0 < best + 0)) best = i
        if (best != "") inflight[best] = 1
      }
      for (i in res) {
        if (i in after) {
          if (res[i] == "ok") after_n++
          if (!(i in n)) after_lost++
          continue
        }
        if (res[i] == "ok" || res[i] == "ETIMEDOUT") {
          if (res[i] == "ok") ok++; else { failed++; by[res[i]]++; timedout++; if (resent[i] == "ok") resend_ok++ }
          if (res[i] == "ETIMEDOUT" && (i in n)) late++
          if (!(i in n)) {
            if ((i in uncertain) && (i in inflight)) { unc++; events++ }
            else if (i in cut) { unc++; if (!(cut[i] in cutw)) { cutw[cut[i]] = 1; events++ } }
            else {
              if (i in uncertain) excuse++
              lost++; if (length(lost_s) < 60) lost_s = lost_s " " i (res[i] == "ok" ? "" : "(ETIMEDOUT)")
            }
          }
        } else {
          failed++; by[res[i]]++
          if (res[i] !~ /^(ECOMM|ENOSPC|ENXIO|ENOBUFS)$/) bad++
          if (res[i] ~ /^(ECOMM|ENOSPC|ENXIO|ENOBUFS)$/ && (i in n)) lied[res[i]]++
        }
      }
      for (i in n) {
        delivered++
        if (n[i] > 1) { dup += n[i] - 1; if (n[i] > first[i] + 0 && first[i] + 0 >= 1) late_dup += n[i] - first[i] }
        if (!(i in res)) stray += n[i]
      }
      s = ""
      for (e in by) s = s (s == "" ? "" : ", ") e " " by[e]
      printf "sent-ok %d, failed %d (%s), delivered %d (acked %d, typed %d), duplicates %d, lost %d, uncertain %d, arrived after ETIMEDOUT %d, resent after ETIMEDOUT %d, left in mailbox %s, dead letters %s; after the fault %d ok; dead letters home: %s waiting, %d sent dead-lettered\n",
        ok, failed, (s == "" ? "none" : s), delivered, acked, typed, dup + reshown, lost, unc, late, resend_ok, left, dl, after_n, home, dlsent
      fail = 0
      if (min_ok == "") min_ok = int((writes - nafter) / 2)
      if (ok < min_ok) { printf "NOT OK: only %d successful writes of the stream'"'"'s %d (at least %d wanted; after_fault'"'"'s %d are judged apart)\n", ok, writes - nafter, min_ok, after_n; fail = 1 }
      if (lost) { printf "NOT OK: %d successful write(s) never consumed:%s%s\n", lost, lost_s, (lost > 10 ? " ..." : ""); fail = 1 }
      if (excuse) { printf "NOT OK: %d of them uncertain by the receiver'"'"'s history, but not the message in flight at a kill by the test'"'"'s own logs\n", excuse; fail = 1 }
      if (dup) { printf "NOT OK: %d extra consumption(s) of messages consumed already%s\n", dup, (late_dup ? sprintf(" (%d seen only in the look after the settle window)", late_dup) : ""); fail = 1 }
      if (reshown) { printf "NOT OK: %d message(s) shown in the inbox again after they were consumed, or shown as a second copy\n", reshown; fail = 1 }
      if (events > unc_max) { printf "NOT OK: %d uncertain, at most %d explained by the fault (one is a message whose typing a crash cut, or one ack write cut off by a kill, however many msgIds it carried; %d message(s))\n", events, unc_max, unc; fail = 1 }
      if (timedout > faults) { printf "NOT OK: %d write(s) failed ETIMEDOUT, more than the %d fault(s) explain (one write in flight each)\n", timedout, faults; fail = 1 }
      if (bad) { printf "NOT OK: %d failed write(s) with an errno SPEC section 5 does not name\n", bad; fail = 1 }
      for (e in lied) { printf "NOT OK: %d write(s) failed with %s (refused: nothing published) but arrived\n", lied[e], e; fail = 1 }
      if (stray) { printf "NOT OK: %d consumed message(s) that no write sent\n", stray; fail = 1 }
      if (after_bad || after_lost) { printf "NOT OK: after the fault %d write(s) failed and %d were not consumed\n", after_bad, after_lost; fail = 1 }
      if (left != "0") { printf "NOT OK: %s in the broker holds %s (want 0)\n", box, left; fail = 1 }
      if (torn) {
        printf "torn copies %d: in fleet.dlq, bodies of bytes then NULs to the end, or empty without a message id (a broker killed while writing them; no fleetfs publishes that), each rejected by its receiver\n", torn
        if (torn > 2 * faults) { printf "NOT OK: %d torn copies, more than the %d fault(s) explain (one message being written in each of two queues)\n", torn, faults; fail = 1 }
      }
      if ((torn ? dl - torn : dl) != dlq_want) { printf "NOT OK: fleet.dlq holds %s (want %d%s)\n", dl, dlq_want, torn ? sprintf(", and %d torn", torn) : ""; fail = 1 }
      hq = "lead." (index(from, "@") ? substr(from, index(from, "@") + 1) : from) ".dead"
      if (home != "0") { printf "NOT OK: %s in the broker holds %s (want 0: the sender takes its own dead letters home)\n", hq, home; fail = 1 }
      if (dl ~ /^[0-9]+$/ && dlsent + 0 > dl + 0) { printf "NOT OK: %d of %s'"'"'s sent entries say dead-lettered, but fleet.dlq holds %s\n", dlsent, from, dl; fail = 1 }
      if (rej != rej_want + torn_all) { printf "NOT OK: %s and %s status say rejected: %s in all (want %d%s)\n", to, from, rej, rej_want + torn_all, torn_all ? sprintf(", %d of them torn copies", torn_all) : ""; fail = 1 }
      exit fail
    }' "$TEST_DIR/$tag.observed1" "$TEST_DIR/$tag.observed" "$TEST_DIR/$tag.uncertain" "$TEST_DIR/$tag.ackcut" "$TEST_DIR/$tag.after" \
    "$TEST_DIR/$tag.resent" "$TEST_DIR/$tag.seq" "$TEST_DIR/$tag.kills" "$w" | tee "$TEST_DIR/$tag.reconciled"
  rc=${PIPESTATUS[0]}
  if [[ ${dl:-x} != "$dlq" || $r != "$rej" ]]; then
    grep -H '^rejected' "$(_status_file "$to")" "$(_status_file "$from")" 2>/dev/null | sed "s|^$TEST_DIR/||; s/^/  /"
    sed 's/^/  dead letter taken (messageId, bytes, first NUL, shape): /' "$TEST_DIR/$tag.dlq" 2>/dev/null
    _dlq_sample
  fi | tee -a "$TEST_DIR/$tag.reconciled"
  return "$rc"
}

# ---------------------------------------------------------------- fates at the edges
#
# Issue 43: what each sender's `sent` says about a message must match what
# an observer saw become of it at the receiver.
#
#   ask_timed TAG FROM TO TIMEOUT TEXT  `fleetfs ask` from lead FROM's mount to TO with
#                                   --timeout TIMEOUT; appends "MSGID EXIT MS" to TAG.asks
#                                   (MSGID: FROM's newest sent entry after it, an address
#                                   only; EXIT: the tool's status; MS: how long it took, by
#                                   the test's clock)
#   fates TAG FROM TO [--killed]    every entry of FROM's sent addressed to TO, judged by
#                                   what the test's observers saw of its msgId at TO: acked
#                                   (TO's reader's ack of it succeeded), typed (the fake
#                                   herdr was asked to type it), shown (the reader read its
#                                   line, no ack of it succeeded) or unseen. Allowed: acked
#                                   -> acked; typed -> injected, confirmed or uncertain
#                                   (never expired, dead-lettered, rejected); shown ->
#                                   expired with "shown, then expired" in its detail (never
#                                   "dropped unread", never dead-lettered); unseen ->
#                                   expired (not "shown"), dead-lettered or rejected, and
#                                   uncertain only with --killed (the receiver was killed:
#                                   its journal may say it was being typed while the prompt
#                                   log has nothing). A state short of a fate (unconfirmed,
#                                   published, published-unread) is a disagreement too: call
#                                   it once the fates are known. Each line of TAG.asks whose
#                                   entry FROM's sent says dead-lettered or rejected, unseen
#                                   at TO, must have ended with exit 5 (refused) within
#                                   FATE_ASK_MS (default 10000) ms, not waited out (exit 4).
#                                   And the broker's count: fleet.dlq must hold at least as
#                                   many dead letters as entries say dead-lettered (a
#                                   missing fleet.dlq or a failed query fails).
#                                   Prints one line (also in TAG.fates):
#                                     fates FROM -> TO: N sent; acked N, typed N (injected
#                                     N, confirmed N, uncertain N), shown-then-expired N,
#                                     unseen N (expired N, dead-lettered N, rejected N,
#                                     uncertain N); asks N (refused at once N); disagreements N
#                                   then "NOT OK: ..." per disagreement, and fails on any.
ask_timed() {
  local tag=$1 from=$2 t0 rc id
  t0=$(date +%s%N)
  "$FLEETFS" ask "$TEST_DIR/$from" --timeout "$4" "$3" "$5" >/dev/null 2>>"$TEST_DIR/$tag.asks.err"
  rc=$?
  id=$(tail -n 1 "$(_home "$from")/sent" 2>/dev/null | jq -r '.msgId // "-"' 2>/dev/null)
  echo "${id:--} $rc $((($(date +%s%N) - t0) / 1000000))" >>"$TEST_DIR/$tag.asks"
}

# _fate_obs TO: "MSGID acked|typed|shown" per observation at TO
_fate_obs() {
  [[ -s $TEST_DIR/$1.acked ]] && awk -F '\t' '$3 == "ok" { print $2 " acked" }' "$TEST_DIR/$1.acked"
  [[ -s $TEST_DIR/$1.read ]] && awk -F '\t' '{ print $2 " shown" }' "$TEST_DIR/$1.read"
  if [[ -n ${HERDR_LOG:-} && -s $HERDR_LOG ]]; then
    jq -r '(.text // "") | capture("msgId (?<id>[0-9a-f]{32})")? | .id + " typed"' "$HERDR_LOG"
  fi
  return 0
}

fates() {
  local tag=$1 from=$2 to=$3 killed=0 sent rc=0 out=$TEST_DIR/$1.fates q dlq
  [[ ${4:-} == --killed ]] && killed=1
  sent=$(_home "$from")/sent
  [[ -f $sent ]] || { echo "NOT OK: fates: $from has no sent file" | tee "$out"; return 1; }
  jq -r --arg to "$to" 'select(.to == $to) | [.msgId, .state, (.detail // "" | gsub("\t"; " "))] | @tsv' "$sent" \
    >"$TEST_DIR/.harness/fates.$tag.sent"
  _fate_obs "$to" >"$TEST_DIR/.harness/fates.$tag.obs"
  touch "$TEST_DIR/$tag.asks"
  # the broker's own count: a dead-lettered entry needs a dead letter in fleet.dlq
  q=$(broker_queues) || { echo "NOT OK: fates: the broker's queue counts could not be read" | tee "$out"; return 1; }
  dlq=$(awk '$1 == "fleet.dlq" { print $2 }' <<<"$q")
  awk -F '\t' -v from="$from" -v to="$to" -v killed=$killed -v askms="${FATE_ASK_MS:-10000}" -v dlq="${dlq:--1}" '
    FILENAME == ARGV[1] { split($0, o, " "); seen[o[1], o[2]] = 1; next }
    FILENAME == ARGV[2] { split($0, a, " "); ask[a[1]] = a[2] " " a[3]; next }
    {
      id = $1; st = $2; det = $3; n++
      obs = (id SUBSEP "acked") in seen ? "acked" : (id SUBSEP "typed") in seen ? "typed" : \
            (id SUBSEP "shown") in seen ? "shown" : "unseen"
      bad = ""
      if (obs == "acked") { acked++; if (st != "acked") bad = "its ack by " to "'"'"'s reader succeeded" }
      else if (obs == "typed") {
        typed++; t[st]++
        if (st != "injected" && st != "confirmed" && st != "uncertain") bad = "the fake herdr typed it"
      } else if (obs == "shown") {
        if (st == "expired" && index(det, "shown, then expired") == 1) shown++
        else bad = to "'"'"'s reader read it, nobody acked it (want expired, \"shown, then expired\")"
      } else {
        unseen++; u[st]++
        if (!(st == "expired" && index(det, "shown") != 1) && st != "dead-lettered" && st != "rejected" && \
            !(st == "uncertain" && killed))
          bad = "no observer saw it consumed or shown"
      }
      if (bad != "") { dis++; print "NOT OK: " id ": " from "'"'"'s sent says " st " (" substr(det, 1, 80) "), but " bad }
      if (id in ask) {
        asks++; split(ask[id], r, " ")
        if ((st == "dead-lettered" || st == "rejected") && obs == "unseen") {
          if (r[1] == 5 && r[2] <= askms) refused++
          else { dis++; print "NOT OK: ask " id ": refused (" st ") but the ask ended with exit " r[1] " after " r[2] " ms (want exit 5 within " askms " ms)" }
        }
      }
    }
    END {
      if (u["dead-lettered"] > dlq) {
        dis++
        print "NOT OK: " u["dead-lettered"] " of " from "'"'"'s sent entries to " to " say dead-lettered, but fleet.dlq holds " (dlq < 0 ? "nothing (missing)" : dlq)
      }
      printf "fates %s -> %s: %d sent; acked %d, typed %d (injected %d, confirmed %d, uncertain %d), shown-then-expired %d, unseen %d (expired %d, dead-lettered %d, rejected %d, uncertain %d); asks %d (refused at once %d); disagreements %d\n", \
        from, to, n, acked, typed, t["injected"], t["confirmed"], t["uncertain"], shown, unseen, \
        u["expired"], u["dead-lettered"], u["rejected"], u["uncertain"], asks, refused, dis
      exit dis ? 1 : 0
    }' "$TEST_DIR/.harness/fates.$tag.obs" "$TEST_DIR/$tag.asks" "$TEST_DIR/.harness/fates.$tag.sent" >"$out.tmp" || rc=1
  # the summary first, then the disagreements
  { grep '^fates ' "$out.tmp"; grep -v '^fates ' "$out.tmp"; } | tee "$out"
  rm -f "$out.tmp"
  return $rc
}
