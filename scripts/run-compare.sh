#!/usr/bin/env bash
# Side-by-side comparison of Braid with Open MPI and Gloo on this machine, host memory,
# float32 sums (perf/compare/README.md). Builds Release into build-compare/, then runs, in
# one session and on the same sizes: Braid's perf suite (ranks as processes via braidrun
# and as threads via -t), mpi_bench under mpirun, gloo_bench under braidrun, and membw
# with 1 and 2 threads; perf/compare/merge.py turns every JSON file into
# build-compare/report/{compare.md,compare.json,*.png}.
#
# Usage: scripts/run-compare.sh [options]          (every option also has an env form)
#   --min SIZE      smallest size (BRAID_COMPARE_MIN, default 8)
#   --max SIZE      largest size (BRAID_COMPARE_MAX, default 256M)
#   --reps N        repetitions of every sweep; medians are reported (BRAID_COMPARE_REPS, 3)
#   --ranks "2 4"   rank counts (BRAID_COMPARE_RANKS)
#   --colls "..."   collectives (BRAID_COMPARE_COLLS, default: all_reduce reduce_scatter
#                   all_gather alltoall broadcast reduce)
#   --libs "..."    subset of: braid-proc braid-thread openmpi gloo (BRAID_COMPARE_LIBS)
#   --iters-scale X multiply every iteration count by X (BRAID_COMPARE_ITERS_SCALE, 1)
#   --mpi-args "..." mpirun options (BRAID_COMPARE_MPI_ARGS, default: the shared-memory
#                   BTL with CMA single copy: --mca pml ob1 --mca btl self,vader
#                   --mca btl_vader_single_copy_mechanism cma)
#   --quick         8 B..4 MiB, 1 repetition, a quarter of the iterations (a smoke run)
#   --no-build      use the binaries already in build-compare/
# Sizes are swept in three segments with the same iteration counts for every library:
# 8 B..64 KiB by x2 (50 iterations, 5 warmup), 128 KiB..8 MiB by x2 (20, 3), 16 MiB..
# 256 MiB by x4 (3, 1). The full run takes about 15 minutes on 2 quiet cores (much more
# when other jobs load the machine: see the load averages in run.log).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

min=${BRAID_COMPARE_MIN:-8}
max=${BRAID_COMPARE_MAX:-256M}
reps=${BRAID_COMPARE_REPS:-3}
ranks=${BRAID_COMPARE_RANKS:-"2 4"}
colls=${BRAID_COMPARE_COLLS:-"all_reduce reduce_scatter all_gather alltoall broadcast reduce"}
libs=${BRAID_COMPARE_LIBS:-"braid-proc braid-thread openmpi gloo"}
scale=${BRAID_COMPARE_ITERS_SCALE:-1}
mpi_args=${BRAID_COMPARE_MPI_ARGS:-"--mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism cma"}
build=1
while (($#)); do
  case "$1" in
    --min) min=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --libs) libs=$2; shift 2 ;;
    --iters-scale) scale=$2; shift 2 ;;
    --mpi-args) mpi_args=$2; shift 2 ;;
    --quick) max=4M; reps=1; scale=0.25; shift ;;
    --no-build) build=0; shift ;;
    -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "run-compare: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Bytes of a size with an optional K/M/G suffix.
bytes() {
  local v=$1
  case "$v" in
    *K | *k) echo $((${v%?} << 10)) ;;
    *M | *m) echo $((${v%?} << 20)) ;;
    *G | *g) echo $((${v%?} << 30)) ;;
    *) echo $((v)) ;;
  esac
}
has() { [[ " $1 " == *" $2 "* ]]; }
iters() { python3 -c "import sys; print(max(1, round($1 * float(sys.argv[1]))))" "$scale"; }

bld=$root/build-compare
bin=$bld/bin
if ((build)); then
  scripts/install-deps.sh
  jobs=${BRAID_JOBS:-$(nproc)}
  # shellcheck disable=SC2086
  cmake -S . -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAID_BUILD_TESTS=OFF \
    ${BRAID_COMPARE_CMAKE_ARGS:-} >/dev/null
  targets="braidrun membw"
  for c in $colls; do targets+=" ${c}_perf"; done
  # The peer benchmarks exist once perf/CMakeLists.txt has add_subdirectory(compare).
  for t in mpi_bench gloo_bench; do
    if ninja -C "$bld" -t targets all 2>/dev/null | grep -q "^$t:"; then targets+=" $t"; fi
  done
  # shellcheck disable=SC2086
  cmake --build "$bld" -j "$jobs" --target $targets
