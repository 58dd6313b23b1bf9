#!/usr/bin/env bash
# In-network reductions on a namespace cluster: a braid-switch runs in the hub namespace
# (10.77.0.254, where the bridge is) and the ranks reach it with NCCL_COLLNET_ENABLE=1
# BRAID_SWITCH=10.77.0.254:<port>.
#
# Default mode: every switch algorithm that braid-info marks " [switch]" for all_reduce
# (collnet_chain, collnet_direct), all_gather and reduce_scatter (collnet), forced with
# NCCL_ALGO=<coll>:<algo>, once per sweep (--sweep; by default every type and op at
# small sizes, then larger sizes up to 3 MiB with float), and once per collective with
# the tuner choosing (--tuner-sweep; default 8 B..2 MiB, float). Every run must exit 0,
# report 0 wrong elements in and out of place (mn_judge), use shm inside a node and
# sockets across (mn_transports), and go through the switch (mn_collnet: the
# "CollNet BraidSwitch" INFO line on every rank and, when forced, the forced algorithm
# in every TUNING line of the collective with no fallback warning: a silent fallback to
# a host algorithm fails the test). The switch must outlive the runs and stop cleanly
# on SIGTERM.
#
# --kill-head: SIGKILL the local rank 0 of node 1 (a node head of the switch group) in a
# loop of 1 MiB collnet_chain all-reduces; every other rank must exit with an error
# status (not a signal) within --bound seconds, the switch must still run, and it must
# then serve a new job (a short checked all-reduce through it).
# --kill-switch: SIGKILL the switch in the same loop; every rank must exit with an error
# status within --bound seconds.
#
#   mn_switch.sh --scripts DIR --bin DIR --info BRAID_INFO --prefix P [--nodes N] [--per M]
#                [--placement block|cyclic] [--rate R] [--delay D] [--hub-rate R]
#                [--env NAME=VALUE]... [--sweep "perf args"]... [--tuner-sweep "args"]
#                [--colls "c1 c2"]
#                [--kill-head | --kill-switch] [--victim RANK] [--bound S]
#                [--switch BRAID_SWITCH_BINARY]   (default: DIR/braid-switch of --bin)
# --hub-rate defaults to --rate: the switch's port towards each node is as fast as the
# node's own link, as on a real switch.
# Exit: 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
here=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=""
bin=""
info=""
switch_bin=""
PREFIX=""
nodes=2
per=2
placement=block
rate=""
delay=""
hub_rate=""
extra_env=()
sweeps=()
tuner_sweep="-b 8 -e 3M -f 8 -n 1 -w 0 -c 1"
colls=(all_reduce all_gather reduce_scatter)
mode=perf
victim=""
bound=30
while [ $# -gt 0 ]; do
  case "$1" in
    --scripts) SCRIPTS=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --info) info=$2; shift 2 ;;
    --switch) switch_bin=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --per) per=$2; shift 2 ;;
    --placement) placement=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --hub-rate) hub_rate=$2; shift 2 ;;
    --env) extra_env+=("$2"); shift 2 ;;
    --sweep) sweeps+=("$2"); shift 2 ;;
    --tuner-sweep) tuner_sweep=$2; shift 2 ;;
    --colls) read -r -a colls <<<"$2"; shift 2 ;;
    --kill-head) mode=kill_head; shift ;;
    --kill-switch) mode=kill_switch; shift ;;
    --victim) victim=$2; shift 2 ;;
    --bound) bound=$2; shift 2 ;;
    *) echo "mn_switch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=tests/multinode/mn_lib.sh
. "$here/mn_lib.sh"
[ -n "$SCRIPTS" ] && [ -n "$bin" ] && [ -n "$PREFIX" ] || mn_fail "usage: see the header of $0"
[ "$mode" != perf ] || [ -n "$info" ] ||
  mn_fail "--info BRAID_INFO is needed to list the algorithms"
