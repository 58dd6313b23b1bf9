#!/usr/bin/env bash
# One multinode test: a collective perf program on a namespace cluster, once per
# algorithm of that collective (forced through NCCL_ALGO, as braid-info lists them) and
# once with the tuner's choice, every run with data checks (-c 1). Each run must exit 0,
# report 0 wrong elements, and use shm between ranks of one node and sockets between
# nodes (from the NCCL_DEBUG_SUBSYS=INIT transport lines). An algorithm that declines
# the layout falls back (the library warns): still a pass when the data is right.
#
#   mn_perf.sh --scripts DIR --bin DIR --info BRAID_INFO --prefix P --nodes N --per M
#              [--placement block|cyclic] [--rate R] [--delay D] [--algos "a b"|tuner]
#              [--env NAME=VALUE]...  (extra environment of every rank)
#              coll [coll...]       (perf program names without _perf: all_reduce ...)
#              [-- perf args...]    (default: -b 8 -e 2M -f 8 -n 1 -w 0 -c 1)
# Exit: 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
here=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=""
bin=""
info=""
PREFIX=""
nodes=2
per=2
placement=block
shaping=()
algos_override=""
colls=()
perf_args=(-b 8 -e 2M -f 8 -n 1 -w 0 -c 1)
extra_env=()
while [ $# -gt 0 ]; do
  case "$1" in
    --scripts) SCRIPTS=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --info) info=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --per) per=$2; shift 2 ;;
    --placement) placement=$2; shift 2 ;;
    --rate | --delay) shaping+=("$1" "$2"); shift 2 ;;
    --algos) algos_override=$2; shift 2 ;;
    --env) extra_env+=("$2"); shift 2 ;;
    --) shift; perf_args=("$@"); break ;;
    -*) echo "mn_perf.sh: unknown option $1" >&2; exit 2 ;;
    *) colls+=("$1"); shift ;;
  esac
done
# shellcheck source=tests/multinode/mn_lib.sh
. "$here/mn_lib.sh"
[ -n "$SCRIPTS" ] && [ -n "$bin" ] && [ -n "$info" ] && [ -n "$PREFIX" ] && [ ${#colls[@]} -gt 0 ] ||
  mn_fail "usage: see the header of $0"

mn_require_netns
mn_up "$nodes" "${shaping[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"; bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" >/dev/null 2>&1' EXIT
failures=()
summary=()
runs=0
for coll in "${colls[@]}"; do
  exe="$bin/${coll}_perf"
  [ -x "$exe" ] || mn_fail "$exe is not built"
  key=${coll//_/}
  if [ -n "$algos_override" ]; then
    read -r -a algos <<<"$algos_override"
  else
    mapfile -t algos < <(mn_algorithms "$info" "$key")
    [ ${#algos[@]} -gt 0 ] || mn_fail "braid-info lists no algorithm for '$key'"
    algos+=(tuner)
  fi
  for algo in "${algos[@]}"; do
    runs=$((runs + 1))
    log="$work/$coll.$algo.log"
    if [ "$algo" = tuner ]; then spec=""; else spec="$key:$algo"; fi
    start=$SECONDS
    env "${extra_env[@]}" NCCL_ALGO="$spec" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
      BRAID_TIMEOUT_MS=60000 BRAID_BOOTSTRAP_TIMEOUT_MS=60000 \
      bash "$SCRIPTS/netns-run.sh" --nodes "$nodes" --ranks-per-node "$per" \
      --placement "$placement" --prefix "$PREFIX" --timeout 150 -- \
      "$exe" "${perf_args[@]}" >"$log" 2>&1
    rc=$?
    verdict=""
    if [ "$rc" -ne 0 ]; then
      verdict="exit code $rc"
    elif ! v=$(mn_judge "$log"); then
      verdict=$v
    elif ! t=$(mn_transports "$log" "$nodes" "$per" "$placement"); then
      verdict=$t
    fi
    used=$(mn_algorithms_used "$log" "$key")
    fallback=""
    grep -q 'allows no algorithm' "$log" && fallback=" (fell back for some sizes)"
    line="$coll NCCL_ALGO=${spec:-<tuner>}: used [${used% }]$fallback, $((SECONDS - start))s"
    if [ -n "$verdict" ]; then
      failures+=("$line: $verdict")
      echo "---- FAILED: $line: $verdict; log:"
      grep -v ' NCCL INFO ' "$log" | tail -n 60
      grep ' NCCL WARN \|error\|Error' "$log" | head -n 20
    else
      summary+=("ok   $line; $v; $t")
    fi
  done
done
echo "== ${nodes} nodes x ${per} ranks ($placement) ${shaping[*]} ${extra_env[*]}" \
  "${perf_args[*]}: $runs runs"
for s in "${summary[@]}"; do echo "$s"; done
for f in "${failures[@]}"; do echo "FAIL $f"; done
[ ${#failures[@]} -eq 0 ] || exit 1
echo "PASS"
