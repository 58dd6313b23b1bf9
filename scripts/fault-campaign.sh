#!/usr/bin/env bash
# The fault campaign (issue 15): short jobs of 4 ranks as processes over host memory,
# each with one injected fault (a rank SIGKILLed before / during / right after each
# collective over shm and sockets, TCP connections reset, /dev/shm segments removed,
# braid-switch killed); prints one line per job and the table of outcomes
# (tests/reliability/). Exits non-zero on a hang, a leaked segment, wrong data or a
# survivor that did not fail within 2 x BRAID_TIMEOUT_MS.
# Usage: scripts/fault-campaign.sh [--timeout-ms 5000] [--only NAME,...] [-v]
#   BUILD_DIR=build-soak
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-soak}
if [ ! -f "$build/build.ninja" ]; then
  scripts/install-deps.sh
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRAID_BUILD_PERF=OFF >/dev/null
fi
cmake --build "$build" -j "${BRAID_JOBS:-$(nproc)}" --target braid_fault_campaign braid-switch
bin=$build/bin/braid_fault_campaign
exec "$bin" "$@"
