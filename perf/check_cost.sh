#!/usr/bin/env bash
# What the free collective mismatch check costs (docs/reliability.md): collectives on 2
# processes (braidrun, host memory) with the defaults (the check on) and with
# BRAID_CHECK=0, rounds interleaved so both see the same machine; all-reduce at 8 B,
# 1 MiB and 256 MiB unless told otherwise.
# Prints, per size, the median (min-max) time per all-reduce of each setting, the ratio
# of the medians and the median of the rounds' ratios (each round runs both settings
# back to back: the machine's drift between rounds cancels).
#
#   perf/check_cost.sh BUILD_DIR [ROUNDS (7)] [RANKS (2)]
#   SIZES="256M" perf/check_cost.sh ...   (default: "8 1M 256M")
#   COLLS="all_reduce broadcast reduce" perf/check_cost.sh ...   (default: all_reduce)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [ROUNDS] [RANKS]" >&2; exit 2; }
bin=$(cd "$1" && pwd)/bin
rounds=${2:-7}
ranks=${3:-2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < rounds; i++)); do
  for coll in ${COLLS:-all_reduce}; do
  for cfg in default BRAID_CHECK=0; do
    for size in ${SIZES:-8 1M 256M}; do
      case $size in
        8) n=200000 w=2000 ;;
        1M) n=500 w=50 ;;
        *) n=10 w=2 ;;
      esac
      envs=()
      [ "$cfg" != default ] && envs=("$cfg")
      # The out-of-place time (us) of the one size line.
      t=$(env ${envs[@]+"${envs[@]}"} "$bin/braidrun" -n "$ranks" -- "$bin/${coll}_perf" \
            -b "$size" -e "$size" -w "$w" -n "$n" -c 0 | awk '!/^#/ && NF > 6 { print $6; exit }')
      echo "$cfg $coll:$size $t" >> "$out"
    done
  done
  done
done
python3 - "$out" "$rounds" "$ranks" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"# {sys.argv[3]} processes, {sys.argv[2]} interleaved rounds: median (min-max) us")
print(f"{'collective:size':>18} {'default (check on)':>26} {'BRAID_CHECK=0':>26} {'on/off':>7} {'rounds':>7}")
for size in dict.fromkeys(r[1] for r in rows):
    med, ts, cells = {}, {}, []
    for cfg in ("default", "BRAID_CHECK=0"):
        ts[cfg] = [float(r[2]) for r in rows if r[0] == cfg and r[1] == size]
        med[cfg] = statistics.median(ts[cfg])
        cells.append(f"{med[cfg]:.2f} ({min(ts[cfg]):.2f}-{max(ts[cfg]):.2f})")
    paired = statistics.median(a / b for a, b in zip(ts["default"], ts["BRAID_CHECK=0"]))
    print(f"{size:>18} {cells[0]:>26} {cells[1]:>26} {med['default'] / med['BRAID_CHECK=0']:>7.3f} "
          f"{paired:>7.3f}")
PY
