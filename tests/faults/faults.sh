# shellcheck shell=bash
# tests/faults/faults.sh — streams of messages and their exact
# reconciliation, for the fault tests; source after lib.sh and fleet.sh.
#
#   stream_start FROM TO N TAG      in the background, write N messages "TAG I" (I = 1..N)
#                                   to FROM/peers/TO/send, one write(2) each, recording
#                                   "I ok" or "I ERRNO" per write in $TEST_DIR/TAG.writes
#                                   (after a failed write it waits 0.1 s, as a script would;
#                                   STREAM_PACE=S: S seconds before every write)
#   stream_wait TAG [TIMEOUT]       wait for that sender to finish
#   stream_progress TAG             how many writes it has done so far
#   drain_start NAME                in the background, ack everything NAME holds, every 0.2 s
#                                   (errors ignored: the broker may be away)
#   drain_stop NAME
#   drained NAME                    true when NAME's inbox is empty and its mailbox holds
#                                   nothing (status: messages 0, held 0)
#   reconcile TAG FILE...           compare the writes with the consumed messages (JSON Lines
#                                   FILEs, e.g. a history and an inbox: one line per
#                                   consumption); prints
#                                     sent-ok N, failed N (by errno), delivered N, duplicates N, lost N
#                                   and succeeds only with 0 lost, 0 duplicates, every
#                                   successful write delivered once, every failed write
#                                   answered with a send errno of SPEC section 5, and nothing
#                                   whose write said "nothing published" (ECOMM) delivered
#   scaled N                        N * FAULT_SCALE
#   stream_size N                   N * FAULT_SCALE, at most 1000 (what history can hold)
FAULT_SCALE=${FAULT_SCALE:-1}

scaled() { echo $(($1 * FAULT_SCALE)); }

# stream_size N: N * FAULT_SCALE, at most 1000 — the receiver's history
# keeps the newest 1000 and reconcile counts from it (a longer soak runs
# more rounds or more faults, not longer streams)
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
    *"Input/output error"*) echo EIO ;;
    *) echo "OTHER:$(tr -s ' \n' '__' <<<"$1")" ;;
  esac
}

_stream_main() {
  local from=$1 to=$2 n=$3 tag=$4 i err
  for ((i = 1; i <= n; i++)); do
    [[ -z ${STREAM_PACE:-} ]] || sleep "$STREAM_PACE"
    if err=$({ echo "$tag $i" >"$TEST_DIR/$from/peers/$to/send"; } 2>&1); then
      echo "$i ok"
    else
      echo "$i $(errno_of "$err")"
      sleep 0.1 # a script backs off a little after an error
    fi
  done >"$TEST_DIR/$tag.writes"
  echo done >"$TEST_DIR/$tag.done"
}

stream_start() {
  local tag=$4
  rm -f "$TEST_DIR/$tag.done" "$TEST_DIR/$tag.writes"
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

drain_start() {
  local name=$1
  (
    while :; do
      echo all >"$TEST_DIR/$name/leads/$name/ack" 2>/dev/null
      sleep 0.2
    done
  ) </dev/null >/dev/null 2>&1 &
  echo $! >"$TEST_DIR/.harness/drain.$name"
  at_exit "kill \$(cat $TEST_DIR/.harness/drain.$name) 2>/dev/null || true"
  return 0
}

drain_stop() {
  kill "$(cat "$TEST_DIR/.harness/drain.$1")" 2>/dev/null
  return 0
}

drained() {
  local d=$TEST_DIR/$1/leads/$1
  echo all >"$d/ack" 2>/dev/null
  test ! -s "$d/inbox" && grep -q "^messages: 0$" "$d/status" && grep -q "^held: 0$" "$d/status"
}

# reconcile TAG FILE...: see the top of this file
reconcile() {
  local tag=$1 w=$TEST_DIR/$1.writes
  shift
  [[ -s $w ]] || { echo "reconcile: no writes recorded for $tag" >&2; return 1; }
  # consumed bodies of this stream, one line per consumption
  cat "$@" 2>/dev/null | jq -r --arg t "$tag " 'select(.body | startswith($t)) | .body' |
    sed "s/^$tag //" | sort -n >"$TEST_DIR/$tag.consumed"
  awk -v tag="$tag" '
    FNR == NR { n[$1]++; next }                    # consumed numbers
    { res[$1] = $2 }                               # the writes
    END {
      for (i in res) {
        if (res[i] == "ok") { ok++; if (!(i in n)) lost++ }
        else {
          failed++; by[res[i]]++
          if (res[i] !~ /^(ETIMEDOUT|ECOMM|ENOSPC|ENXIO)$/) bad++
          if (res[i] == "ECOMM" && (i in n)) phantom++
        }
      }
      for (i in n) { delivered++; if (n[i] > 1) dup += n[i] - 1; if (!(i in res)) stray++ }
      s = ""
      for (e in by) s = s (s == "" ? "" : ", ") e " " by[e]
      printf "sent-ok %d, failed %d (%s), delivered %d, duplicates %d, lost %d\n",
        ok, failed, (s == "" ? "none" : s), delivered, dup, lost
      if (bad) printf "NOT OK: %d failed write(s) with an errno SPEC section 5 does not name\n", bad
      if (phantom) printf "NOT OK: %d write(s) failed with ECOMM (nothing published) but arrived\n", phantom
      if (stray) printf "NOT OK: %d consumed message(s) that no write sent\n", stray
      exit (lost || dup || bad || phantom || stray) ? 1 : 0
    }' "$TEST_DIR/$tag.consumed" "$w" | tee "$TEST_DIR/$tag.reconciled"
  return "${PIPESTATUS[0]}"
}
