#!/usr/bin/env bash
# In-network all-reduce against the host algorithms on a shaped namespace cluster: the
# all_reduce_perf algbw of collnet_chain, collnet_direct (through a braid-switch in the
# hub namespace), ring, tree and hier, and the tuner's choice, per size, on 4 nodes x 1
# rank and 2 nodes x 2 ranks.
#
#   perf/net/collnet_shaped.sh [--bin DIR] [--out DIR] [--rate R] [--delay D]
#       [--hub-rate R] [--repeat N] [--layouts "4x1 2x2"]
#       [--algos "collnet_chain collnet_direct ring tree hier tuner"] [--prefix P]
#       [-- perf args]          (default: -b 1M -e 64M -f 2 -n 3 -w 1 -c 0)
#
# Shaping (scripts/netns-cluster.sh): --rate R and --delay D on every node's link,
# --hub-rate R (default: --rate) on the hub's port towards each node, as a real switch
# port: every algorithm of a run sees the same links, the switch's own traffic included.
# What the traffic allows: with the switch every node sends and receives the message
# once, so algbw can reach the link rate; a ring over N nodes sends 2(N-1)/N times the
# message per node (4x1: algbw <= 0.67 of the link; 2x2, a ring of 4 ranks crossing
# between the nodes twice: also 0.67; hier on 2 nodes: 1.0).
#
# Defaults: 200mbit, 100us (the delay needs sch_netem; without it the script warns and
# shapes the rate only). Why 200mbit and not faster: on a 2-core machine the links must
# stay the bottleneck, not the CPUs or the queues. Measured here on 4x1 at 8 MiB, one
# rate after the other, with other builds running (load 8): at --rate 20gbit (the CPU
# limits, not the link) ring 0.113 GB/s and collnet_chain 0.087 GB/s; at 500mbit
# (0.0625 GB/s) both only 0.021 GB/s, 0.34 of the link, half of ring's bound although
# the CPU could do 4x more; at 200mbit ring 0.58 of the link (its bound: 0.67) and
# collnet_chain 0.62. At 200mbit the full run (3 rounds) should take 40-50 minutes
# (estimated from shorter runs). On another machine try a few --rate values: the rate
# is right where ring's algbw / link is near its bound.
#
# Every run is repeated --repeat times (default 3) in interleaved rounds (round 1: every
# layout and algorithm, round 2: ...) so that load from elsewhere spreads over all of
# them; the table shows medians. Every run has NCCL_COLLNET_ENABLE=1 and the switch, so
# the tuner may pick it too; the ranks log their TUNING lines (once per size, at plan
# time, nothing in the timed loop), which record what actually ran: a forced algorithm
# that declined a size and fell back is marked "(->x)" and not counted as itself.
#
# Output in --out (default build/collnet-shaped): runs.csv (one row per layout,
# algorithm, round and size), medians.csv, table.md (printed too), a log per run.
# Plot: /usr/bin/python3 perf/net/plot_collnet.py OUT/runs.csv docs/img/collnet_shaped.png
# Needs root (network namespaces); the namespaces and the switch are removed at the end,
# also on failure or Ctrl-C.
set -u
cd "$(dirname "$0")/../.." || exit 1

bin=build/bin
out=build/collnet-shaped
rate=200mbit
delay=100us
hub_rate=""
repeat=3
layouts="4x1 2x2"
algos="collnet_chain collnet_direct ring tree hier tuner"
prefix=braidcoll
perf_args=(-b 1M -e 64M -f 2 -n 3 -w 1 -c 0)
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --hub-rate) hub_rate=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --layouts) layouts=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
      exit 0 ;;
    --) shift; perf_args=("$@"); break ;;
    *) echo "collnet_shaped.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
hub_rate=${hub_rate:-$rate}
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() {
  echo "collnet_shaped.sh: $*" >&2
  exit 1
}
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat needs a count"
for f in all_reduce_perf braid-switch; do [ -x "$bin/$f" ] || die "$bin/$f is not built"; done
read -r -a layout_list <<<"$layouts"
read -r -a algo_list <<<"$algos"
max_nodes=0
for l in "${layout_list[@]}"; do
  [[ "$l" =~ ^([2-9]|[1-9][0-9])x([1-9][0-9]*)$ ]] ||
    die "bad layout '$l' (NODESxRANKS, 2 nodes or more)"
  [ "${BASH_REMATCH[1]}" -gt "$max_nodes" ] && max_nodes=${BASH_REMATCH[1]}
