#!/usr/bin/env bash
# The main job: builds Braid (Release) and runs the perf suite for every collective on
# 4 local ranks (processes, host memory), nccl-tests style. Results: the tables on
# stdout and one JSON file per collective in build-perf/results/.
# Usage: scripts/run-perf.sh [extra perf flags, e.g. -e 64M]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=${BRAID_JOBS:-$(nproc)}
cmake -S . -B build-perf -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAID_BUILD_TESTS=OFF >/dev/null
cmake --build build-perf -j "$jobs"
mkdir -p build-perf/results
ranks=${BRAID_RANKS:-4}
for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv; do
  echo "== ${coll}_perf: ${ranks} ranks (processes), host memory =="
  build-perf/bin/braidrun -n "$ranks" -- build-perf/bin/${coll}_perf -b 8 -e 16M -f 4 -w 5 -n 20 \
    -c 1 -J "build-perf/results/${coll}.json" "$@"
done
