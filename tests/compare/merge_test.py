#!/usr/bin/env python3
"""Runs perf/compare/merge.py on small synthetic inputs and checks its medians, ratios,
table, targets, missing points and plots against values computed here independently.
usage: merge_test.py path/to/merge.py   (exit 77 = plots not checked: no matplotlib)"""
import json
import os
import subprocess
import sys
import tempfile

MIB = 1 << 20


def place(t, samples=None):
    p = {"time_us": t, "algbw_gbps": 0, "busbw_gbps": 0, "wrong": None}
    if samples is not None:
        p["samples_us"] = samples
    return p


def braid_doc(coll, nranks, nprocs, rows):
    """rows: (size, oop time, ip time) repeated once per -N cycle."""
    return {"tool": "braid-perf", "program": coll + "_perf", "collective": coll,
            "nranks": nranks, "nprocs": nprocs, "nthreads": nranks // nprocs, "ngpus": 1,
            "results": [{"size": s, "count": s // 4, "type": "float", "redop": "sum",
                         "root": -1, "out_of_place": place(o), "in_place": place(i)}
                        for s, o, i in rows]}


def peer_doc(lib, alg, coll, nranks, rows):
    """rows: (size, oop samples or None, ip samples or None, error or None)."""
    out = []
    for s, oop, ip, err in rows:
        r = {"size": s, "count": s // 4, "type": "float", "redop": "sum", "root": -1,
             "out_of_place": place(sorted(oop)[len(oop) // 2], oop) if oop else None,
             "in_place": place(sorted(ip)[len(ip) // 2], ip) if ip else None}
        if err:
            r["error"] = err
        out.append(r)
    return {"tool": "braid-compare", "program": lib + "_bench", "library": lib,
            "algorithm": alg, "variant": "", "collective": coll, "nranks": nranks,
            "nprocs": nranks, "results": out}


def fail(msg):
    print("merge_test.py: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def close(a, b, what):
    if a is None or abs(a - b) > 1e-9 * max(1.0, abs(b)):
        fail("%s: got %r, expected %r" % (what, a, b))


def main():
    merge = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="merge_test_")
    S8, S1M, S32M = 8, MIB, 32 * MIB
    docs = {
        # Braid processes: 3 cycles; medians 8 B: 2.0, 1 MiB: 100, 32 MiB: 2000.
        "bp.json": braid_doc("all_reduce", 2, 2, [
            (S8, 2.0, 9.0), (S1M, 100.0, 1.0), (S32M, 2000.0, 1.0),
            (S8, 1.0, 9.0), (S1M, 300.0, 1.0), (S32M, 2100.0, 1.0),
            (S8, 50.0, 9.0), (S1M, 90.0, 1.0), (S32M, 1900.0, 1.0)]),
        # Braid threads: one cycle.
        "bt.json": braid_doc("all_reduce", 2, 1, [(S8, 4.0, 1.0), (S1M, 150.0, 1.0),
                                                 (S32M, 5000.0, 1.0)]),
        # Open MPI: medians 8 B: 3.0, 1 MiB: 400, 32 MiB: 9000.
        "mpi.json": peer_doc("openmpi", "default", "all_reduce", 2, [
            (S8, [3.0, 2.5, 30.0], None, None), (S1M, [400.0, 500.0, 100.0], None, None),
            (S32M, [9000.0, 9500.0, 8000.0], None, None)]),
        # Gloo ring: in-place only (old class); 1 MiB median 250 beats MPI; 32 MiB failed.
        "gloo.json": peer_doc("gloo", "ring_chunked", "all_reduce", 2, [
            (S8, None, [80.0], None), (S1M, None, [250.0, 260.0, 240.0], None),
            (S32M, None, None, "synthetic failure")]),
        # all_gather with 4 ranks: one size.
        "ag_bp.json": braid_doc("all_gather", 4, 4, [(S1M, 50.0, 1.0)]),
        "ag_mpi.json": peer_doc("openmpi", "default", "all_gather", 4,
                                [(S1M, [100.0], None, None)]),
        "membw.json": {"tool": "membw", "bytes": 1, "reps": 1,
                       "results": [{"threads": 1, "copy_gbps": 20.0},
                                   {"threads": 2, "copy_gbps": 40.0}]},
    }
    files = []
    for name, doc in docs.items():
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        files.append(path)
    out = os.path.join(tmp, "report")
    r = subprocess.run([sys.executable, merge, "--out", out] + files, capture_output=True,
                       text=True)
    print(r.stdout + r.stderr)
    if r.returncode != 0:
        fail("merge.py exited %d" % r.returncode)
    with open(os.path.join(out, "compare.json")) as f:
        res = json.load(f)
    ar = res["collectives"]["all_reduce"]["2"]
    if ar["sizes"] != [S8, S1M, S32M]:
        fail("sizes %r" % ar["sizes"])
    t = {name: s["time_us"] for name, s in ar["series"].items()}
    for name in ("braid-proc", "braid-thread", "openmpi", "gloo-ring_chunked"):
        if name not in t:
            fail("series %s missing: %r" % (name, sorted(t)))
    close(t["braid-proc"][0], 2.0, "braid-proc median at 8 B")
    close(t["braid-proc"][1], 100.0, "braid-proc median at 1 MiB")
    close(t["openmpi"][2], 9000.0, "openmpi median at 32 MiB")
    close(t["gloo-ring_chunked"][1], 250.0, "gloo in-place median at 1 MiB")
    if t["gloo-ring_chunked"][2] is not None:
        fail("failed gloo point has a time")
    # busbw = size / t * 2(n-1)/n = size / t for 2 ranks.
    close(ar["series"]["braid-proc"]["busbw_gbps"][2], S32M / 2000.0 / 1e3, "busbw 32 MiB")
    # Best peer and ratios.
    if ar["best_peer"] != ["openmpi", "gloo-ring_chunked", "openmpi"]:
        fail("best peer %r" % ar["best_peer"])
    close(ar["ratios"]["braid-proc"][0], 3.0 / 2.0, "ratio proc 8 B")
    close(ar["ratios"]["braid-proc"][1], 250.0 / 100.0, "ratio proc 1 MiB")
    close(ar["ratios"]["braid-proc"][2], 9000.0 / 2000.0, "ratio proc 32 MiB")
    close(ar["ratios"]["braid-thread"][1], 250.0 / 150.0, "ratio thread 1 MiB")
    ag = res["collectives"]["all_gather"]["4"]
    close(ag["ratios"]["braid-proc"][0], 2.0, "all_gather ratio")
    close(ag["series"]["braid-proc"]["busbw_gbps"][0], S1M / 50.0 / 1e3 * 0.75,
          "all_gather busbw with the (n-1)/n factor")
    # Targets.
    tg = {x["target"].split(":")[0]: x for x in res["targets"]}
    k = "all_reduce, 2 ranks, >= 16 MiB"
    close(tg[k]["measured"], 9000.0 / 5000.0, "target 16 MiB ratio (worst Braid series)")
    if tg[k]["met"] is not False:
        fail("1.8x must not meet the 2x target")
    k = "all_reduce, 2 ranks, largest size"
    close(tg[k]["measured"], (S32M / 5000.0 / 1e3) / (40.0 / 4), "memory-bound fraction")
    k = "all_reduce, 2 ranks, 8 B..4 KiB"
    close(tg[k]["measured"], 3.0 / 4.0, "small-size latency ratio")
    # Missing points.
    if not any(m["series"] == "gloo-ring_chunked" and m["size"] == S32M and
               "synthetic failure" in m["reason"] for m in res["missing"]):
        fail("the failed gloo point is not listed as missing: %r" % res["missing"])
    # Markdown table.
    md = open(os.path.join(out, "compare.md")).read()
    for needle in ("## all_reduce, 2 ranks", "## all_gather, 4 ranks",
                   "| 1 MiB | 10.5 | 6.99 | 4.19 | 2.62 | gloo-ring_chunked | 2.50x | 1.67x |",
                   "| 32 MiB | 16.8 | 6.71 | — | 3.73 | openmpi | 4.50x | 1.80x |",
                   "1 thread 20.0 GB/s, 2 threads 40.0 GB/s", "synthetic failure",
                   "| 8 B | 2.00 | 4.00 | 80.0 | 3.00 |"):
        if needle not in md:
            fail("compare.md lacks %r:\n%s" % (needle, md))
    # Plots.
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("merge_test.py: SKIP plot checks: matplotlib is not installed for %s" %
              sys.executable)
        sys.exit(77)
    for coll in ("all_reduce", "all_gather"):
        path = os.path.join(out, coll + ".png")
        if not os.path.exists(path):
            fail("plot %s missing" % path)
        with open(path, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                fail("%s is not a PNG" % path)
    if sorted(res["plots"]) != ["all_gather.png", "all_reduce.png"]:
        fail("plots listed: %r" % res["plots"])
    print("merge_test.py: OK")


if __name__ == "__main__":
    main()