done
mkdir -p "$out" || die "cannot create $out"

# ---- cluster and switch (one cluster of the most nodes; smaller layouts use its first) --
sw_pid=""
cleanup() {
  [ -n "$sw_pid" ] && { kill -9 "$sw_pid"; wait "$sw_pid"; } 2>/dev/null
  bash scripts/netns-cluster.sh down --prefix "$prefix" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
shaping=(--rate "$rate" --hub-rate "$hub_rate")
[ -n "$delay" ] && shaping+=(--delay "$delay")  # --delay "": none
bash scripts/netns-cluster.sh up "$max_nodes" "${shaping[@]}" --prefix "$prefix" ||
  die "netns-cluster.sh up failed"
ip netns exec "${prefix}-hub" "$bin/braid-switch" --listen 10.77.0.254:0 --quiet \
  >"$out/switch.out" 2>"$out/switch.err" &
sw_pid=$!
for ((t = 0; t < 100; t++)); do
  grep -q 'listening on' "$out/switch.out" && break
  sleep 0.1
done
switch_addr=$(awk '/listening on/ { print $NF; exit }' "$out/switch.out")
[ -n "$switch_addr" ] || { cat "$out/switch.err"; die "braid-switch did not start"; }
log "braid-switch on $switch_addr; links $rate${delay:+ delay $delay}, hub ports $hub_rate"

# ---- runs ----------------------------------------------------------------------------------
csv=$out/runs.csv
echo "layout,nodes,per,algo,round,bytes,time_us,algbw_gbs,inplace_time_us,inplace_algbw_gbs,\
ran,rate,link_gbs" >"$csv"
link_gbs=$(python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmgt]?)(bit|bps)?", sys.argv[1].lower())
v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
print(v / 1e9 if m.group(3) == "bps" else v / 8e9)' "$rate") || die "cannot read --rate $rate"
failed=0
for ((round = 1; round <= repeat; round++)); do
  for l in "${layout_list[@]}"; do
    nodes=${l%x*} per=${l#*x}
    for algo in "${algo_list[@]}"; do
      if [ "$algo" = tuner ]; then spec=""; else spec="allreduce:$algo"; fi
      runlog=$out/$l.$algo.r$round.log
      log "round $round/$repeat: $l ${spec:-tuner}"
      NCCL_COLLNET_ENABLE=1 BRAID_SWITCH="$switch_addr" NCCL_ALGO="$spec" \
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING \
        bash scripts/netns-run.sh --nodes "$nodes" --ranks-per-node "$per" --prefix "$prefix" \
        --timeout 1800 -- "$bin/all_reduce_perf" "${perf_args[@]}" >"$runlog" 2>&1
      rc=$?
      if [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
        log "FAILED (exit $rc): $runlog"
        grep -v ' NCCL INFO ' "$runlog" | tail -n 8 >&2
        continue
      fi
      # Rank 0's rows, and per size what its TUNING lines say ran (out of place first).
      awk -v l="$l" -v n="$nodes" -v p="$per" -v a="$algo" -v r="$round" -v rate="$rate" \
          -v link="$link_gbs" '
        function bytes(s,  m) {
          m = 1
          if (s ~ /K$/) m = 1024; else if (s ~ /M$/) m = 1048576; else if (s ~ /G$/) m = 1073741824
          sub(/[KMG]$/, "", s)
          return s * m
        }
        $1 == "[0]" && / NCCL INFO AllReduce / {
          for (i = 1; i < NF; i++) if ($i == "AllReduce") break
          if ($(i + 2) != "B") next
          b = bytes($(i + 1))
          if (match($0, /\): [A-Za-z0-9_]+\//)) {
            alg = substr($0, RSTART + 3, RLENGTH - 4)
            if (!(b in ran)) ran[b] = alg
            else if (index(" " ran[b] " ", " " alg " ") == 0) ran[b] = ran[b] " " alg
          }
          next
        }
        $1 == "[0]" && NF == 14 && $2 ~ /^[0-9]+$/ {
          # algbw from the time: the printed one has two decimals (0.06 GB/s at 500mbit).
          rows[++nr] = sprintf("%s,%d,%d,%s,%d,%s,%s,%.5f,%s,%.5f", l, n, p, a, r, $2, $7,
                               $7 > 0 ? $2 / ($7 * 1e3) : 0, $11, $11 > 0 ? $2 / ($11 * 1e3) : 0)
          size[nr] = $2
        }
        END {
          for (i = 1; i <= nr; i++)
            printf "%s,%s,%s,%s\n", rows[i], (size[i] in ran) ? ran[size[i]] : "?", rate, link
        }' "$runlog" >>"$csv"
    done
  done
done
kill -TERM "$sw_pid" 2>/dev/null
wait "$sw_pid" 2>/dev/null
sw_pid=""

# ---- medians and the table -------------------------------------------------------------------
python3 - "$csv" "$out/medians.csv" "$rate" "$hub_rate" "$delay" >"$out/table.md" <<'PY'
import csv
import statistics
import sys

runs, med_path, rate, hub_rate, delay = sys.argv[1:6]
rows = list(csv.DictReader(open(runs)))
if not rows:
    print("no results")
    sys.exit(0)
link = float(rows[0]["link_gbs"])
data = {}  # (layout, algo, bytes) -> [algbw], ran set
ran = {}
order_l, order_a = [], []
for r in rows:
    k = (r["layout"], r["algo"], int(r["bytes"]))
    data.setdefault(k, []).append(float(r["algbw_gbs"]))
    ran.setdefault(k, set()).update(r["ran"].split())
    if r["layout"] not in order_l:
        order_l.append(r["layout"])
    if r["algo"] not in order_a:
        order_a.append(r["algo"])
with open(med_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["layout", "algo", "bytes", "runs", "algbw_gbs_median", "algbw_over_link", "ran"])
    for (l, a, b), v in sorted(data.items(), key=lambda kv: (order_l.index(kv[0][0]),
                                                            order_a.index(kv[0][1]), kv[0][2])):
        m = statistics.median(v)
        w.writerow([l, a, b, len(v), f"{m:.4f}", f"{m / link:.3f}",
                    " ".join(sorted(ran[(l, a, b)]))])


def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


print(f"all_reduce_perf algbw (GB/s, median; out of place) and algbw / link rate; links "
      f"{rate} ({link:.4f} GB/s){', delay ' + delay if delay else ''}, hub ports {hub_rate}.\n")
for l in order_l:
    sizes = sorted({b for (ll, _, b) in data if ll == l})
    algs = [a for a in order_a if any((l, a, b) in data for b in sizes)]
    ratio = [c for c in ("collnet_chain", "collnet_direct") if c in algs] if "ring" in algs else []
    nodes, per = l.split("x")
    print(f"### {nodes} nodes x {per} rank(s)\n")
    print("| size | " + " | ".join(algs) + "".join(f" | {c} / ring" for c in ratio) + " |")
    print("|---" * (1 + len(algs) + len(ratio)) + "|")
    for b in sizes:
        cells, med = [], {}
        for a in algs:
            v = data.get((l, a, b))
            if not v:
                cells.append("-")
                continue
            m = statistics.median(v)
            ran_as = sorted(ran[(l, a, b)] - {"?"})
            fell = a != "tuner" and ran_as and ran_as != [a]
            med[a] = None if fell else m
            note = ""
            if a == "tuner" and ran_as:
                note = " " + "+".join(ran_as)
            elif fell:
                note = " (->" + "+".join(x for x in ran_as if x != a) + ")"
            cells.append(f"{m:.4f} ({m / link:.2f}){note}")
        for c in ratio:
            ok = med.get(c) is not None and med.get("ring")
            cells.append(f"{med[c] / med['ring']:.2f}" if ok else "-")
        print(f"| {size(b)} | " + " | ".join(cells) + " |")
    print()
PY
cat "$out/table.md"
log "results: $csv, $out/medians.csv, $out/table.md"
[ "$failed" -eq 0 ] || die "$failed run(s) failed (logs in $out)"