[ "$nodes" -ge 2 ] || mn_fail "the switch serves communicators of 2 nodes or more (--nodes $nodes)"
switch_bin=${switch_bin:-$bin/braid-switch}
[ -x "$switch_bin" ] || mn_fail "$switch_bin is not built"
if [ ${#sweeps[@]} -eq 0 ]; then
  # Every type and op (in and out of place are one row each) at 8 B, 512 B, 32 KiB; then
  # float at 48 KiB..3 MiB (x4): 48 KiB is no multiple of the switch's 64 KiB pieces,
  # 768 KiB none of the default FIFO's 512 KiB slots.
  sweeps=("-b 8 -e 32K -f 64 -d all -o all -n 1 -w 0 -c 1"
          "-b 48K -e 3M -f 4 -d float -o sum -n 1 -w 0 -c 1")
fi
world=$((nodes * per))
# Node 1's local rank 0 (a head: channel c's head is local rank c mod per).
if [ -z "$victim" ]; then
  if [ "$placement" = cyclic ]; then victim=1; else victim=$per; fi
fi
shaping=()
[ -n "$rate" ] && shaping+=(--rate "$rate")
[ -n "$delay" ] && shaping+=(--delay "$delay")
hub_rate=${hub_rate:-$rate}
[ -n "$hub_rate" ] && shaping+=(--hub-rate "$hub_rate")

mn_require_netns
mn_up "$nodes" "${shaping[@]}"
work=$(mktemp -d)
sw_pid=""
run_pid=""
cleanup() {
  [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null
  [ -n "$sw_pid" ] && { kill -9 "$sw_pid"; wait "$sw_pid"; } 2>/dev/null
  rm -rf "$work"
  bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" >/dev/null 2>&1
}
trap cleanup EXIT

# start_switch: braid-switch in the hub namespace on a free port; sets sw_pid and
# switch_addr. (`ip netns exec` execs the program: $! is the switch itself.)
start_switch() {
  : >"$work/switch.out"
  ip netns exec "${PREFIX}-hub" "$switch_bin" --listen 10.77.0.254:0 \
    >"$work/switch.out" 2>"$work/switch.err" &
  sw_pid=$!
  local t
  for ((t = 0; t < 100; t++)); do
    grep -q 'listening on' "$work/switch.out" && break
    kill -0 "$sw_pid" 2>/dev/null || break
    sleep 0.1
  done
  switch_addr=$(awk '/listening on/ { print $NF; exit }' "$work/switch.out")
  [[ "$switch_addr" =~ ^10\.77\.0\.254:[1-9][0-9]*$ ]] || {
    cat "$work/switch.out" "$work/switch.err"
    mn_fail "braid-switch did not start in ${PREFIX}-hub"
  }
  mn_log "braid-switch (pid $sw_pid) listening on $switch_addr"
}

# stop_switch: SIGTERM, and its exit status in sw_rc (0: a clean stop; its log tail if not).
stop_switch() {
  kill -TERM "$sw_pid"
  wait "$sw_pid"
  sw_rc=$?
  sw_pid=""
  [ "$sw_rc" -eq 0 ] || tail -n 20 "$work/switch.err"
}

# switch_alive WHEN: fails the test when the switch is gone.
switch_alive() {
  kill -0 "$sw_pid" 2>/dev/null && return 0
  wait "$sw_pid"
  local rc=$?
  tail -n 20 "$work/switch.err"
  mn_fail "braid-switch died $1 (exit status $rc)"
}

failures=()
summary=()
runs=0
# run_perf COLL ALGO|tuner SWEEP: one checked perf run through the switch.
run_perf() {
  local coll=$1 algo=$2 sweep=$3 key spec log rc verdict v t c start line
  local -a args
  read -r -a args <<<"$sweep"
  key=${coll//_/}
  if [ "$algo" = tuner ]; then spec=""; else spec="$key:$algo"; fi
  runs=$((runs + 1))
  log="$work/run$runs.$coll.$algo.log"
  start=$SECONDS
  env "${extra_env[@]}" NCCL_COLLNET_ENABLE=1 BRAID_SWITCH="$switch_addr" NCCL_ALGO="$spec" \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
    BRAID_TIMEOUT_MS=60000 BRAID_BOOTSTRAP_TIMEOUT_MS=60000 BRAID_SWITCH_TIMEOUT_MS=30000 \
    bash "$SCRIPTS/netns-run.sh" --nodes "$nodes" --ranks-per-node "$per" \
    --placement "$placement" --prefix "$PREFIX" --timeout 150 -- \
    "$bin/${coll}_perf" "${args[@]}" >"$log" 2>&1
  rc=$?
  verdict=""
  v="" t="" c=""
  if [ "$rc" -ne 0 ]; then
    verdict="exit code $rc"
  elif ! v=$(mn_judge "$log"); then
    verdict=$v
  elif ! t=$(mn_transports "$log" "$nodes" "$per" "$placement"); then
    verdict=$t
  elif ! c=$(mn_collnet "$log" "$key" "$algo" "$world"); then
    verdict=$c
  fi
  line="$coll NCCL_ALGO=${spec:-<tuner>} $sweep: $((SECONDS - start))s"
  if [ -n "$verdict" ]; then
    failures+=("$line: $verdict")
    echo "---- FAILED: $line: $verdict; log:"
    grep -v ' NCCL INFO ' "$log" | tail -n 60
    grep ' NCCL WARN \|error\|Error' "$log" | head -n 20
    tail -n 20 "$work/switch.err"
  else
    summary+=("ok   $line; $v; $c; $t")
  fi
  switch_alive "after run $runs ($coll NCCL_ALGO=${spec:-<tuner>})"
}

# ---- default mode: checked runs of every switch algorithm -------------------------------
if [ "$mode" = perf ]; then
  start_switch
  for coll in "${colls[@]}"; do
    [ -x "$bin/${coll}_perf" ] || mn_fail "$bin/${coll}_perf is not built"
    mapfile -t algos < <(mn_algorithms "$info" "${coll//_/}" switch)
    [ ${#algos[@]} -gt 0 ] || mn_fail "braid-info marks no algorithm of $coll [switch]"
    for algo in "${algos[@]}"; do
      for sweep in "${sweeps[@]}"; do run_perf "$coll" "$algo" "$sweep"; done
    done
    # The tuner may or may not pick the switch; the collnet must be set up all the same.
    run_perf "$coll" tuner "$tuner_sweep"
  done
  stop_switch
  echo "== ${nodes} nodes x ${per} ranks ($placement) ${shaping[*]} ${extra_env[*]}," \
    "switch $switch_addr: $runs runs"
  for s in "${summary[@]}"; do echo "$s"; done
  for f in "${failures[@]}"; do echo "FAIL $f"; done
  [ "$sw_rc" -eq 0 ] || mn_fail "braid-switch exited $sw_rc on SIGTERM"
  [ ${#failures[@]} -eq 0 ] || exit 1
  echo "PASS"
  exit 0
fi

# ---- fault modes -------------------------------------------------------------------------
start_switch
# A long loop of 1 MiB all-reduces through the switch: still running when the fault hits.
# The collective timeout is only a backstop above the bound: a dead head or switch must
# be noticed through closed connections and the peer checks.
env "${extra_env[@]}" NCCL_COLLNET_ENABLE=1 BRAID_SWITCH="$switch_addr" \
  NCCL_ALGO=allreduce:collnet_chain NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
  BRAID_TIMEOUT_MS=$(((bound + 30) * 1000)) BRAID_PEER_CHECK_MS=200 \
  bash "$SCRIPTS/netns-run.sh" --nodes "$nodes" --ranks-per-node "$per" \
  --placement "$placement" --prefix "$PREFIX" \
  --keep-going --pids "$work/pids" --timeout $((bound + 90)) -- \
  "$bin/all_reduce_perf" -b 1M -e 1M -n 1000000 -w 1 -c 0 >"$work/log" 2>&1 &
run_pid=$!

mn_wait_started "$work/log" "$run_pid"
sleep 1
# The loop must really go through the switch, else the fault tests nothing.
c=$(mn_collnet "$work/log" allreduce collnet_chain "$world") || {
  grep -v ' NCCL INFO ' "$work/log" | tail -n 40
  mn_fail "the loop does not run through the switch: $c"
}
mn_log "loop running: $c"
if [ "$mode" = kill_head ]; then
  pid_ns=$(mn_rank_pid "$work/pids" "$victim" "$work/log") || exit 1
  read -r pid ns <<<"$pid_ns"
  what="rank $victim (pid $pid, namespace $ns)"
else
  victim=-1
  pid=$sw_pid
  what="braid-switch (pid $pid)"
fi
mn_log "killing $what with SIGKILL"
killed_at=$(date +%s.%N)
kill -9 "$pid"
wait "$run_pid"
rc=$?
run_pid=""
if [ "$mode" = kill_switch ]; then
  wait "$sw_pid" 2>/dev/null  # (quietly: bash reports a job killed by a signal)
  sw_pid=""
fi
took=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
grep -v ' NCCL INFO ' "$work/log" | tail -n 40
echo "-- braid-switch log (tail):"
tail -n 12 "$work/switch.err"
mn_log "the job ended ${took}s after the kill, netns-run exit code $rc"

mn_expect_failed "$work/log" "$rc" "$took" "$bound" "$world" "$victim" "$what"
echo "every rank but the victim failed with an error ${took}s after the kill"

if [ "$mode" = kill_head ]; then
  # The switch outlives a job whose member died, and serves the next one.
  switch_alive "when a member of its group was killed"
  run_perf all_reduce collnet_chain "-b 8 -e 256K -f 8 -n 1 -w 0 -c 1"
  [ ${#failures[@]} -eq 0 ] || mn_fail "the switch did not serve a new job after the kill"
  echo "${summary[0]}"
  stop_switch
  [ "$sw_rc" -eq 0 ] || mn_fail "braid-switch exited $sw_rc on SIGTERM"
  echo "PASS: survivors failed with an error ${took}s after rank $victim (a head) was killed;" \
    "the switch then served a new job"
else
  echo "PASS: every rank failed with an error ${took}s after the switch was killed"
fi
