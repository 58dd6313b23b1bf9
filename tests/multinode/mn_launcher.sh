#!/usr/bin/env bash
# netns-cluster.sh and netns-run.sh on their own, with shell programs as ranks: rank
# placement (block, cyclic) and environment, output tagging, failure propagation, the
# timeout, and that `down` removes everything (also leftovers of a crashed run).
#
#   mn_launcher.sh --scripts DIR --prefix P
# Exit: 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
here=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=""
PREFIX=""
while [ $# -gt 0 ]; do
  case "$1" in
    --scripts) SCRIPTS=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    *) echo "mn_launcher.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=tests/multinode/mn_lib.sh
. "$here/mn_lib.sh"
[ -n "$SCRIPTS" ] && [ -n "$PREFIX" ] || mn_fail "usage: see the header of $0"
mn_require_netns
mn_up 3 --rate 1gbit
work=$(mktemp -d)
trap 'rm -rf "$work"; bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" >/dev/null 2>&1' EXIT
# Every job is bounded from outside too (netns-run's own --timeout is 60 s), so a stuck
# launcher fails this test with the processes left listed instead of hanging it.
run() {
  timeout -k 5 90 bash "$SCRIPTS/netns-run.sh" --prefix "$PREFIX" --timeout 60 "$@"
  local rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "netns-run.sh did not return within 90 s (rc $rc); processes left:" >&2
    ps -eo pid,ppid,pgid,sid,etimes,stat,cmd | grep -E "sleep|bash -c|netns" | grep -v grep >&2
  fi
  return "$rc"
}

# A rank reports what it sees: its variables and the address of its node's veth0.
probe='a=$(ip -4 -o addr show dev veth0 | awk "{print \$4}");
echo "r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK lw=$LOCAL_WORLD_SIZE n=$NODE_RANK h=$NCCL_HOSTID a=$a if=$NCCL_SOCKET_IFNAME id=$NCCL_COMM_ID"'
check_layout() {  # check_layout PLACEMENT
  local placement=$1 r node lr out
  run --nodes 3 --ranks-per-node 2 --placement "$placement" -- bash -c "$probe" >"$work/out" 2>&1 ||
    { cat "$work/out"; mn_fail "$placement: the probe job failed"; }
  for ((r = 0; r < 6; r++)); do
    if [ "$placement" = block ]; then node=$((r / 2)); lr=$((r % 2)); else node=$((r % 3)); lr=$((r / 3)); fi
    out=$(grep "^\[$r\] " "$work/out")
    case "$out" in
      "[$r] r=$r w=6 l=$lr lw=2 n=$node h=${PREFIX}${node} a=10.77.0.$((node + 1))/24 if==veth0 id=10.77.0.1:"[0-9]*) ;;
      *) cat "$work/out"; mn_fail "$placement: rank $r: unexpected '$out'" ;;
    esac
  done
  [ "$(grep -c '^\[[0-5]\] r=' "$work/out")" -eq 6 ] || mn_fail "$placement: not 6 tagged lines"
  mn_log "ok: $placement placement and environment"
}
check_layout block
check_layout cyclic

# Cross-node traffic goes through the bridge: node 2 reaches a listener on node 0.
# (The listener may take a while to start on a loaded machine: retry for 10 s.)
ip netns exec "${PREFIX}0" python3 -c 'import socket; s=socket.socket(); s.bind(("10.77.0.1", 47001)); s.listen(1); import time; time.sleep(12)' &
listener=$!
connected=0
for _ in $(seq 1 40); do
  if ip netns exec "${PREFIX}2" timeout 2 bash -c 'exec 3<>/dev/tcp/10.77.0.1/47001' 2>/dev/null; then
    connected=1
    break
  fi
  sleep 0.25
done
kill "$listener" 2>/dev/null
wait "$listener" 2>/dev/null
[ "$connected" = 1 ] || mn_fail "node 2 cannot connect to node 0 (10.77.0.1)"
mn_log "ok: node 2 connects to node 0 over the bridge"

