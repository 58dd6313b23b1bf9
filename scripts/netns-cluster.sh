#!/usr/bin/env bash
# A cluster of N "nodes" on one machine, made of Linux network namespaces.
#
#   netns-cluster.sh up N [--rate R] [--delay D] [--hub-rate R] [--prefix P]
#   netns-cluster.sh down [--prefix P]
#   netns-cluster.sh check [--prefix P]
#   netns-cluster.sh info [--prefix P]      (what exists, the qdiscs in place)
#
# Layout (P = prefix, default "braidnode"):
#
#   namespace P0 .. P<N-1>   one per node: lo up, veth0 = 10.77.0.(i+1)/24
#   namespace P-hub          a bridge br0 joining the hub ends n0 .. n<N-1> of the veths;
#                            br0 = 10.77.0.254/24, where a braid-switch (the software
#                            aggregation switch of in-network reductions) can listen
#
# The bridge lives in its own namespace rather than in the root one, so nothing is added
# to the machine's own network (no bridge netfilter, no interface name clashes) and
# concurrent clusters with different prefixes cannot collide even though they all use
# 10.77.0.0/24. Deleting the namespaces removes every veth and the bridge with them.
#
# Shaping (--rate, --delay, e.g. --rate 1gbit --delay 200us, tc units) goes on the
# egress of each node's veth0: every node sends at most R and every packet it sends is
# held D. Traffic inside a node (shared memory, loopback) is not shaped. --hub-rate R
# also limits the hub's end of each link (n<i> egress: what a node receives, as a real
# switch port would); a process in the hub namespace (braid-switch) is then held to R
# towards every node as well. With sch_netem
# the script uses "netem rate R delay D"; kernels without sch_netem get "tbf rate R"
# and a warning that the delay is not applied (BRAID_NETNS_STRICT=1 makes that an error).
#
# Exit codes: 0 ok; 2 namespaces cannot be made here (check prints why); 1 other errors.
set -u

prog=netns-cluster.sh
prefix=braidnode
rate=""
delay=""
hubRate=""
nodes=""
cmd=${1:-}
[ $# -gt 0 ] && shift

usage() {
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 1
}
die() {
  echo "$prog: $*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --delay) delay=${2:?--delay needs a value}; shift 2 ;;
    --hub-rate) hubRate=${2:?--hub-rate needs a value}; shift 2 ;;
    --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
    -h | --help) usage ;;
    [0-9]*) nodes=$1; shift ;;
    *) echo "$prog: unknown argument '$1'" >&2; usage ;;
  esac
done

# Namespace names are free-form, but keep them short and plain so that ps, logs and
# `ip netns` stay readable; the prefix also names the leftovers that `down` removes.
# It must end with a letter or _, so that "P1" + node "0" cannot be read as "P" + node "10".
[[ "$prefix" =~ ^[A-Za-z]([A-Za-z0-9_]{0,18}[A-Za-z_])?$ ]] ||
  die "bad prefix '$prefix' (letters, digits, _; at most 20; starts with a letter, ends with a letter or _)"
hub="${prefix}-hub"

# Every namespace this prefix owns: P<digits> and P-hub (leftovers of a crashed run too).
owned_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' |
    grep -E "^${prefix}([0-9]+|-hub)\$" || true
}

