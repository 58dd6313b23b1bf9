#!/usr/bin/env bash
# What the free collective mismatch check costs (docs/reliability.md): all-reduce on 2
# processes (braidrun, host memory) with the defaults (the check on) and with
# BRAID_CHECK=0, rounds interleaved so both see the same machine; 8 B, 1 MiB and 256 MiB.
# Prints, per size, the median (min-max) time per all-reduce of each setting and the
# ratio of the medians.
#
#   perf/check_cost.sh BUILD_DIR [ROUNDS (7)] [RANKS (2)]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [ROUNDS] [RANKS]" >&2; exit 2; }
bin=$(cd "$1" && pwd)/bin
rounds=${2:-7}
ranks=${3:-2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < rounds; i++)); do
  for cfg in default BRAID_CHECK=0; do
    for size in 8 1M 256M; do
      case $size in
        8) n=50000 w=1000 ;;
        1M) n=500 w=50 ;;
        *) n=10 w=2 ;;
      esac
      envs=()
      [ "$cfg" != default ] && envs=("$cfg")
      # The out-of-place time (us) of the one size line.
      t=$(env ${envs[@]+"${envs[@]}"} "$bin/braidrun" -n "$ranks" -- "$bin/all_reduce_perf" \
            -b "$size" -e "$size" -w "$w" -n "$n" -c 0 | awk '!/^#/ && NF > 6 { print $6; exit }')
      echo "$cfg $size $t" >> "$out"
    done
  done
done
python3 - "$out" "$rounds" "$ranks" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"# all-reduce, {sys.argv[3]} processes, {sys.argv[2]} interleaved rounds: median (min-max) us")
print(f"{'size':>6} {'default (check on)':>26} {'BRAID_CHECK=0':>26} {'on/off':>7}")
for size in ("8", "1M", "256M"):
    med = {}
    cells = []
    for cfg in ("default", "BRAID_CHECK=0"):
        ts = [float(r[2]) for r in rows if r[0] == cfg and r[1] == size]
        med[cfg] = statistics.median(ts)
        cells.append(f"{med[cfg]:.2f} ({min(ts):.2f}-{max(ts):.2f})")
    print(f"{size:>6} {cells[0]:>26} {cells[1]:>26} {med['default'] / med['BRAID_CHECK=0']:>7.3f}")
PY
