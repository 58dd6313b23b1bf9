#!/usr/bin/env bash
# Fault test: on N nodes x 2 ranks (default 2), SIGKILL one rank (default 3, on node 1)
# while an all-reduce loop runs; every other rank must fail with an error (exit status != 0, not a signal) within
# a bound, not hang. netns-run --keep-going leaves the survivors to notice on their own.
#
#   mn_fault.sh --scripts DIR --bin DIR --prefix P [--nodes N] [--victim RANK]
#               [--bound SECONDS]
# Exit: 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
here=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=""
bin=""
PREFIX=""
victim=3
bound=30
nodes=2
while [ $# -gt 0 ]; do
  case "$1" in
    --scripts) SCRIPTS=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    --victim) victim=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --bound) bound=$2; shift 2 ;;
    *) echo "mn_fault.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=tests/multinode/mn_lib.sh
. "$here/mn_lib.sh"
[ -n "$SCRIPTS" ] && [ -n "$bin" ] && [ -n "$PREFIX" ] || mn_fail "usage: see the header of $0"
per=2
world=$((nodes * per))

mn_require_netns
mn_up "$nodes" --rate 2gbit
work=$(mktemp -d)
run_pid=""
cleanup() {
  [ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null
  rm -rf "$work"
  bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" >/dev/null 2>&1
}
trap cleanup EXIT

# A long loop of 1 MiB all-reduces: it is still running when the victim dies. The
# collective timeout is only a backstop, above the bound: dead peers must be noticed
# through their closed connections and the peer checks.
BRAID_TIMEOUT_MS=$(((bound + 30) * 1000)) BRAID_PEER_CHECK_MS=200 NCCL_DEBUG=WARN \
  bash "$SCRIPTS/netns-run.sh" --nodes "$nodes" --ranks-per-node "$per" --prefix "$PREFIX" \
  --keep-going --pids "$work/pids" --timeout $((bound + 90)) -- \
  "$bin/all_reduce_perf" -b 1M -e 1M -n 1000000 -w 1 -c 0 >"$work/log" 2>&1 &
run_pid=$!

mn_wait_started "$work/log" "$run_pid"
sleep 1
pid_ns=$(mn_rank_pid "$work/pids" "$victim" "$work/log") || exit 1
read -r pid ns <<<"$pid_ns"
mn_log "killing rank $victim (pid $pid, namespace $ns) with SIGKILL"
killed_at=$(date +%s.%N)
kill -9 "$pid"
wait "$run_pid"
rc=$?
run_pid=""
took=$(awk -v a="$killed_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
grep -v ' NCCL INFO ' "$work/log" | tail -n 40
mn_log "the job ended ${took}s after the kill, netns-run exit code $rc"

mn_expect_failed "$work/log" "$rc" "$took" "$bound" "$world" "$victim" "rank $victim"
echo "PASS: every surviving rank failed with an error ${took}s after rank $victim was killed"
