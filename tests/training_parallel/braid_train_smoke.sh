#!/bin/bash
# End-to-end smoke tests of braid-train (tests/training_parallel.cmake):
#   braid_train_smoke.sh MODE BRAID_TRAIN BRAIDRUN
# MODE: braidrun (2 ranks, dp=2), braidrun-tp-pp (4 ranks, tp=2 x pp=2, gpipe),
#       resume (save with dp=2, load with dp=1: same losses as one uninterrupted run),
#       mpirun (2 ranks, tp=2, under Open MPI; exit 77 = skipped when mpirun is missing),
#       slurm-env (2 processes started with the variables srun sets),
#       bad-layout (a layout that does not match the rank count must fail cleanly),
#       zero3-memory (the per-rank state table: zero3 holds ~1/2 of ddp's heap on 2 ranks).
# A tiny model for a few steps; checks the exit status, the summary lines and the
# CSV / JSON logs.
set -u
mode=$1
bin=$2
braidrun=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL ($mode): $*"
  echo "---- output ----"
  cat "$tmp/out.txt" 2>/dev/null
  exit 1
}
tiny=(--width 16 --layers 1 --heads 2 --context 16 --batch 4 --eval-batches 1 --lr 1e-2)
logs=(--log-csv "$tmp/log.csv" --log-json "$tmp/log.json")

check_logs() {  # STEPS
  local steps=$1
  [ -s "$tmp/log.csv" ] || fail "no CSV log"
  [ "$(head -1 "$tmp/log.csv" | cut -d, -f1-3)" = "step,loss,val_loss" ] || fail "CSV header"
  [ "$(($(wc -l < "$tmp/log.csv") - 1))" -eq "$steps" ] || fail "CSV rows != $steps"
  [ -s "$tmp/log.json" ] || fail "no JSON log"
  grep -Eq '"final_val_loss": [0-9]' "$tmp/log.json" || fail "JSON final_val_loss"
  grep -q '"unigram_baseline"' "$tmp/log.json" || fail "JSON unigram_baseline"
  if command -v python3 > /dev/null; then
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['steps'])==$steps" \
      "$tmp/log.json" || fail "JSON does not parse or has the wrong number of steps"
  fi
  grep -q "final validation loss" "$tmp/out.txt" || fail "no final validation loss line"
  grep -q "unigram baseline" "$tmp/out.txt" || fail "no unigram baseline line"
}

case "$mode" in
  braidrun)
    "$braidrun" -n 2 -- "$bin" --dp 2 --steps 4 --eval-every 2 "${tiny[@]}" "${logs[@]}" \
      --plot "$tmp/loss.png" > "$tmp/out.txt" 2>&1 || fail "exit status $?"
    grep -q "2 ranks via torchrun" "$tmp/out.txt" || fail "launcher not recognised"
    grep -q "model state per rank" "$tmp/out.txt" || fail "no per-rank state table"
    grep -q "plot written to" "$tmp/out.txt" || fail "no plot message"
    python3 - "$tmp/loss.png" <<'PY' || fail "the PNG plot is not a valid PNG"
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n"
w, h = struct.unpack(">II", d[16:24])
at, idat = 8, b""
while at < len(d):
    n, = struct.unpack(">I", d[at:at + 4]); kind = d[at + 4:at + 8]
    body = d[at + 8:at + 8 + n]
    assert zlib.crc32(kind + body) == struct.unpack(">I", d[at + 8 + n:at + 12 + n])[0], kind
    if kind == b"IDAT": idat += body
    at += 12 + n
raw = zlib.decompress(idat)
assert len(raw) == h * (3 * w + 1), (len(raw), w, h)
assert len(set(raw)) > 4  # something was drawn
PY
    grep -q "DP communication hidden" "$tmp/out.txt" || fail "no comm-hidden report"
    check_logs 4
    ;;
  zero3-memory)
    # The per-rank model-state table at start: ZeRO-3 on 2 ranks holds about half of
    # what DDP holds, on every rank (the heap held, measured).
    for m in ddp zero3; do
      "$braidrun" -n 2 -- "$bin" --dp 2 --dp-mode $m --steps 1 --eval-every 0 "${tiny[@]}" \
        > "$tmp/out.txt" 2>&1 || fail "$m: exit status $?"
      grep -q "model state per rank" "$tmp/out.txt" || fail "$m: no per-rank state table"
      awk '$1 == "1" && NF == 6 {print $6}' "$tmp/out.txt" > "$tmp/held-$m.txt"
      [ -s "$tmp/held-$m.txt" ] || fail "$m: no row for rank 1"
    done
    python3 - "$(cat "$tmp/held-ddp.txt")" "$(cat "$tmp/held-zero3.txt")" <<'PY' || fail "zero3 does not hold ~1/2"
