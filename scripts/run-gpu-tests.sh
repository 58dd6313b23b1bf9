#!/usr/bin/env bash
# Runs Braid's GPU checks on a machine with a CUDA device (e.g. the lent H200 box):
# builds a Release tree for sm_90, runs the GPU-labelled tests (and the cuda_api /
# transports_dev areas when present), then the perf suite on device buffers and the
# device-to-device copy probe, then PyTorch on the GPU (the braid backend on CUDA
# tensors, DDP/FSDP2, ProcessGroupNCCL with Braid preloaded). Everything is logged under
# the results directory, with results.json (commit, device, every step, every figure):
# commit it as perf/gpu/results/<date>.json.
#
#   scripts/run-gpu-tests.sh [results-dir]        (default ./gpu-results)
#
# Environment:
#   BRAID_GPU_BUILD_DIR   build tree (default build-gpu)
#   BRAID_GPU_SKIP_BUILD  1: use the build tree as it is (no configure, no build)
#   BRAID_CUDA_ARCHS      CUDA architectures (default 90: H100/H200)
#   BRAID_JOBS            build parallelism (default: nproc)
#   BRAID_GPU_PYTHON      python with a CUDA torch for the torch steps (default python3)
#   BRAID_GPU_STEPS       regular expression: run only the steps whose names match (a
#                         rerun of what failed, e.g. 'torch|test-cuda_api')
#   BRAID_GPU_BUDGET_S    wall-clock budget of the whole run in seconds (default 540); each
#                         step gets at most what is left, later steps are skipped when
#                         it is spent
# Exit status: 0 when every step that ran passed, 1 otherwise (the summary says which).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
out=${1:-gpu-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BRAID_GPU_BUILD_DIR:-build-gpu}
archs=${BRAID_CUDA_ARCHS:-90}
jobs=${BRAID_JOBS:-$(nproc)}
budget=${BRAID_GPU_BUDGET_S:-540}
start=$(date +%s)
summary=$out/summary.txt
: >"$summary"
failed=0

note() { echo "$*" | tee -a "$summary"; }
reserve=0  # seconds kept back for later steps
left() { echo $((budget - reserve - ($(date +%s) - start))); }
# step <name> <max seconds> <command...>: runs it with a deadline (the smaller of max
# and what is left), output in <name>.log; records PASS / FAIL / TIMEOUT / SKIP.
step() {
  local name=$1 max=$2 t rc
  shift 2
  # BRAID_GPU_STEPS (a regular expression) picks steps for a rerun; the others are left out.
  if [ -n "${BRAID_GPU_STEPS:-}" ] && ! [[ $name =~ $BRAID_GPU_STEPS ]]; then return 0; fi
  t=$(left)
  ((t > max)) && t=$max
  if ((t < 10)); then
    note "SKIP    $name (time budget spent)"
    failed=1
    return 1
  fi
  local t0
  t0=$(date +%s)
  timeout --kill-after=10 "$t" "$@" >"$out/$name.log" 2>&1
  rc=$?
  local dt=$(($(date +%s) - t0))
  if ((rc == 0)); then
    note "PASS    $name (${dt}s)"
  elif ((rc == 124 || rc == 137)); then
    note "TIMEOUT $name after ${dt}s (limit ${t}s; log: $name.log)"
    failed=1
  else
    note "FAIL    $name (exit $rc, ${dt}s; log: $name.log)"
    failed=1
  fi
  return $rc
}

note "# Braid GPU run $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -n 2 || true
  echo "built from $(cat "$build/BUILT_FROM" 2>/dev/null || git -C "$root" describe --always --dirty 2>/dev/null)"
} >"$out/machine.txt"
cat "$out/machine.txt" >>"$summary"

