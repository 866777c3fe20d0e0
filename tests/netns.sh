# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/netns.sh — hosts as network namespaces; source after lib.sh and
# fleet.sh. Each host (lead) gets its own network namespace joined to a
# bridge in the root namespace by a veth pair; the test's private broker
# listens on the bridge's address too (scripts/broker start --bind), so the
# only way from a host to the broker is that link, which a test can cut
# silently. Everything here is created by the test and removed when the
# file ends — on success, failure or Ctrl-C (lib.sh's exit trap runs the
# at_exit list): namespaces, veths, the bridge, its address. Nothing
# outside is touched (no forwarding, no NAT, no firewall rules).
#
#   netns_setup                 the bridge ff<tag>br with 10.X.Y.1/24 (a /24 no route on this
#                               machine uses) and a private broker bound to it as well
#   netns_host NAME             namespace ff<tag>-NAME, veth pair to the bridge, address
#                               10.X.Y.N; its own key and trust directory (all hosts' public
#                               keys, as if distributed by hand)
#   host_mount NAME [OPT...]    mount_fleet NAME from inside its namespace (nsenter --net: the
#                               mount is visible here), state in $TEST_DIR/state/NAME, its own
#                               key and trust dir, the broker by its bridge address
#   host_exec NAME CMD...       run CMD in NAME's network namespace
#   link_cut NAME               drop every packet between NAME and the bridge, both ways, with
#                               no FIN or RST (the bridge end of its veth goes down)
#   link_restore NAME           undo link_cut
#   netns_teardown              remove everything (also registered with at_exit)
#
# Needs root, iproute2 (ip) and nsenter: netns_require skips the file when
# not root, and fails it when root lacks the rest (CI runs as root).

NETNS_TAG=${NETNS_TAG:-$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')}
NETNS_LIST=$TEST_DIR/.harness/netns.created

netns_require() {
  [[ $(id -u) -eq 0 ]] || test_skip_all "network namespaces need root"
  # as root (CI) everything below must work: a failure, never a skip
  command -v ip >/dev/null && command -v nsenter >/dev/null ||
    test_fail_all "iproute2 (ip) and nsenter are needed (scripts/install-deps)"
  ip netns add "ff${NETNS_TAG}-probe" 2>/dev/null || test_fail_all "cannot create a network namespace as root"
  ip netns del "ff${NETNS_TAG}-probe"
}

# a 10.X.Y.0/24 that no address or route on this machine touches
_netns_pick_subnet() {
  local i x y
  for ((i = 0; i < 50; i++)); do
    x=$((200 + RANDOM % 50)) y=$((RANDOM % 250))
    if ! ip -4 route show table all | grep -q "^\(local \|broadcast \)\{0,1\}10\.$x\." &&
       ! ip -4 addr show | grep -q "inet 10\.$x\."; then
      echo "10.$x.$y"
      return 0
    fi
  done
  return 1
}

netns_setup() {
  local net br=ff${NETNS_TAG}br
  net=$(_netns_pick_subnet) || { echo "netns_setup: no free 10.x.y.0/24" >&2; return 1; }
  echo "$net" >"$TEST_DIR/.harness/netns.subnet"
  : >"$NETNS_LIST"
  at_exit netns_teardown
  ip link add "$br" type bridge || return 1
  echo "link $br" >>"$NETNS_LIST"
  ip addr add "$net.1/24" dev "$br" && ip link set "$br" up || return 1
  broker_start_own --bind "$net.1"
}

_netns_subnet() { cat "$TEST_DIR/.harness/netns.subnet"; }
netns_name() { echo "ff${NETNS_TAG}-$1"; }
_netns_veth() { echo "ff${NETNS_TAG}v$(<"$TEST_DIR/.harness/netns.idx.$1")"; }

netns_host() {
  local name=$1 ns idx veth net
  ns=$(netns_name "$name")
  net=$(_netns_subnet) || return 1
  idx=$(( $(grep -c '^ns ' "$NETNS_LIST") + 2 ))
  echo "$idx" >"$TEST_DIR/.harness/netns.idx.$name"
  veth=ff${NETNS_TAG}v$idx
  ip netns add "$ns" || return 1
  echo "ns $ns" >>"$NETNS_LIST"
  ip link add "$veth" type veth peer name "${veth}p" || return 1
  echo "link $veth" >>"$NETNS_LIST"
  ip link set "$veth" master "ff${NETNS_TAG}br" && ip link set "$veth" up &&
    ip link set "${veth}p" netns "$ns" &&
    ip -n "$ns" link set "${veth}p" name eth0 &&
    ip -n "$ns" addr add "$net.$idx/24" dev eth0 &&
    ip -n "$ns" link set eth0 up &&
    ip -n "$ns" link set lo up || return 1
  echo "$net.$idx" >"$TEST_DIR/.harness/netns.addr.$name"
  # its own key; its public half goes to every host's trust dir (and
  # every earlier host's key to its own)
  mkdir -p "$TEST_DIR/hosts/$name/trust" &&
    "$FLEETFS" keygen "$TEST_DIR/hosts/$name/key" >/dev/null || return 1
  local h
  for h in "$TEST_DIR"/hosts/*/; do
    h=$(basename "$h")
    cp "$TEST_DIR/hosts/$name/key.pub" "$TEST_DIR/hosts/$h/trust/$name.pub" &&
      cp "$TEST_DIR/hosts/$h/key.pub" "$TEST_DIR/hosts/$name/trust/$h.pub" || return 1
  done
}

host_addr() { cat "$TEST_DIR/.harness/netns.addr.$1"; }

host_exec() {
  local name=$1
  shift
  nsenter --net="/run/netns/$(netns_name "$name")" "$@"
}

# the broker URI as seen from the hosts: the bridge address
host_broker_uri() {
  local vh=${1:-${FLEET_VHOST:-/}} enc
  enc=$(broker_uri "$vh") || return 1
  echo "amqp://guest:guest@$(_netns_subnet).1:$BROKER_PORT/${enc##*/}"
}

host_mount() {
  local name=$1
  shift
  echo "nsenter --net=/run/netns/$(netns_name "$name")" >"$TEST_DIR/.harness/exec.$name"
  FLEET_BROKER_URI=$(host_broker_uri) mount_fleet "$name" \
    "key=$TEST_DIR/hosts/$name/key" "trusted_keys=$TEST_DIR/hosts/$name/trust" "$@"
}

# The bridge side of NAME's veth goes down: everything NAME sends is
# dropped (its own end keeps its address and route, only the carrier goes:
# no error to the sender, no FIN, no RST), and nothing reaches it. (tc
# netem would do too, but not every kernel here has sch_netem.)
link_cut() {
  ip link set "$(_netns_veth "$1")" down
}

link_restore() {
  ip link set "$(_netns_veth "$1")" up
}

netns_teardown() {
  [[ -f $NETNS_LIST ]] || return 0
  local kind what rc=0
  # namespaces first (their veth ends go with them), then links, newest first
  while read -r kind what; do
    case $kind in
      ns) ip netns del "$what" 2>/dev/null || rc=1 ;;
    esac
  done < <(tac "$NETNS_LIST")
  while read -r kind what; do
    case $kind in
      # (a veth goes away by itself, a moment after its namespace)
      link) ip link del "$what" 2>/dev/null || ! ip link show "$what" >/dev/null 2>&1 || rc=1 ;;
    esac
  done < <(tac "$NETNS_LIST")
  rm -f "$NETNS_LIST"
  return $rc
}
