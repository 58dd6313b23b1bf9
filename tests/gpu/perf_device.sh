#!/usr/bin/env bash
# The perf suite on device buffers (-D 1), run by tests/gpu.cmake:
#   perf_device.sh <braid_gpu_test> <bin dir> <tests/perf/run_perf.sh>
# Without a usable CUDA device, asking for device buffers must fail cleanly: exit status
# 2 (not a crash) and a message naming the reason; d2d_bw likewise. With a device, the
# perf programs must pass their own result checks on device buffers (threads, -g groups,
# processes through braidrun), and d2d_bw must report a bandwidth.
set -u
gputest=$1
bin=$2
runperf=$3
fail() {
  echo "perf_device.sh: FAIL: $*" >&2
  exit 1
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! "$gputest" --has-device; then
  "$bin/all_reduce_perf" -D 1 -b 8 -e 8 -n 1 -w 0 >"$out" 2>&1
  rc=$?
  cat "$out"
  [ "$rc" -eq 2 ] || fail "all_reduce_perf -D 1 without a device: exit $rc, expected 2"
  grep -q "need a usable CUDA device" "$out" || fail "no reason printed"
  "$bin/d2d_bw" -b 1M -e 1M -n 1 >"$out" 2>&1
  rc=$?
  cat "$out"
  [ "$rc" -eq 2 ] || fail "d2d_bw without a device: exit $rc, expected 2"
  grep -q "no usable CUDA device" "$out" || fail "d2d_bw printed no reason"
  # The flag's value is checked like every other.
  "$bin/all_reduce_perf" -D 7 >"$out" 2>&1
  [ $? -eq 2 ] || fail "-D 7 accepted"
  echo "perf_device.sh: ok (no device: clean failures)"
  exit 0
fi
small=(-b 8 -e 1M -f 16 -n 2 -w 1 -c 1)
# Each step prints the seconds elapsed as it starts (a slow step shows in the log).
step_start=$(date +%s)
step() { echo "perf_device.sh: [$(($(date +%s) - step_start)) s] $*"; }
step "pass all_reduce_perf -D 1 -t 2 ${small[@]}"
bash "$runperf" pass -- "$bin/all_reduce_perf" -D 1 -t 2 "${small[@]}" || fail "all_reduce -t 2"
step "pass all_reduce_perf -D 1 -g 2 ${small[@]}"
bash "$runperf" pass -- "$bin/all_reduce_perf" -D 1 -g 2 "${small[@]}" || fail "all_reduce -g 2"
step "pass all_reduce_perf -D 1 -t 2 -b 0 -e 4K -f 16 -n 1 -w 0 -d all "
bash "$runperf" pass -- "$bin/all_reduce_perf" -D 1 -t 2 -b 0 -e 4K -f 16 -n 1 -w 0 -d all -o all ||
  fail "all_reduce types x ops"
for coll in all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv; do
  step "pass ${coll}_perf -D 1 -t 2 ${small[@]} -r -1"
  bash "$runperf" pass -- "$bin/${coll}_perf" -D 1 -t 2 "${small[@]}" -r -1 || fail "$coll -t 2"
done
if [ -x "$bin/braidrun" ]; then
  step "pass braidrun -n 2 -- all_reduce_perf -D 1 ${small[@]}"
  bash "$runperf" pass -- "$bin/braidrun" -n 2 -- "$bin/all_reduce_perf" -D 1 "${small[@]}" ||
    fail "all_reduce, 2 processes"
  step "corrupt braidrun -n 2 -- all_reduce_perf -D 1 ${small[@]}"
  bash "$runperf" corrupt -- "$bin/braidrun" -n 2 -- "$bin/all_reduce_perf" -D 1 "${small[@]}" ||
    fail "a corrupted device result went unnoticed"
fi
"$bin/d2d_bw" -b 64M -e 128M -n 3 || fail "d2d_bw"
echo "perf_device.sh: ok (device buffers)"
