#!/usr/bin/env bash
# The shaped two-node benchmark of the tuner: for one collective, every algorithm forced
# in turn (NCCL_ALGO=<coll>:<algo>, the list from braid-info) and once with the tuner
# choosing (NCCL_ALGO unset), on a namespace cluster whose inter-node links are shaped;
# then perf/tuner_table.py prints per size each algorithm's time, the tuner's, the best,
# and tuner/best, marking sizes where the tuner is more than 10% slower than the best.
#
#   scripts/run-multinode-bench.sh [--coll all_reduce] [--bin DIR] [--nodes 2] [--per 2]
#        [--rate 1gbit] [--delay 200us] [--out DIR] [--algos "ring tree"] [--threshold 0.10]
#        [--place out|in|min] [--repeat 3] [--prefix braidbench] [--no-probe]
#        [--no-calibrate] [-- perf args (one sweep instead of the two below)]
#
# Defaults: 2 nodes x 2 ranks, netem rate 1gbit delay 200us on each node's link (where
# the kernel lacks sch_netem: rate only, with a warning), and two sweeps per run of the
# perf program, together 8 B..64 MiB (x4): 8 B..128 KiB with -n 40 -w 10 (small sizes
# are noisy) and 512 KiB..64 MiB with -n 5 -w 2, both -c 1 (data checked). Every run is
# repeated --repeat times in interleaved rounds (round 1: every algorithm and the tuner,
# round 2: ...) so that load from elsewhere spreads over all of them; the table shows
# the median per size. The timed runs log nothing; one extra untimed "probe" run per
# algorithm (-n 1 -w 0 -c 0, NCCL_DEBUG_SUBSYS=TUNING) records which algorithm ran per
# size and what the tuner picked (--no-probe skips it).
# First the tuner's cost model is fitted to the cluster (sendrecv_perf inside a node
# and across nodes, perf/calibrate.py) and the tuner's runs load it through
# BRAID_TUNER_MODEL (--no-calibrate: the built-in defaults).
# Binaries: build-perf/bin (a Release build, built here when missing) or --bin. Results
# in --out (default build-perf/multinode-bench/<coll>): a JSON and a log per run,
# table.md and table.json. A failed run is retried once on a fresh cluster; the
# namespaces are removed at the end, also on failure or Ctrl-C.
set -u
cd "$(dirname "$0")/.." || exit 1
root=$(pwd)

coll=all_reduce
bin=""
calib=1
nodes=2
per=2
rate=1gbit
delay=200us
out=""
algos=""
threshold=0.10
place=out
repeat=3
prefix=braidbench
segments=("-b 8 -e 128K -f 4 -n 40 -w 10 -c 1" "-b 512K -e 64M -f 4 -n 5 -w 2 -c 1")
probe=1
while [ $# -gt 0 ]; do
  case "$1" in
    --coll) coll=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --no-calibrate) calib=0; shift ;;
    --nodes) nodes=$2; shift 2 ;;
    --per | --ranks-per-node) per=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --threshold) threshold=$2; shift 2 ;;
    --place) place=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --no-probe) probe=0; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --) shift; segments=("$*"); break ;;
    *) echo "run-multinode-bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
