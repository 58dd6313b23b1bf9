#!/usr/bin/env bash
# The multinode verdict can fail: with BRAID_PERF_CORRUPT=1 (the perf programs corrupt one
# checked element) a run on the namespace cluster must exit non-zero and the judge used by
# mn_perf.sh must report wrong elements.
#
#   mn_corrupt.sh --scripts DIR --bin DIR --prefix P [coll]
# Exit: 0 pass, 1 fail, 77 skipped (no namespaces here).
set -u
here=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=""
bin=""
PREFIX=""
coll=all_reduce
while [ $# -gt 0 ]; do
  case "$1" in
    --scripts) SCRIPTS=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --prefix) PREFIX=$2; shift 2 ;;
    -*) echo "mn_corrupt.sh: unknown option $1" >&2; exit 2 ;;
    *) coll=$1; shift ;;
  esac
done
# shellcheck source=tests/multinode/mn_lib.sh
. "$here/mn_lib.sh"
[ -n "$SCRIPTS" ] && [ -n "$bin" ] && [ -n "$PREFIX" ] || mn_fail "usage: see the header of $0"

mn_require_netns
mn_up 2
work=$(mktemp -d)
trap 'rm -rf "$work"; bash "$SCRIPTS/netns-cluster.sh" down --prefix "$PREFIX" >/dev/null 2>&1' EXIT
# --keep-going: the other ranks must not be stopped before rank 0 prints its summary.
BRAID_PERF_CORRUPT=1 bash "$SCRIPTS/netns-run.sh" --nodes 2 --ranks-per-node 2 \
  --prefix "$PREFIX" --keep-going --timeout 120 -- "$bin/${coll}_perf" -b 8 -e 64K -f 8 -n 1 -w 0 -c 1 \
  >"$work/log" 2>&1
rc=$?
grep -v ' NCCL INFO ' "$work/log" | tail -n 30
[ "$rc" -ne 0 ] || mn_fail "exit code 0 although a result was corrupted"
[ "$rc" -ne 124 ] || mn_fail "the run timed out"
if v=$(mn_judge "$work/log"); then mn_fail "the judge passed a corrupted run: $v"; fi
grep -q '^\[0\] # Out of bounds values : [1-9][0-9]* FAILED' "$work/log" ||
  mn_fail "no FAILED summary"
echo "PASS: corrupted run exits $rc and the judge says: $v"
