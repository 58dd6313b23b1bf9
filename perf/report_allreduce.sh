#!/usr/bin/env bash
# Reproduces the all-reduce figures of docs/performance.md: the memory-bandwidth probe,
# then all_reduce_perf on 2 and 4 local processes (braidrun), float sum, 8 B .. 128 MiB (x4 steps),
# in one run. Tables and JSON go to $OUT (default build-perf/report), plus a PNG plot.
# Usage: perf/report_allreduce.sh [build dir, default build-perf]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build-perf}/bin
out=${OUT:-build-perf/report}
mkdir -p "$out"
"$bin/membw" | tee "$out/membw.txt"
for n in 2 4; do
  "$bin/braidrun" -n "$n" -- "$bin/all_reduce_perf" -b 8 -e 256M -f 4 -w 5 -n 20 -c 1 \
    -J "$out/all_reduce_${n}ranks.json" | tee "$out/all_reduce_${n}ranks.txt"
done
# Debian's python3 has python3-matplotlib (scripts/install-deps.sh); prefer it.
py=$(command -v /usr/bin/python3 || command -v python3)
"$py" perf/plot.py "$out/all_reduce.png" \
  "2 processes=$out/all_reduce_2ranks.json" "4 processes=$out/all_reduce_4ranks.json"
echo "plot: $out/all_reduce.png"