# Why namespaces cannot be made here (empty: they can). Tries the real thing.
why_not() {
  command -v ip >/dev/null 2>&1 || { echo "the 'ip' command (iproute2) is not installed"; return; }
  command -v tc >/dev/null 2>&1 || { echo "the 'tc' command (iproute2) is not installed"; return; }
  local probe="${prefix}chk$$" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "cannot create a network namespace (need root or CAP_SYS_ADMIN+CAP_NET_ADMIN): $err"
    return
  fi
  if ! err=$(ip -n "$probe" link add a0 type veth peer name a1 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot create a veth pair inside a namespace: $err"
    return
  fi
  if ! err=$(ip -n "$probe" link add b0 type bridge 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot create a bridge inside a namespace: $err"
    return
  fi
  if ! err=$(ip netns exec "$probe" true 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot run a program inside a namespace (ip netns exec): $err"
    return
  fi
  ip netns del "$probe" 2>/dev/null
}

# Which qdisc gives shaping here: "netem", "tbf" (rate only) or "" (none).
shaper_kind() {
  local probe="${prefix}q$$" kind=""
  ip netns add "$probe" 2>/dev/null || return 0
  ip -n "$probe" link add q0 type veth peer name q1 2>/dev/null
  if tc -n "$probe" qdisc add dev q0 root netem delay 1ms 2>/dev/null; then
    kind=netem
  elif tc -n "$probe" qdisc add dev q0 root tbf rate 1gbit burst 64kb latency 10ms 2>/dev/null; then
    kind=tbf
  fi
  ip netns del "$probe" 2>/dev/null
  echo "$kind"
}

do_down() {
  local ns left
  for ns in $(owned_namespaces); do
    # Programs still running inside would keep the namespace alive: stop them first.
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null || true
  done
  left=$(owned_namespaces)
  [ -z "$left" ] || die "could not remove: $left"
  return 0
}

# Rate in tc units -> bytes per millisecond (for tbf's burst), at least 16 KiB.
burst_bytes() {
  python3 - "$1" <<'PY' 2>/dev/null || echo 131072
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmgt]?)(bit|bps)?", sys.argv[1].lower())
v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
if m.group(3) != "bps":
    v /= 8  # bits -> bytes
print(max(16384, int(v / 1000)))
PY
}

shape() {  # shape NAMESPACE DEVICE
  local ns=$1 dev=$2 kind
  [ -z "$rate" ] && [ -z "$delay" ] && return 0
  kind=$SHAPER
  if [ "$kind" = netem ]; then
    local args=()
    [ -n "$delay" ] && args+=(delay "$delay")
    [ -n "$rate" ] && args+=(rate "$rate")
    # A deep queue: netem's default of 1000 packets drops at high rate x delay.
    tc -n "$ns" qdisc add dev "$dev" root netem "${args[@]}" limit 100000 ||
      die "tc netem on $ns/$dev failed"
  elif [ "$kind" = tbf ] && [ -n "$rate" ]; then
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst "$(burst_bytes "$rate")" \
      latency 50ms || die "tc tbf on $ns/$dev failed"
  fi
}

do_up() {
  [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 200 ] ||
    die "up needs a node count N (1..200)"
  local reason
  reason=$(why_not)
  if [ -n "$reason" ]; then
    echo "$prog: $reason" >&2
    exit 2
  fi
  SHAPER=""
  if [ -n "$rate$delay$hubRate" ]; then
    SHAPER=$(shaper_kind)
    if [ "$SHAPER" != netem ]; then
      local msg="this kernel has no sch_netem qdisc"
      if [ "${BRAID_NETNS_STRICT:-0}" = 1 ]; then
        die "$msg (BRAID_NETNS_STRICT=1): cannot shape with rate '$rate' delay '$delay'"
      fi
      if [ -n "$delay" ]; then
        echo "$prog: warning: $msg: delay '$delay' is NOT applied${rate:+; rate '$rate' via tbf}" >&2
      fi
      [ -n "$rate" ] && [ "$SHAPER" != tbf ] &&
        echo "$prog: warning: no tbf qdisc either: rate '$rate' is NOT applied" >&2
    fi
  fi
  do_down  # leftovers of a crashed run with this prefix
  # Any failure from here on removes what was made (die exits; set -e covers the rest).
  # shellcheck disable=SC2154  # rc is assigned inside the trap
  trap 'rc=$?; [ $rc -ne 0 ] && do_down >/dev/null 2>&1; exit $rc' EXIT
  set -e
  ip netns add "$hub"
  ip -n "$hub" link set lo up
  ip -n "$hub" link add br0 type bridge
  # No STP: the bridge forwards at once; no multicast snooping surprises.
  ip -n "$hub" link set br0 type bridge stp_state 0 forward_delay 0 2>/dev/null || true
  ip -n "$hub" link set br0 up
  ip -n "$hub" addr add 10.77.0.254/24 dev br0
  local i ns
  for ((i = 0; i < nodes; i++)); do
    ns="${prefix}${i}"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$hub" link add "n${i}" type veth peer name veth0 netns "$ns"
    ip -n "$hub" link set "n${i}" master br0
    ip -n "$hub" link set "n${i}" up
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev veth0
    ip -n "$ns" link set veth0 up
    shape "$ns" veth0
    [ -n "$hubRate" ] && rate=$hubRate delay="" shape "$hub" "n${i}"
  done
  set +e
  trap - EXIT
  # The veths and bridge ports come up asynchronously: wait until all are up/forwarding.
  local t ready
  for ((t = 0; t < 100; t++)); do
    ready=1
    for ((i = 0; i < nodes; i++)); do
      ip -n "${prefix}${i}" -br link show veth0 2>/dev/null | grep -q ' UP ' || ready=0
    done
    [ "$(bridge -n "$hub" link show 2>/dev/null | grep -c 'state forwarding')" -ge "$nodes" ] ||
      ready=0
    [ "$ready" = 1 ] && break
    sleep 0.05
  done
  [ "$ready" = 1 ] || echo "$prog: warning: links not all up after 5 s" >&2
  local shaping=""
  if [ "$SHAPER" = netem ]; then
    shaping="${rate:+, rate $rate}${delay:+, delay $delay} (netem)"
  elif [ "$SHAPER" = tbf ] && [ -n "$rate" ]; then
    shaping=", rate $rate (tbf)${delay:+, no delay}"
  fi
  [ -n "$hubRate" ] && shaping="$shaping; hub ports rate $hubRate"
  echo "$prog: up: $nodes nodes ${prefix}0..${prefix}$((nodes - 1)), 10.77.0.1..$nodes" \
       "on veth0$shaping; hub 10.77.0.254"
}

do_info() {
  local ns
  for ns in $(owned_namespaces); do
    echo "== $ns"
    ip -n "$ns" -brief addr 2>/dev/null | sed 's/^/   /'
    tc -n "$ns" qdisc show 2>/dev/null | grep -v 'noqueue' | sed 's/^/   /'
  done
}

case "$cmd" in
  up) do_up ;;
  down) do_down ;;
  check)
    reason=$(why_not)
    if [ -n "$reason" ]; then
      echo "$prog: network namespaces unavailable: $reason" >&2
      exit 2
    fi
    kind=$(shaper_kind)
    case "$kind" in
      netem) echo "$prog: ok: namespaces, veth, bridge; shaping with netem (rate and delay)" ;;
      tbf) echo "$prog: ok: namespaces, veth, bridge; no sch_netem: shaping is rate only (tbf), no delay" ;;
      *) echo "$prog: ok: namespaces, veth, bridge; no shaping qdisc (netem/tbf) available" ;;
    esac
    ;;
  info) do_info ;;
  *) usage ;;
esac
