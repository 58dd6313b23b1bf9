#!/usr/bin/env bash
# The long soak (issue 15): braid_soak on 8 ranks as threads, then as processes, for
# SOAK_SECONDS each (default 600): random collectives, sizes, types, ops, groups and
# communicator splits, every result checked; RSS, open fds and /dev/shm segments
# sampled and required flat (tests/soak/). Prints each run's summary lines; exits
# non-zero if any run fails.
# Usage: scripts/run-soak.sh [extra braid_soak flags, e.g. --seed 3]
#   SOAK_SECONDS=600 SOAK_MODES="threads procs" BUILD_DIR=build-soak
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-soak}
seconds=${SOAK_SECONDS:-600}
modes=${SOAK_MODES:-threads procs}
if [ ! -f "$build/build.ninja" ]; then
  scripts/install-deps.sh
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRAID_BUILD_PERF=OFF >/dev/null
fi
cmake --build "$build" -j "${BRAID_JOBS:-$(nproc)}" --target braid_soak
bin=$build/bin/braid_soak
status=0
for mode in $modes; do
  echo "== braid_soak --mode $mode --ranks 8 --seconds $seconds $* =="
  "$bin" --mode "$mode" --ranks 8 --seconds "$seconds" "$@" || status=1
done
exit $status
