#!/usr/bin/env bash
# NCCL_DEBUG_SUBSYS=TUNING logs each choice with its prediction; NCCL_ALGO / NCCL_PROTO
# restrict the choice in real runs (2 processes over shm); a bad BRAID_TUNER_MODEL
# fails init with a message naming the file.
set -uo pipefail
braidrun=$1 perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run <log> [env...]: a 2-rank all-reduce sweep with the TUNING log
  local log=$1; shift
  env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING "$@" \
    "$braidrun" -n 2 -- "$perf" -b 8 -e 4M -f 64 -n 2 -w 1 -c 1 >"$log" 2>&1
}

run "$tmp/auto.log" || { cat "$tmp/auto.log"; fail "default run failed"; }
# Small sizes run on the flag board (one host): its line names the path instead of a plan.
grep -q "AllReduce 8 B (1 node(s) x 2 rank(s)): board/inline (the flag board; no plan)" "$tmp/auto.log" \
  || { cat "$tmp/auto.log"; fail "no TUNING line for the 8 B all-reduce"; }
grep -q "AllReduce 32K B (1 node(s) x 2 rank(s)): board/copy " "$tmp/auto.log" \
  || { cat "$tmp/auto.log"; fail "no TUNING line for the 32 KiB all-reduce"; }
# Without the board the tuner's choice is logged with its prediction.
run "$tmp/noboard.log" BRAID_BOARD=0 || { cat "$tmp/noboard.log"; fail "BRAID_BOARD=0 run failed"; }
grep -q "AllReduce 8 B (1 node(s) x 2 rank(s)): [a-z]*/[A-Za-z0-9]* channels [0-9]* chunk [0-9KM]* predicted [0-9.]* us" "$tmp/noboard.log" \
  || { cat "$tmp/noboard.log"; fail "no TUNING line for the 8 B all-reduce (BRAID_BOARD=0)"; }
grep -q "AllReduce 4M B" "$tmp/auto.log" || fail "no TUNING line for 4 MiB"

run "$tmp/ring.log" NCCL_ALGO=allreduce:ring NCCL_PROTO=LL || { cat "$tmp/ring.log"; fail "forced run failed"; }
n=$(grep -c "AllReduce .* B (.*): ring/LL " "$tmp/ring.log")
other=$(grep "AllReduce .* B (.*): " "$tmp/ring.log" | grep -vc ": ring/LL ")
[[ $n -ge 4 && $other -eq 0 ]] || { grep TUNING -i "$tmp/ring.log" | head; fail "NCCL_ALGO=allreduce:ring NCCL_PROTO=LL not honoured ($n ring/LL, $other other)"; }

run "$tmp/neg.log" NCCL_ALGO='^ring,direct' || { cat "$tmp/neg.log"; fail "negated run failed"; }
grep "AllReduce .* B (.*): " "$tmp/neg.log" | grep -E ": (ring|direct)/" && fail "NCCL_ALGO=^ring,direct chose ring or direct"

echo "bogus_key=3" >"$tmp/model.txt"
env BRAID_TUNER_MODEL="$tmp/model.txt" NCCL_DEBUG=WARN "$braidrun" -n 2 -- "$perf" -b 8 -e 8 -n 1 -w 0 >"$tmp/bad.log" 2>&1 \
  && fail "a bad BRAID_TUNER_MODEL was accepted"
grep -q "BRAID_TUNER_MODEL '$tmp/model.txt': line 1" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "no message naming the bad model file"; }
# NCCL_ALGO on one rank only: init fails on every rank with a message (no hang).
timeout 60 "$braidrun" -n 2 -- bash -c '[[ $RANK == 0 ]] && export NCCL_ALGO=tree; exec "$@"' _ \
  "$perf" -b 8 -e 8 -n 1 -w 0 >"$tmp/mismatch.log" 2>&1 && fail "mismatched NCCL_ALGO was accepted"
grep -q "other NCCL_ALGO/NCCL_PROTO than" "$tmp/mismatch.log" || { cat "$tmp/mismatch.log"; fail "no message for mismatched NCCL_ALGO"; }

# An algorithm that declines the layout (hier on nodes of 2 and 1 ranks) falls back
# with a warning instead of failing.
timeout 60 env NCCL_ALGO=allreduce:hier NCCL_DEBUG=WARN "$braidrun" -n 3 -- \
  bash -c 'export NCCL_HOSTID=node$((RANK / 2)); exec "$@"' _ "$perf" -b 8 -e 64K -f 64 -n 1 -w 0 -c 1 \
  >"$tmp/decline.log" 2>&1 || { cat "$tmp/decline.log"; fail "NCCL_ALGO=allreduce:hier on uneven nodes failed"; }
grep -q "allow no algorithm that can run AllReduce 2 nodes (2,1 ranks); using" "$tmp/decline.log" \
  || { cat "$tmp/decline.log"; fail "no fallback warning"; }
echo "PASS"
