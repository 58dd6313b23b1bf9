#!/bin/bash
# Elastic braid-train end to end (tests/training_dist.cmake):
#   elastic_smoke.sh MODE BRAID_TRAIN
# MODE:
#   shrink   4 processes, dp=4, --elastic, a checkpoint every 5 steps. Rank 2 SIGKILLs
#            itself as step 16 starts, while the checkpoint of step 15 is pending (its
#            agreement needs rank 2, so it is never committed). Checks that the three
#            survivors finish with exit status 0; that each says rank 2 failed, shrank
#            4 -> 3 and reloaded step 10 (not the half-done 15); that each detected the
#            failure within BRAID_TIMEOUT_MS of the kill; that each survivor's loss for
#            steps 11..30 equals (1e-5 relative) that of a separate 3-rank run started
#            with --load from the same step-10 checkpoint (same global batch 12: 3
#            sequences per rank at dp=4, 4 at dp=3); and that rank 0's summary says it
#            shrank.
#   kill9    the demo model (width 64, 2 blocks, context 64, 113k parameters) on 4
#            processes, dp=4, a checkpoint every 20 of 120 steps; this script kill -9s
#            rank 1 from outside as soon as the step-60 checkpoint is complete. Checks
#            that the survivors finish, agree on rank 1, resume from a complete
#            checkpoint of step >= 60, and detected the failure within BRAID_TIMEOUT_MS;
#            prints the figures (docs/training.md, "Elastic training").
#   refuse   --elastic with tp=2 stops with a message naming the reason.
# The processes are started here with the torchrun variables (braidrun stops every
# rank when one dies, as torchrun and mpirun do).
set -u
mode=$1
bin=$2
tmp=$(mktemp -d)
pids=()
cleanup() {  # the braid-train processes (children of their `timeout`), then `timeout`
  for p in "${pids[@]}"; do
    kill -9 $(cat "/proc/$p/task/$p/children" 2> /dev/null) "$p" 2> /dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL ($mode): $*"
  for f in "$tmp"/out-*.txt; do
    echo "---- $f ----"
    cat "$f"
  done
  exit 1
}
# n ranks of braid-train with ARGS; outputs in $tmp/out-<tag><rank>.txt; statuses in st[].
# start() returns at once (pids[] = their `timeout` processes); launch() also waits.
start() {  # TAG N ARGS...
  local tag=$1 n=$2
  shift 2
  local port=$((20000 + RANDOM % 20000))
  pids=()
  for ((r = 0; r < n; r++)); do
    env -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r \
      LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port NCCL_COMM_ID=127.0.0.1:$port \
      timeout -k 5 100 "$bin" "$@" > "$tmp/out-$tag$r.txt" 2>&1 &
    pids+=($!)
  done
}
finish() {  # N
  st=()
  for ((r = 0; r < $1; r++)); do
    wait "${pids[$r]}"
    st+=($?)
  done
  pids=()
}
launch() {  # TAG N ARGS...
  start "$@"
  finish "$2"
}

tiny=(--width 16 --layers 1 --heads 2 --context 16 --batch 12 --eval-every 0 --eval-batches 1
      --lr 1e-2 --seed 3 --steps 30)
export OPENBLAS_NUM_THREADS=1
export BRAID_TIMEOUT_MS=20000  # the bound on detection

