#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/) with clang, ASan and UBSan in build-fuzz and
# runs each for a while; prints, per harness, the executions and the crashes.
#
#   scripts/run-fuzz.sh [seconds] [harness ...]     default: 15 s each, every harness
#
# The short run (scripts/run-tests.sh) uses the default; the longer documented run is
#   scripts/run-fuzz.sh 600
# Environment:
#   BRAID_JOBS             build parallelism (default: nproc)
#   BRAID_FUZZ_PARALLEL    harnesses run at once (default: 2)
#   BRAID_FUZZ_SEED        libFuzzer -seed (default: 1; 0 picks one from the clock)
#   BRAID_FUZZ_KEEP=1      keep (and grow) the working corpora of earlier runs
#   BRAID_FUZZ_OPT         optimisation of the fuzz build (default: -O0, which builds in
#                          half the time of -O1; -O1 runs the harnesses faster: worth it
#                          for long runs, but changing it rebuilds build-fuzz)
# Each harness starts from its seed corpus (tests/fuzz/corpus/<name>/) and first replays
# its regression inputs (tests/fuzz/regressions/<name>/). New inputs and crash artifacts
# go under build-fuzz/tests/fuzz-work/; logs under build-fuzz/fuzz-logs/. A crash makes
# the script fail: minimise it (braid_fuzz_<name> -minimize_crash=1 <file>), fix the bug,
# and add the input to tests/fuzz/regressions/<name>/ (it then replays in every build).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-15}
shift || true
all=(api bootstrap_wire cost_model env_params topology_xml unique_id)
if (($#)); then harnesses=("$@"); else harnesses=("${all[@]}"); fi
jobs=${BRAID_JOBS:-$(nproc)}
parallel=${BRAID_FUZZ_PARALLEL:-2}
seed=${BRAID_FUZZ_SEED:-1}
opt=${BRAID_FUZZ_OPT:--O0}
dir=build-fuzz
work=$dir/tests/fuzz-work
logs=$dir/fuzz-logs

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "run-fuzz: $tool not found (scripts/install-deps.sh)"; exit 1; }
done

start=$(date +%s)
echo "== fuzz: configure and build ${harnesses[*]} ($dir, clang $opt, ASan+UBSan) =="
# Its own build type, so that nothing else decides the flags (asserts stay on).
cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Fuzz "-DCMAKE_C_FLAGS_FUZZ=$opt -gline-tables-only" \
  "-DCMAKE_CXX_FLAGS_FUZZ=$opt -gline-tables-only" \
  -DBRAID_FUZZ=ON -DBRAID_SANITIZE=address -DBRAID_WITH_CUDA=OFF -DBRAID_BUILD_PERF=OFF >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=("braid_fuzz_$h"); done
cmake --build "$dir" -j "$jobs" --target "${targets[@]}"
built=$(date +%s)

mkdir -p "$logs" "$work/artifacts"
# Regression inputs first: each must run clean.
for h in "${harnesses[@]}"; do
  mapfile -t inputs < <(find "tests/fuzz/regressions/$h" -type f ! -name 'README*' 2>/dev/null | sort)
  if ((${#inputs[@]})); then
    if ! "$dir/bin/braid_fuzz_$h" "${inputs[@]}" >"$logs/$h.regressions.log" 2>&1; then
      echo "run-fuzz: $h: a regression input crashes again (see $logs/$h.regressions.log)"
      exit 1
    fi
  fi
done

fuzz_one() {  # fuzz_one <harness>: one timed run; its log in $logs/<harness>.log
  local h=$1
  if [ "${BRAID_FUZZ_KEEP:-0}" != 1 ]; then rm -rf "${work:?}/$h"; fi
  mkdir -p "$work/$h"
  rm -f "$work/artifacts/$h"-*
  # -timeout: an input running this long is a hang; -rss_limit_mb: one that eats memory.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$dir/bin/braid_fuzz_$h" \
    -max_total_time="$seconds" -seed="$seed" -timeout=20 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$h-" \
    "$work/$h" "tests/fuzz/corpus/$h" >"$logs/$h.log" 2>&1
}

echo "== fuzz: ${seconds} s per harness, ${parallel} at a time, seed ${seed} =="
pids=()
names=()
status=()
for h in "${harnesses[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do sleep 0.2; done
  fuzz_one "$h" &
  pids+=($!)
  names+=("$h")
done
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then status[i]=0; else status[i]=$?; fi
done

crashed=0
printf '%-16s %12s %10s %8s %8s\n' harness executions exec/s corpus crashes
for i in "${!names[@]}"; do
  h=${names[$i]}
  log=$logs/$h.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  units=$(find "$work/$h" -type f | wc -l)
  crashes=$(find "$work/artifacts" -name "$h-*" -type f | wc -l)
  if [ "${status[$i]}" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi
  printf '%-16s %12s %10s %8s %8s\n' "$h" "${execs:-?}" "${rate:-?}" "$units" "$crashes"
  if [ "$crashes" -ne 0 ]; then
    crashed=$((crashed + 1))
    echo "  -> $h failed (exit ${status[$i]}): $log"
    grep -m 3 -E 'ERROR: |runtime error|fuzz check failed' "$log" | sed 's/^/     /' || true
    find "$work/artifacts" -name "$h-*" -type f | sed 's/^/     input: /'
  fi
done
end=$(date +%s)
echo "run-fuzz: ${#names[@]} harnesses, ${crashed} crashed; build $((built - start)) s, total $((end - start)) s"
[ "$crashed" -eq 0 ]
