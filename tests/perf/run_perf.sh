#!/usr/bin/env bash
# Runs one perf-suite command and judges its output (used by tests/perf.cmake).
#   run_perf.sh pass    -- command...   exit 0, result rows, every #wrong 0, "... : 0 OK"
#   run_perf.sh corrupt -- command...   with BRAID_PERF_CORRUPT=1: nonzero exit and a #wrong > 0
#   run_perf.sh json FILE -- command... as pass, and FILE is JSON with the same rows, 0 wrong
set -u
mode=$1
shift
json=""
if [ "$mode" = json ]; then
  json=$1
  shift
  rm -f "$json"
fi
[ "${1:-}" = "--" ] && shift
fail() {
  echo "run_perf.sh: FAIL ($mode): $*" >&2
  exit 1
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ "$mode" = corrupt ]; then export BRAID_PERF_CORRUPT=1; else unset BRAID_PERF_CORRUPT; fi
"$@" >"$out" 2>&1
rc=$?
cat "$out"
# Result rows: 13 columns; field 9 and 13 are the out-of-place and in-place #wrong.
rows=$(awk '!/^#/ && NF == 13 && $1 ~ /^[0-9]+$/' "$out" | wc -l)
wrongrows=$(awk '!/^#/ && NF == 13 && $1 ~ /^[0-9]+$/ &&
                 (($9 != "N/A" && $9 + 0 > 0) || ($13 != "N/A" && $13 + 0 > 0))' "$out" | wc -l)
case "$mode" in
  pass | json)
    [ "$rc" -eq 0 ] || fail "exit code $rc"
    [ "$rows" -gt 0 ] || fail "no result rows"
    [ "$wrongrows" -eq 0 ] || fail "$wrongrows rows with wrong elements"
    grep -q '^# Out of bounds values : 0 OK' "$out" || fail "no '0 OK' summary"
    grep -q '^# Avg bus bandwidth' "$out" || fail "no average bus bandwidth line"
    ;;
  corrupt)
    [ "$rc" -ne 0 ] || fail "exit code 0 although a result was corrupted"
    [ "$wrongrows" -gt 0 ] || fail "no row reports #wrong > 0"
    grep -q '^# Out of bounds values : [1-9][0-9]* FAILED' "$out" || fail "no FAILED summary"
    ;;
  *) fail "unknown mode" ;;
esac
if [ -n "$json" ]; then
  python3 - "$json" "$rows" <<'PY' || fail "bad JSON file $json"
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
rows = d["results"]
assert len(rows) == int(sys.argv[2]), (len(rows), sys.argv[2])
assert d["wrong_total"] == 0, d["wrong_total"]
for r in rows:
    for k in ("size", "count", "type", "redop", "root", "out_of_place", "in_place"):
        assert k in r, k
    assert r["out_of_place"]["wrong"] == 0
    assert r["out_of_place"]["time_us"] > 0
print("JSON ok:", len(rows), "rows, avg busbw", d["avg_busbw_gbps"])
PY
fi
echo "run_perf.sh: ok ($mode, $rows rows)"