# ---- dependencies and build ----------------------------------------------------------
if [ "${BRAID_GPU_SKIP_BUILD:-0}" != 1 ]; then
  if [ -x scripts/install-deps.sh ]; then
    # Best effort: the box may be offline; what is missing shows up at configure time.
    step deps 90 scripts/install-deps.sh || note "        (continuing without new packages)"
  fi
  [ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cfg=(-S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=ON
       "-DBRAID_CUDA_ARCHS=$archs")
  if ! step configure 120 cmake "${cfg[@]}"; then
    # Without GoogleTest the perf suite can still be measured.
    rm -rf "$build"
    step configure-no-tests 120 cmake "${cfg[@]}" -DBRAID_BUILD_TESTS=OFF
  fi
  # Only what this run uses: the library, braidrun, the perf suite and the GPU tests.
  targets=(braid nccl braidrun braid_perf)
  for t in braid_gpu_test braid_cuda_api_test braid_cuda_api_dlopen_probe \
           braid_transports_dev_test braid_transports_dev_mp_test braid_device_api_program; do
    if cmake --build "$build" --target help 2>/dev/null | grep -q "\b$t\b"; then targets+=("$t"); fi
  done
  step build 330 cmake --build "$build" -j "$jobs" --target "${targets[@]}"
fi
bin=$build/bin

# ---- NVIDIA's nccl-tests, unmodified, on Braid's headers and library -------------------
# From a copy beside the checkout (../nccl-tests, or BRAID_NCCL_TESTS_DIR; never part of
# this repository). Built against Braid's include/ and libnccl.so (NCCL_HOME staged in
# the build tree), run on this GPU: host-launched collectives and the device-API
# implementations (-D 1, -D 2: LSA kernels on symmetric windows, -R 2). nccl-tests puts
# one rank per GPU, so on a one-GPU machine these runs have one rank; several thread
# ranks on one GPU are device_api.program's.
nccl_tests=${BRAID_NCCL_TESTS_DIR:-$root/../nccl-tests}
nt=
prebuilt_nt=0
[ "${BRAID_GPU_SKIP_BUILD:-0}" = 1 ] && [ -x "$build/nccl-tests/all_reduce_perf" ] && prebuilt_nt=1
if { ((prebuilt_nt)) || [ -f "$nccl_tests/src/Makefile" ]; } && [ -e "$build/libnccl.so" ]; then
  home=$root/$build/nccl-home
  mkdir -p "$home/lib"
  ln -sfn "$root/include" "$home/include"
  # The CUDA runtime beside Braid's libnccl, and CUDA_LIB pointing there: a toolkit's
  # lib64 may hold NVIDIA's own libnccl, which -L would otherwise find first.
  cuda_home=${CUDA_HOME:-/usr/local/cuda}
  for f in "$root/$build"/libnccl.so* "$cuda_home"/lib64/libcudart*; do ln -sf "$f" "$home/lib/"; done
  nt=$root/$build/nccl-tests
  if ((prebuilt_nt)); then
    note "        nccl-tests: prebuilt in $nt"
  else
    step nccl-tests.build 200 make -C "$nccl_tests/src" -j "$jobs" BUILDDIR="$nt" \
    NCCL_HOME="$home" CUDA_HOME="$cuda_home" CUDA_LIB="$home/lib" \
    NVCC_GENCODE="-gencode=arch=compute_${archs%%;*},code=sm_${archs%%;*}" \
    "$nt/all_reduce_perf" "$nt/all_gather_perf" "$nt/alltoall_perf" "$nt/sendrecv_perf"
  fi
else
  note "SKIP    nccl-tests (no copy at $nccl_tests: fetch NVIDIA/nccl-tests beside the checkout)"
fi
if [ "${BRAID_GPU_BUILD_ONLY:-0}" = 1 ]; then
  note "# built in $build (BRAID_GPU_BUILD_ONLY=1: nothing run)"
  exit $failed
fi

# The torch backend builds against this machine's torch (CPU work) while the GPU runs the
# steps below; its step further down waits for it.
py=${BRAID_GPU_PYTHON:-python3}
torch_cuda=0
if "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  torch_cuda=1
  (env BRAID_HOME="$root/$build" MAX_JOBS="$jobs" "$py" -m pip install --quiet \
     --no-build-isolation --no-deps "$root/python/torch_braid" >"$out/torch_braid.bg.log" 2>&1
   echo $? >"$out/torch_braid.bg.rc") &
fi


# NCCL's device API (tests/device_api): LSA windows, barriers and an all-reduce kernel on
# 2 and 4 thread ranks sharing the GPU.
if [ -x "$bin/braid_device_api_program" ]; then
  for n in 2 4; do
    step "device_api.program.$n" 60 "$bin/braid_device_api_program" "$n"
  done
fi

# ---- NVIDIA's nccl-tests (built above) ------------------------------------------------
if [ -n "$nt" ]; then
  for t in all_reduce all_gather alltoall sendrecv; do
    [ -x "$nt/${t}_perf" ] || continue
    step "nccl-tests.$t" 60 env LD_LIBRARY_PATH="$home/lib" "$nt/${t}_perf" \
      -b 8 -e 256M -f 8 -n 10 -w 3 -c 1 -g 1 -J "$out/nccl-tests.$t.json"
  done
  for d in 1 2; do
    [ -x "$nt/all_reduce_perf" ] || continue
    step "nccl-tests.all_reduce.D$d" 60 env LD_LIBRARY_PATH="$home/lib" "$nt/all_reduce_perf" \
      -b 8 -e 64M -f 8 -n 10 -w 3 -c 1 -g 1 -R 2 -D "$d" -J "$out/nccl-tests.all_reduce.D$d.json"
  done
fi

# ---- perf suite on device buffers ----------------------------------------------------
# 2 ranks as threads of one process sharing the GPU (one context: kernels run side by
# side). Processes sharing a GPU measure the GPU's time slices, not Braid (docs/gpu.md);
# the GPU tests below run them for correctness.
if [ -x "$bin/d2d_bw" ]; then
  step d2d_bw 60 "$bin/d2d_bw" -b 64M -e 1G -n 20 -J "$out/d2d_bw.json"
fi
if [ -x "$bin/all_reduce_perf" ]; then
  step all_reduce.threads2 120 "$bin/all_reduce_perf" -D 1 -t 2 \
    -b 8 -e 1G -f 4 -n 20 -w 5 -c 1 -J "$out/all_reduce.threads2.json"
  # Small-message latency with more iterations.
  step all_reduce.threads2.latency 60 "$bin/all_reduce_perf" -D 1 -t 2 \
    -b 8 -e 1K -f 2 -n 500 -w 50 -c 1 -J "$out/all_reduce.threads2.latency.json"
  for coll in all_gather reduce_scatter alltoall sendrecv broadcast reduce gather scatter; do
    step "$coll.threads2" 60 "$bin/${coll}_perf" -D 1 -t 2 \
      -b 8 -e 256M -f 32 -n 10 -w 3 -c 1 -J "$out/$coll.threads2.json"
  done
  # The same all-reduce through the FIFOs (the plans before direct access), for the
  # ratio in the same run (docs/cuda.md, "Direct access").
  step all_reduce.threads2.fifo 60 env BRAID_DEVICE_DIRECT=0 "$bin/all_reduce_perf" -D 1 -t 2 \
    -b 8 -e 256M -f 32 -n 10 -w 3 -c 1 -J "$out/all_reduce.threads2.fifo.json"
fi

# ---- tests ---------------------------------------------------------------------------
export CTEST_OUTPUT_ON_FAILURE=1
reserve=120  # the torch steps below get the rest
if [ -f "$build/CTestTestfile.cmake" ]; then
  if [ -x "$bin/braid_gpu_test" ] && ! "$bin/braid_gpu_test" --has-device >>"$summary" 2>&1; then
    note "WARNING the GPU tests will skip: no usable CUDA device"
  fi
  # Processes on one GPU share it by time slices: a few tests at once, not more.
  step test-gpu 240 bash -c "cd '$build' && ctest -L '^gpu$' -j 3 --timeout 240"
  skipped=$(grep -c '(Skipped)' "$out/test-gpu.log" 2>/dev/null)
  [ "${skipped:-0}" -gt 0 ] && note "        $skipped gpu tests skipped"
  for area in cuda_api transports_dev; do
    if [ -n "$(cd "$build" && ctest -N -L "^$area\$" 2>/dev/null | grep -E 'Total Tests: [1-9]')" ]; then
      step "test-$area" 150 bash -c "cd '$build' && ctest -L '^$area\$' -j 4 --timeout 120"
    else
      note "SKIP    test-$area (no such tests in $build)"
    fi
  done
else
  note "SKIP    tests (no test tree in $build)"
fi

# ---- PyTorch on the GPU ----------------------------------------------------------------
# The `braid` backend on CUDA tensors and PyTorch's own ProcessGroupNCCL with Braid
# preloaded, on whatever torch this machine's python3 carries (the backend was built
# against it in the background since the build). Skipped, saying so, where python3 has
# no CUDA torch.
reserve=0
if ((torch_cuda)); then
  step torch_braid.build 240 bash -c "while [ ! -f '$out/torch_braid.bg.rc' ]; do sleep 1; done
    cat '$out/torch_braid.bg.log'; exit \$(cat '$out/torch_braid.bg.rc')"
  lib=$root/$build/libnccl.so.2
  [ -e "$lib" ] || lib=$(ls "$root/$build"/lib*/libnccl.so.2 2>/dev/null | head -n 1)
  for t in "cuda_collectives.py 2" "cuda_training.py braid-ddp 2" \
           "cuda_training.py braid-fsdp2 2" "cuda_training.py nccl-ddp 2 $lib"; do
    set -- $t
    name=torch.${1%.py}.${2}
    # A crash names its Python frame (faulthandler) and Braid says what it saw.
    step "$name" 120 env PYTHONFAULTHANDLER=1 NCCL_DEBUG=WARN \
      bash -c "cd '$root/tests/torch' && '$py' $t"
  done
else
  note "SKIP    torch (no CUDA-capable torch in $py)"
fi

# ---- summary: busbw against the HBM-traffic ceilings (2 thread ranks on one GPU) --------
# With C the device-to-device copy rate and n ranks, the least HBM traffic each
# collective needs bounds its busbw (docs/gpu.md): all-reduce C*2(n-1)/n^2, all-gather
# and reduce-scatter C*2(n-1)/(n(n+1)), all-to-all C*(n-1)/n^2, sendrecv C/n.
if command -v python3 >/dev/null && [ -f "$out/d2d_bw.json" ]; then
  python3 - "$out" <<'PY' | tee -a "$summary"
import json, os, sys
out, n = sys.argv[1], 2
d2d = json.load(open(os.path.join(out, "d2d_bw.json")))["results"]
copy = max(r["copy_gbps"] for r in d2d)
print(f"d2d copy bandwidth C (cudaMemcpyAsync, bytes/time, best size): {copy:.1f} GB/s")
ceil = {"all_reduce": 2 * (n - 1) / n**2, "all_gather": 2 * (n - 1) / (n * (n + 1)),
        "reduce_scatter": 2 * (n - 1) / (n * (n + 1)), "alltoall": (n - 1) / n**2,
        "sendrecv": 1 / n}
for coll, frac in ceil.items():
    f = os.path.join(out, f"{coll}.threads2.json")
    if not os.path.exists(f):
        continue
    rows = [r for r in json.load(open(f))["results"] if r.get("out_of_place")]
    if not rows:
        continue
    r = max(rows, key=lambda r: r["size"])
    b = r["out_of_place"]["busbw_gbps"]
    print(f"{coll:14s} 2 thread ranks {r['size'] >> 20:5d} MiB: busbw {b:8.1f} GB/s = "
          f"{100 * b / (copy * frac):5.1f}% of its ceiling {copy * frac:.0f} GB/s")
fifo = os.path.join(out, "all_reduce.threads2.fifo.json")
direct = os.path.join(out, "all_reduce.threads2.json")
if os.path.exists(fifo) and os.path.exists(direct):
    by = lambda f: {r["size"]: r["out_of_place"] for r in json.load(open(f))["results"]
                    if r.get("out_of_place")}
    d, q = by(direct), by(fifo)
    for size in sorted(set(d) & set(q)):
        print(f"all_reduce 2 thread ranks {size:>10d} B: direct {d[size]['busbw_gbps']:8.1f} GB/s "
              f"{d[size]['time_us']:9.2f} us, FIFO {q[size]['busbw_gbps']:8.1f} GB/s "
              f"{q[size]['time_us']:9.2f} us")
lat = os.path.join(out, "all_reduce.threads2.latency.json")
if os.path.exists(lat):
    eight = [r for r in json.load(open(lat))["results"] if r["size"] == 8]
    if eight:
        print(f"all_reduce 2 thread ranks 8 B: {eight[0]['out_of_place']['time_us']:.2f} us")
PY
fi
# ---- results file: every step's verdict and the headline figures ----------------------
if command -v python3 >/dev/null; then
  built_from=$(cat "$build/BUILT_FROM" 2>/dev/null || git -C "$root" describe --always --dirty 2>/dev/null)
  python3 - "$out" "$built_from" <<'PY' || true
import glob, json, os, re, sys
out, commit = sys.argv[1], sys.argv[2]
res = {"commit": commit, "steps": {}, "figures": {}}
machine = os.path.join(out, "machine.txt")
if os.path.exists(machine):
    res["device"] = open(machine).read().splitlines()[:2]
for line in open(os.path.join(out, "summary.txt")):
    m = re.match(r"(PASS|FAIL|TIMEOUT|SKIP)\s+(\S+)", line)
    if m:
        res["steps"][m.group(2)] = m.group(1)
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(f)[:-5]
    if name == "results":
        continue
    try:
        res["figures"][name] = json.load(open(f)).get("results")
    except (ValueError, AttributeError):
        pass
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
print("results file:", os.path.join(out, "results.json"))
PY
fi
note "# total $(($(date +%s) - start)) s; results in $out"
if ((failed)); then
  note "RESULT: FAILED (see the logs above)"
  exit 1
fi
note "RESULT: passed"