fi
for t in braidrun membw; do
  [ -x "$bin/$t" ] || { echo "run-compare: $bin/$t is missing" >&2; exit 1; }
done
if has "$libs" openmpi && [ ! -x "$bin/mpi_bench" ]; then
  echo "run-compare: WARNING: $bin/mpi_bench was not built (MPI missing?): Open MPI skipped" >&2
  libs=${libs//openmpi/}
fi
if has "$libs" gloo && [ ! -x "$bin/gloo_bench" ]; then
  echo "run-compare: WARNING: $bin/gloo_bench was not built (libgloo-dev missing?): Gloo skipped" >&2
  libs=${libs//gloo/}
fi

res=$bld/results
rm -rf "$res"
mkdir -p "$res" "$bld/report"
log=$bld/report/run.log
: >"$log"
echo "run-compare: sizes $min..$max, reps $reps, ranks '$ranks', libs '$libs'" | tee -a "$log"
echo "run-compare: mpirun $mpi_args" | tee -a "$log"
# Braid settings from the environment (e.g. BRAID_BOARD=0 for a run without the flag
# board), so a report says what it measured.
settings=$(env | grep -E '^(BRAID|NCCL)_' | grep -v '^BRAID_COMPARE_' | sort | tr '\n' ' ' || true)
echo "run-compare: Braid settings: ${settings:-defaults}" | tee -a "$log"
echo "run-compare: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start" |
  tee -a "$log"
start=$(date +%s)

# Run one command with its output in the log; a failure is reported, not fatal.
runlog() {
  local label=$1
  shift
  echo "== $label: $*" >>"$log"
  if ! timeout 900 "$@" >>"$log" 2>&1; then
    echo "run-compare: FAILED: $label (see $log)" | tee -a "$log" >&2
    return 0
  fi
}

echo "run-compare: membw (256 MiB memcpy, 1 and 2 threads)"
runlog membw "$bin/membw" -s 256M -n 9 -t 1 2 -J "$res/membw.json"

lo_b=$(bytes "$min")
hi_b=$(bytes "$max")
comma_colls=${colls// /,}
seg=0
# segment: first last factor iterations warmup
for segment in "8 65536 2 50 5" "131072 8388608 2 20 3" "16777216 268435456 4 3 1"; do
  read -r s_lo s_hi s_f s_it s_wu <<<"$segment"
  seg=$((seg + 1))
  ((s_lo < lo_b)) && s_lo=$lo_b
  ((s_hi > hi_b)) && s_hi=$hi_b
  ((s_lo > s_hi)) && continue
  it=$(iters "$s_it")
  wu=$s_wu
  for n in $ranks; do
    echo "run-compare: $n ranks, $s_lo..$s_hi B, $it iterations x $reps reps ($(($(date +%s) - start)) s)"
    common=(-b "$s_lo" -e "$s_hi" -f "$s_f" -n "$it" -w "$wu")
    for c in $colls; do
      if has "$libs" braid-proc; then
        runlog "braid-proc n$n $c" "$bin/braidrun" -n "$n" -- "$bin/${c}_perf" "${common[@]}" \
          -c 0 -N "$reps" -J "$res/braid-proc_n${n}_s${seg}_${c}.json"
      fi
      if has "$libs" braid-thread; then
        runlog "braid-thread n$n $c" "$bin/${c}_perf" -t "$n" "${common[@]}" -c 0 -N "$reps" \
          -J "$res/braid-thread_n${n}_s${seg}_${c}.json"
      fi
    done
    if has "$libs" openmpi; then
      # shellcheck disable=SC2086
      runlog "openmpi n$n" mpirun --allow-run-as-root --oversubscribe -np "$n" $mpi_args \
        "$bin/mpi_bench" "${common[@]}" -N "$reps" -C "$comma_colls" -L "mpirun $mpi_args" \
        -J "$res/openmpi_n${n}_s${seg}_"
    fi
    if has "$libs" gloo; then
      store=$(mktemp -d)
      runlog "gloo n$n" "$bin/braidrun" -n "$n" -- "$bin/gloo_bench" -S "$store" "${common[@]}" \
        -N "$reps" -C "$comma_colls" -J "$res/gloo_n${n}_s${seg}_"
      rm -rf "$store"
    fi
  done
done
echo "run-compare: measured in $(($(date +%s) - start)) s; load average $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee -a "$log"
/usr/bin/python3 perf/compare/merge.py --out "$bld/report" "$res"/*.json
echo "run-compare: report in $bld/report (compare.md, compare.json, *.png; log run.log)"