import sys
ddp, z3 = float(sys.argv[1]), float(sys.argv[2])
print(f"heap held per rank: ddp {ddp} KiB, zero3 {z3} KiB, ratio {z3 / ddp:.3f}")
assert 0.4 < z3 / ddp < 0.6
PY
    ;;
  braidrun-tp-pp)
    "$braidrun" -n 4 -- "$bin" --tp 2 --pp 2 --microbatches 2 --schedule gpipe --steps 3 \
      --eval-every 0 "${tiny[@]}" "${logs[@]}" > "$tmp/out.txt" 2>&1 || fail "exit status $?"
    grep -q "pipeline bubble measured" "$tmp/out.txt" || fail "no bubble report"
    check_logs 3
    ;;
  resume)
    "$braidrun" -n 2 -- "$bin" --dp 2 --steps 6 --eval-every 0 "${tiny[@]}" \
      --log-csv "$tmp/full.csv" > "$tmp/out.txt" 2>&1 || fail "full run: exit status $?"
    "$braidrun" -n 2 -- "$bin" --dp 2 --steps 3 --eval-every 0 "${tiny[@]}" \
      --save "$tmp/ckpt" > "$tmp/out.txt" 2>&1 || fail "first half: exit status $?"
    "$bin" --steps 6 --eval-every 0 "${tiny[@]}" --load "$tmp/ckpt" \
      --log-csv "$tmp/resumed.csv" > "$tmp/out.txt" 2>&1 || fail "resumed run: exit status $?"
    grep -q "resumed from" "$tmp/out.txt" || fail "no resume message"
    # Steps 4..6 of the resumed dp=1 run against the uninterrupted dp=2 run.
    python3 - "$tmp/full.csv" "$tmp/resumed.csv" <<'PY' || fail "resumed losses differ"
import csv, sys
full = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))}
res = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))}
assert sorted(res) == [4, 5, 6], sorted(res)
for s in res:
    rel = abs(res[s] - full[s]) / full[s]
    print(f"step {s}: resumed {res[s]:.6f} uninterrupted {full[s]:.6f} rel {rel:.1e}")
    assert rel < 1e-5, s
PY
    ;;
  mpirun)
    if ! command -v mpirun > /dev/null; then
      echo "SKIP: mpirun not found"
      exit 77
    fi
    # Its own rendezvous port (the default, 29500, may be busy with another job).
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) timeout 120 mpirun --allow-run-as-root \
      --oversubscribe -x MASTER_ADDR -x MASTER_PORT -np 2 "$bin" --tp 2 --steps 3 \
      --eval-every 0 "${tiny[@]}" "${logs[@]}" > "$tmp/out.txt" 2>&1 || fail "exit status $?"
    grep -q "2 ranks via mpi" "$tmp/out.txt" || fail "Open MPI environment not recognised"
    check_logs 3
    ;;
  slurm-env)
    # What srun gives each task; rank 0's bootstrap listens on MASTER_PORT.
    port=$((20000 + RANDOM % 20000))
    pids=()
    for r in 0 1; do
      env -u RANK -u WORLD_SIZE -u NCCL_COMM_ID -u MASTER_ADDR SLURM_PROCID=$r SLURM_NTASKS=2 \
        SLURM_LOCALID=$r SLURM_NTASKS_PER_NODE=2 SLURM_NODELIST=localhost \
        SLURM_LAUNCH_NODE_IPADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 120 "$bin" --dp 2 --steps 3 --eval-every 0 "${tiny[@]}" \
        > "$tmp/out$r.txt" 2>&1 &
      pids+=($!)
    done
    for r in 0 1; do
      wait "${pids[$r]}" || { cp "$tmp/out$r.txt" "$tmp/out.txt"; fail "task $r failed"; }
    done
    cp "$tmp/out0.txt" "$tmp/out.txt"
    grep -q "2 ranks via slurm" "$tmp/out.txt" || fail "Slurm environment not recognised"
    grep -q "final validation loss" "$tmp/out.txt" || fail "no summary"
    ;;
  bad-layout)
    if timeout 60 "$braidrun" -n 2 -- "$bin" --tp 4 --steps 1 "${tiny[@]}" > "$tmp/out.txt" 2>&1; then
      fail "a 4-rank layout on 2 ranks succeeded"
    fi
    grep -q "needs 4 ranks" "$tmp/out.txt" || fail "no clear message"
    "$bin" --no-such-flag > "$tmp/out.txt" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "an unknown flag: exit status $rc, expected 2"
    grep -q "^braid-train: --no-such-flag: unknown option" "$tmp/out.txt" ||
      fail "no clear message for an unknown flag: $(cat "$tmp/out.txt")"
    "$bin" --dp-mode zero4 > "$tmp/out.txt" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "a bad --dp-mode: exit status $rc, expected 2"
    grep -q "^braid-train: --dp-mode: .*zero4" "$tmp/out.txt" ||
      fail "no clear message for a bad --dp-mode: $(cat "$tmp/out.txt")"
    ;;
  *)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
echo "PASS ($mode)"