case "$mode" in
  shrink)
    ck="$tmp/ck"
    launch e 4 --dp 4 --elastic --checkpoint-dir "$ck" --checkpoint-every 5 --checkpoint-keep 0 \
      --kill-rank 2 --kill-at-step 16 --log-csv "$tmp/loss-%r.csv" "${tiny[@]}"
    [ "${st[2]}" -eq 137 ] || fail "rank 2 was not killed (status ${st[2]})"
    for r in 0 1 3; do
      [ "${st[$r]}" -eq 0 ] || fail "survivor $r exited with ${st[$r]}"
      o="$tmp/out-e$r.txt"
      grep -q "the survivors agree: rank 2 failed" "$o" || fail "rank $r: no agreement on rank 2"
      grep -q "shrank the communicator from 4 to 3 ranks" "$o" || fail "rank $r: no shrink"
      grep -q "reloaded $ck/step-00000010 (step 10) re-sharded for dp=3" "$o" ||
        fail "rank $r: did not reload the step-10 checkpoint"
      [ "$(tail -n +2 "$tmp/loss-$r.csv" | wc -l)" -eq 30 ] || fail "rank $r: the CSV has not 30 steps"
    done
    grep -q "elastic: shrank from 4 to 3 ranks at step 16" "$tmp/out-e0.txt" || fail "no shrink in the summary"
    grep -q "^dp_size 3" "$ck/step-00000015/manifest.txt" "$ck"/step-00000015/*manifest.txt 2> /dev/null ||
      fail "step 15 was not rewritten by the 3 survivors"
    # The reference: 3 ranks resumed from the same checkpoint with the same flags.
    launch ref 3 --dp 3 --load "$ck/step-00000010" --log-csv "$tmp/ref.csv" "${tiny[@]}"
    for r in 0 1 2; do [ "${st[$r]}" -eq 0 ] || fail "reference rank $r exited with ${st[$r]}"; done
    grep -q "resumed from $ck/step-00000010 at step 10" "$tmp/out-ref0.txt" || fail "reference did not resume"
    python3 - "$tmp" <<'PY' || fail "losses or detection times are wrong"
import csv, re, sys
tmp = sys.argv[1]
ref = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(f"{tmp}/ref.csv"))}
assert sorted(ref) == list(range(11, 31)), sorted(ref)
kill = float(re.search(r"wall ms (\d+)", open(f"{tmp}/out-e2.txt").read()).group(1))
worst = 0.0
for r in (0, 1, 3):
    mine = {int(x["step"]): float(x["loss"]) for x in csv.DictReader(open(f"{tmp}/loss-{r}.csv"))}
    for s in range(11, 31):
        rel = abs(mine[s] - ref[s]) / abs(ref[s])
        worst = max(worst, rel)
        assert rel <= 1e-5, (r, s, mine[s], ref[s])
    out = open(f"{tmp}/out-e{r}.txt").read()
    t = float(re.search(r"failed during step 16 at wall ms (\d+)", out).group(1))
    hb = float(re.search(r"detected (-?\d+) ms after its last heartbeat", out).group(1))
    print(f"rank {r}: error {t - kill:.0f} ms after the kill ({hb:.0f} ms after rank 2's last heartbeat); "
          f"loss steps 11-30 vs the 3-rank resume: max rel {max(abs(mine[s] - ref[s]) / abs(ref[s]) for s in ref):.1e}")
    assert 0 <= t - kill < 20000, t - kill
print(f"worst relative loss difference {worst:.1e}")
PY
    ;;
  kill9)
    ck="$tmp/ck"
    start k 4 --dp 4 --elastic --checkpoint-dir "$ck" --checkpoint-every 20 --width 64 --layers 2 \
      --heads 4 --context 64 --batch 12 --steps 120 --eval-every 0 --print-every 20
    for ((i = 0; i < 6000; i++)); do
      [ -d "$ck/step-00000060" ] && break
      sleep 0.01
    done
    [ -d "$ck/step-00000060" ] || fail "no step-60 checkpoint"
    victim=$(cat "/proc/${pids[1]}/task/${pids[1]}/children")  # braid-train, under timeout
    killed=$(date +%s%3N)
    kill -9 $victim
    finish 4
    [ "${st[1]}" -eq 137 ] || fail "rank 1 was not killed (status ${st[1]})"
    for r in 0 2 3; do
      [ "${st[$r]}" -eq 0 ] || fail "survivor $r exited with ${st[$r]}"
      grep -q "the survivors agree: rank 1 failed" "$tmp/out-k$r.txt" || fail "rank $r: no agreement on rank 1"
    done
    python3 - "$tmp" "$killed" <<'PY' || fail "wrong resume step or detection time"
import re, sys
tmp, killed = sys.argv[1], float(sys.argv[2])
for r in (0, 2, 3):
    out = open(f"{tmp}/out-k{r}.txt").read()
    t = float(re.search(r"failed during step (\d+) at wall ms (\d+)", out).group(2))
    step = int(re.search(r"failed during step (\d+)", out).group(1))
    m = re.search(r"reloaded \S+ \(step (\d+)\) re-sharded for dp=3 in (\d+) ms; resuming at step \d+ "
                  r"\(recovery took (\d+) ms\)", out)
    agree = re.search(r"agreement (\d+) ms", out).group(1)
    shrink = re.search(r"in (\d+) ms; now rank", out).group(1)
    print(f"rank {r}: failed in step {step}, error {t - killed:.0f} ms after the kill, agreement {agree} ms, "
          f"shrink {shrink} ms, rebuild + reload {m.group(2)} ms, recovery {m.group(3)} ms, resumed from step {m.group(1)}")
    assert 0 <= t - killed < 20000 and 60 <= int(m.group(1)) < step, (t - killed, m.group(1), step)
PY
    grep "elastic: shrank\|final validation" "$tmp/out-k0.txt"
    ;;
  refuse)
    launch x 2 --tp 2 --elastic --checkpoint-dir "$tmp/ck" "${tiny[@]}"
    [ "${st[0]}" -ne 0 ] || fail "--elastic with tp=2 was accepted"
    grep -q "needs pure data parallelism" "$tmp/out-x0.txt" || fail "no clear message"
    ;;
  *)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
echo "PASS ($mode)"