coll=${coll%_perf}
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || { echo "run-multinode-bench.sh: --repeat needs a count" >&2; exit 2; }
key=${coll//_/}
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() {
  echo "run-multinode-bench.sh: $*" >&2
  exit 1
}

# ---- binaries ------------------------------------------------------------------------
if [ -z "$bin" ]; then
  bin=$root/build-perf/bin
  if [ ! -x "$bin/${coll}_perf" ] || [ ! -x "$bin/braid-info" ]; then
    log "building the Release perf suite in build-perf/"
    cmake -S . -B build-perf -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAID_BUILD_TESTS=OFF \
      >/dev/null || die "cmake failed"
    cmake --build build-perf -j "${BRAID_JOBS:-$(nproc)}" --target "${coll}_perf" braid-info ||
      die "build failed"
  fi
fi
exe=$bin/${coll}_perf
[ -x "$exe" ] || die "$exe not found (--coll $coll, --bin $bin)"
[ -x "$bin/braid-info" ] || die "$bin/braid-info not found"
out=${out:-$root/build-perf/multinode-bench/$coll}
mkdir -p "$out" || die "cannot create $out"

# ---- algorithms (every one braid-info lists for the collective; not those that need
# the aggregation switch, marked [switch]: perf/net/collnet_shaped.sh measures them) ----
if [ -z "$algos" ]; then
  algos=$("$bin/braid-info" --brief | awk -v want="$key" '
    /^Algorithms/ { on = 1; next }
    on && /^  [A-Za-z]/ && !/\[switch\]/ {
      c = tolower($1); gsub(/_/, "", c); if (c == want) printf "%s ", $2 }')
fi
read -r -a algo_list <<<"$algos"
[ ${#algo_list[@]} -gt 0 ] || die "braid-info lists no algorithm for '$key'"

# ---- cluster ---------------------------------------------------------------------------
cluster() { bash scripts/netns-cluster.sh "$@" --prefix "$prefix"; }
checkmsg=$(bash scripts/netns-cluster.sh check --prefix "$prefix" 2>&1)
rc=$?
echo "$checkmsg" >&2
[ "$rc" -eq 0 ] || exit "$rc"
case "$checkmsg" in
  *"with netem"*) shaper="netem" ;;
  *) shaper="no netem in this kernel: rate only (tbf), no delay" ;;
esac
trap 'cluster down >/dev/null 2>&1' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
up() { cluster up "$nodes" ${rate:+--rate "$rate"} ${delay:+--delay "$delay"} >&2; }
up || die "cannot make the cluster"

# run NAME SPEC ARGS: one perf run; NAME.json and NAME.log in $out; retried once.
run() {
  local name=$1 spec=$2 args=$3 rc again=""
  for _ in 1 2; do
    rm -f "$out/$name.json"
    log "$coll $name (NCCL_ALGO=${spec:-unset}) $args$again"
    again=" (attempt 2)"
    # shellcheck disable=SC2086  # args is a list of perf flags
    NCCL_ALGO="$spec" bash scripts/netns-run.sh --nodes "$nodes" --ranks-per-node "$per" \
      --prefix "$prefix" --timeout 1800 -- "$exe" $args -J "$out/$name.json" \
      >"$out/$name.log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && [ -s "$out/$name.json" ]; then
      grep '^\[0\] *[0-9]' "$out/$name.log" | sed 's/^\[0\] //' | awk '{ printf "    %s\n", $0 }' >&2
      return 0
    fi
    log "$name failed (exit $rc); last lines:"
    grep -v ' NCCL INFO ' "$out/$name.log" | tail -n 8 >&2
    # A fresh cluster for the retry (a failed run may leave a stuck rank behind).
    cluster down >/dev/null 2>&1
    up || die "cannot make the cluster again"
  done
  rm -f "$out/$name.json"
  return 1
}

# ---- calibration: the tuner's model fitted to this setup (perf/calibrate.py) -----------
# sendrecv between two ranks of one node and between two nodes; the tuner's runs then
# use the fitted model (BRAID_TUNER_MODEL), as a user would on a new cluster.
calibrate() {
  local sr=$bin/sendrecv_perf args="-b 1K -e 4M -f 4 -n 20 -w 5"
  [ -x "$sr" ] || { log "no $sr: tuner runs use the default model"; return 1; }
  # shellcheck disable=SC2086
  bash scripts/netns-run.sh --nodes 1 --ranks-per-node 2 --prefix "$prefix" --timeout 300 \
    -- "$sr" $args -J "$out/calib-intra.json" >"$out/calib-intra.log" 2>&1 || return 1
  # shellcheck disable=SC2086
  bash scripts/netns-run.sh --nodes 2 --ranks-per-node 1 --prefix "$prefix" --timeout 300 \
    -- "$sr" $args -J "$out/calib-inter.json" >"$out/calib-inter.log" 2>&1 || return 1
  python3 perf/calibrate.py --intra "$out/calib-intra.json" --inter "$out/calib-inter.json" \
    -o "$out/model.txt" || return 1
  log "calibrated cost model ($out/model.txt):"
  sed 's/^/    /' "$out/model.txt" >&2
}
if [ "$calib" = 1 ] && calibrate; then
  export BRAID_TUNER_MODEL=$out/model.txt
else
  log "tuner runs use the default cost model"
fi

table_args=()
tuner_args=()
failed=()
spec_of() { if [ "$1" = tuner ]; then echo ""; else echo "$key:$1"; fi; }
# Untimed probes: what ran at each size (forced algorithms that decline fall back).
if [ "$probe" = 1 ]; then
  for algo in "${algo_list[@]}" tuner; do
    for ((g = 0; g < ${#segments[@]}; g++)); do
      name="$algo.probe$g"
      if NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING run "$name" "$(spec_of "$algo")" \
          "${segments[$g]} -n 1 -w 0 -c 0"; then
        if [ "$algo" = tuner ]; then
          tuner_args+=(--tuner-log "$out/$name.log")
        else
          table_args+=("$algo=$out/$name.log")
        fi
      fi
    done
  done
fi
for ((round = 1; round <= repeat; round++)); do
  for algo in "${algo_list[@]}" tuner; do
    for ((g = 0; g < ${#segments[@]}; g++)); do
      name="$algo.$round.$g"
      if run "$name" "$(spec_of "$algo")" "${segments[$g]}"; then
        if [ "$algo" = tuner ]; then
          tuner_args+=(--tuner "$out/$name.json")
        else
          table_args+=("$algo=$out/$name.json")
        fi
      else
        failed+=("$name")
      fi
    done
  done
done
# An algorithm whose every run failed still gets a column (shown as missing).
for algo in "${algo_list[@]}"; do table_args+=("$algo=$out/$algo.none.log"); done
[[ " ${tuner_args[*]} " == *" --tuner "* ]] || die "every run of the tuner failed: no table"
[ ${#failed[@]} -eq 0 ] || log "runs that failed twice: ${failed[*]}"

title="### $coll: $nodes nodes x $per ranks, inter-node links rate ${rate:-unlimited}"
title+=" delay ${delay:-0} ($shaper); sweeps: $(printf '[%s] ' "${segments[@]}")"
title+="median of $repeat runs"
python3 perf/tuner_table.py "${tuner_args[@]}" \
  --threshold "$threshold" --place "$place" --title "$title" --json "$out/table.json" \
  "${table_args[@]}" | tee "$out/table.md"
status=${PIPESTATUS[0]}
log "results in $out (table.md, table.json, a JSON and a log per run)"
exit "$status"