# A failing rank stops the others at once (they would sleep 60 s) and sets the status.
start=$SECONDS
run --nodes 3 --ranks-per-node 2 --grace 2 -- bash -c '[ "$RANK" = 4 ] && exit 7; exec sleep 60' \
  >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 7 ] || { cat "$work/out"; mn_fail "a rank exiting 7: netns-run exit code $rc, expected 7"; }
[ $((SECONDS - start)) -le 10 ] || mn_fail "the other ranks were not stopped promptly"
grep -q 'rank 4 (pid [0-9]*, node '"${PREFIX}"'2) exited with status 7$' "$work/out" ||
  { cat "$work/out"; mn_fail "the failed rank is not named"; }
mn_log "ok: a failed rank stops the job and is named"

# A stopped rank's helpers stop with it (each rank leads its own process group).
# (Rank 1 fails a second late, so that rank 0 has started its helper and said so even on
# a loaded machine.)
run --nodes 2 --ranks-per-node 1 --grace 1 -- \
  bash -c '[ "$RANK" = 1 ] && { sleep 1; exit 4; }; sleep 87 & echo "helper $!"; wait' >"$work/out" 2>&1
helper=$(awk '/^\[0\] helper / { print $3 }' "$work/out")
[ -n "$helper" ] || { cat "$work/out"; mn_fail "rank 0 printed no helper pid"; }
alive() {  # a process that exists and is not a zombie (reaping by pid 1 may lag)
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) && [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}
for ((t = 0; t < 20; t++)); do alive "$helper" || break; sleep 0.1; done
if alive "$helper"; then
  kill "$helper"
  mn_fail "rank 0's helper (pid $helper) survived the stop"
fi
mn_log "ok: a stopped rank's helper processes stop too"

# A rank killed by a signal: 128+signal, named with the signal.
run --nodes 2 --ranks-per-node 1 -- bash -c '[ "$RANK" = 1 ] && kill -SEGV $$; exit 0' \
  >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 139 ] || { cat "$work/out"; mn_fail "a rank killed by SIGSEGV: exit code $rc, expected 139"; }
grep -q 'rank 1 .*killed by signal 11 (SIGSEGV)' "$work/out" || { cat "$work/out"; mn_fail "no signal name"; }
mn_log "ok: a rank killed by a signal is reported with it"

# The timeout kills ranks that ignore SIGTERM.
start=$SECONDS
run --nodes 2 --ranks-per-node 2 --timeout 2 -- bash -c 'trap "" TERM; sleep 60; exit 0' \
  >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 124 ] || { cat "$work/out"; mn_fail "timeout: exit code $rc, expected 124"; }
[ $((SECONDS - start)) -le 8 ] || mn_fail "timeout: took $((SECONDS - start))s"
mn_log "ok: --timeout"

# --keep-going lets the others finish; all succeed -> 0.
run --nodes 2 --ranks-per-node 2 --keep-going -- bash -c '[ "$RANK" = 1 ] && exit 5; sleep 1; exit 0' \
  >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 5 ] || { cat "$work/out"; mn_fail "keep-going: exit code $rc, expected 5"; }
grep -q 'rank [023] .*stopped by' "$work/out" && { cat "$work/out"; mn_fail "keep-going stopped ranks"; }
run --nodes 3 --ranks-per-node 1 -- true || mn_fail "a job of 'true' failed"
mn_log "ok: --keep-going and success"

# down removes everything, also what a crashed run left (a namespace with a process in it).
ip netns exec "${PREFIX}1" sleep 60 &
sleep 0.2
bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" || mn_fail "down failed"
left=$(ip netns list | awk '{print $1}' | grep -E "^${PREFIX}([0-9]+|-hub)\$")
[ -z "$left" ] || mn_fail "down left $left"
bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" || mn_fail "a second down failed"
wait 2>/dev/null
mn_log "ok: down (twice, with a process inside)"
echo PASS
