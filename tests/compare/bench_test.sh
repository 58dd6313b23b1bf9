#!/usr/bin/env bash
# Runs a peer benchmark with 2 ranks on tiny sizes and validates what it writes.
#   bench_test.sh pass|corrupt mpi  MPIRUN   MPI_BENCH  PYTHON
#   bench_test.sh pass|corrupt gloo BRAIDRUN GLOO_BENCH PYTHON
# pass: exit 0, one JSON file per collective (and Gloo algorithm) in Braid's -J schema
# with every size 8 B..4 KiB, positive times, 0 wrong elements. corrupt (-K 1): the
# result check must report wrong elements and fail. zero (gloo only): 4 ranks, 8 B
# all_gather = 0 elements per rank, which Gloo cannot run: recorded as an error row,
# no crash. Exit 77 (skip) when not built.
set -u
mode=$1 kind=$2 launcher=$3 bench=$4 python=${5:-python3}
skip() {
  echo "bench_test.sh: SKIP: $*"
  exit 77
}
fail() {
  echo "bench_test.sh: FAIL ($kind $mode): $*" >&2
  exit 1
}
[ -n "$bench" ] && [ -x "$bench" ] || skip "the ${kind}_bench benchmark was not built" \
  "(needs perf/CMakeLists.txt add_subdirectory(compare) and the library: libopenmpi-dev / libgloo-dev)"
[ -n "$launcher" ] && [ -x "$(command -v "$launcher")" ] || skip "no launcher for $kind ('$launcher')"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-b 8 -e 4K -f 2 -n 2 -w 1 -N 1 -c 1 -I 1 -J "$tmp/out_")
[ "$mode" = corrupt ] && flags+=(-K 1)
if [ "$mode" = zero ]; then
  mkdir "$tmp/store"
  timeout 100 "$launcher" -n 4 -- "$bench" -S "$tmp/store" -C all_gather -b 8 -e 16 -n 1 -w 0 \
    -N 1 -J "$tmp/out_" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "exit code $?"; }
  cat "$tmp/log"
  "$python" - "$tmp/out_all_gather.json" <<'EOF' || fail "JSON validation"
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
assert [r["size"] for r in rows] == [0, 16], rows
assert "0 elements per rank" in rows[0]["error"] and rows[0]["out_of_place"] is None, rows[0]
assert "error" not in rows[1] and rows[1]["out_of_place"]["wrong"] == 0, rows[1]
EOF
  echo "bench_test.sh: OK ($kind $mode)"
  exit 0
fi
if [ "$kind" = mpi ]; then
  cmd=("$launcher" --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader "$bench" "${flags[@]}")
else
  mkdir "$tmp/store"
  cmd=("$launcher" -n 2 -- "$bench" -S "$tmp/store" "${flags[@]}")
fi
timeout 100 "${cmd[@]}" >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
if [ "$mode" = corrupt ]; then
  [ "$rc" -ne 0 ] || fail "exit 0 although results were corrupted"
  grep -q "WRONG RESULTS" "$tmp/log" || fail "no row reports wrong results"
  exit 0
fi
[ "$rc" -eq 0 ] || fail "exit code $rc"
if [ "$kind" = mpi ]; then
  expect="all_reduce reduce_scatter all_gather alltoall broadcast reduce"
else
  expect="all_reduce.ring all_reduce.bcube all_reduce.ring_chunked all_reduce.halving_doubling
          reduce_scatter.halving_doubling all_gather alltoall broadcast
          broadcast.one_to_all reduce"
fi
"$python" - "$tmp" "$kind" $expect <<'EOF' || fail "JSON validation"
import json, os, sys
tmp, kind, expect = sys.argv[1], sys.argv[2], sys.argv[3:]
lib = {"mpi": "openmpi", "gloo": "gloo"}[kind]
sizes = [8 << i for i in range(10)]  # 8 B .. 4 KiB
found = sorted(f for f in os.listdir(tmp) if f.startswith("out_"))
want = sorted("out_%s.json" % e for e in expect)
assert found == want, "files %r, expected %r" % (found, want)
factor = {"all_reduce": 1.0, "reduce_scatter": 0.5, "all_gather": 0.5, "alltoall": 0.5,
          "broadcast": 1.0, "reduce": 1.0}
for name in found:
    doc = json.load(open(os.path.join(tmp, name)))
    coll = name[4:-5].split(".")[0]
    assert doc["library"] == lib and doc["collective"] == coll, name
    assert doc["nranks"] == 2 and doc["tool"] == "braid-compare", name
    assert doc["wrong_total"] == 0, "%s: %r wrong" % (name, doc["wrong_total"])
    rows = doc["results"]
    # The size column is the requested size rounded down to whole per-rank blocks.
    block = 8 if coll in ("reduce_scatter", "all_gather", "alltoall") else 4
    assert [r["size"] for r in rows] == [s // block * block for s in sizes], name
    for r in rows:
        assert "error" not in r, "%s: %s" % (name, r.get("error"))
        places = [p for p in (r["out_of_place"], r["in_place"]) if p]
        assert places, "%s size %d: no result" % (name, r["size"])
        for p in places:
            assert p["time_us"] > 0 and p["wrong"] == 0, (name, r)
            assert len(p["samples_us"]) == 1, (name, r)
            bus = r["size"] / p["time_us"] / 1e3 * factor[coll]
            assert abs(p["busbw_gbps"] - bus) <= 1e-3 * bus + 1e-6, (name, r, bus)
print("bench_test.sh: %d files valid" % len(found))
EOF
echo "bench_test.sh: OK ($kind $mode)"
