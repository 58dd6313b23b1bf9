#!/usr/bin/env python3
"""Merge the JSON files of one comparison run into a table, a JSON file and plots.

Inputs (any order, any number): Braid perf-suite files (`*_perf -J`, "tool": "braid-perf"),
peer benchmark files (mpi_bench / gloo_bench, "tool": "braid-compare") and membw files
("tool": "membw"). Output in --out: compare.md (markdown tables), compare.json (every
median, ratio and missing point) and <collective>.png (busbw and latency against size,
log-log, one column per rank count).

Series: Braid as processes ("braid-proc") and as threads ("braid-thread"); peers by
library and algorithm ("openmpi", "gloo-ring", "gloo-bcube", ...; "gloo" is Gloo's default
algorithm). Per series and size the time is the median of every sample (repetitions of
the sweep; several files for the same size are pooled). A row's time is its out-of-place
time, or its in-place time when it has no out-of-place form (old Gloo classes, MPI_Bcast
is reported out-of-place). busbw = size / time x the nccl-tests factor of the collective.
The ratio of a Braid series is best-peer time / Braid time at that size, which equals
Braid busbw / best-peer busbw (and stays defined at size 0).

usage: merge.py --out DIR file.json...
"""
import argparse
import json
import math
import os
import statistics
import sys

COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather", "alltoall", "broadcast", "reduce"]
BRAID_SERIES = ["braid-proc", "braid-thread"]


def bus_factor(coll, n):
    """nccl-tests busbw factors, as perf/table.cc."""
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll in ("reduce_scatter", "all_gather", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def series_name(doc):
    """Series label of one perf JSON document, or None when it is not a comparison input."""
    tool = doc.get("tool")
    if tool == "braid-perf":
        if doc.get("nprocs", 1) > 1:
            return "braid-proc"
        return "braid-thread"
    if tool == "braid-compare":
        lib = doc.get("library", "peer")
        alg = doc.get("algorithm", "default")
        return lib if alg in ("", "default") else "%s-%s" % (lib, alg)
    return None


def row_samples(row):
    """Time samples (us) of one row: out-of-place first, else in-place; [] when none."""
    for key in ("out_of_place", "in_place"):
        place = row.get(key)
        if not place or place.get("time_us") is None:
            continue
        samples = place.get("samples_us")
        if samples:
            return [float(s) for s in samples if s is not None]
        return [float(place["time_us"])]
    return []


def human_size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d B" % b


def fmt_bw(v):
    if v is None:
        return "—"
    if v == 0:
        return "0"
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    if v >= 0.1:
        return "%.2f" % v
    return "%.3g" % v


def fmt_ratio(r):
    return "—" if r is None else "%.2fx" % r


def fmt_us(t):
    if t is None:
        return "—"
    return "%.1f" % t if t >= 10 else "%.2f" % t


class Data:
    """Samples per (collective, nranks, series, size), membw and failures."""

    def __init__(self):
        self.samples = {}  # (coll, n) -> series -> size -> [us]
        self.missing = []  # dicts: coll, nranks, series, size, reason
        self.membw = {}  # threads -> GB/s
        self.sources = []

    def add_file(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.sources.append(os.path.basename(path))
        if doc.get("tool") == "membw":
            for r in doc.get("results", []):
                self.membw[int(r["threads"])] = float(r["copy_gbps"])
            return
        name = series_name(doc)
        if name is None:
            print("merge.py: %s: not a comparison input, ignored" % path, file=sys.stderr)
            return
        coll = doc["collective"]
        n = int(doc["nranks"])
        per = self.samples.setdefault((coll, n), {}).setdefault(name, {})
        for row in doc.get("results", []):
            size = int(row["size"])
            s = row_samples(row)
            if s:
                per.setdefault(size, []).extend(s)
            elif row.get("error") or not per.get(size):
                self.missing.append({"collective": coll, "nranks": n, "series": name,
                                     "size": size, "reason": row.get("error", "no result")})


def analyse(data):
    """Medians, busbw, best peer and ratios per (collective, nranks)."""
    out = {}
    for (coll, n), series in sorted(data.samples.items(),
                                    key=lambda kv: (COLLECTIVES.index(kv[0][0])
                                                    if kv[0][0] in COLLECTIVES else 99, kv[0][1])):
        sizes = sorted({s for per in series.values() for s in per})
        names = [b for b in BRAID_SERIES if b in series] + sorted(
            k for k in series if k not in BRAID_SERIES)
        entry = {"sizes": sizes, "series": {}, "best_peer": [], "best_peer_time_us": [],
                 "ratios": {}}
        for name in names:
            times, bws = [], []
            for size in sizes:
                samples = series[name].get(size)
                if not samples:
                    times.append(None)
                    bws.append(None)
                    continue
                t = statistics.median(samples)
                times.append(t)
                bws.append(size / t / 1e3 * bus_factor(coll, n) if t > 0 else 0.0)
            entry["series"][name] = {"time_us": times, "busbw_gbps": bws}
        peers = [k for k in names if k not in BRAID_SERIES]
        for i in range(len(sizes)):
            best, best_t = None, None
            for p in peers:
                t = entry["series"][p]["time_us"][i]
                if t is not None and (best_t is None or t < best_t):
                    best, best_t = p, t
            entry["best_peer"].append(best)
            entry["best_peer_time_us"].append(best_t)
        for b in BRAID_SERIES:
            if b not in entry["series"]:
                continue
            ratios = []
            for i in range(len(sizes)):
                t = entry["series"][b]["time_us"][i]
                bt = entry["best_peer_time_us"][i]
                ratios.append(bt / t if t and bt is not None else None)
            entry["ratios"][b] = ratios
        out.setdefault(coll, {})[str(n)] = entry
    return out


def targets(result, membw):
    """The issue's targets, judged on the medians: list of dicts."""
    rows = []

    def ratio_min(coll, n, lo=0, hi=float("inf")):
        e = result.get(coll, {}).get(str(n))
        if not e:
            return None
        vals = []
        for b, ratios in e["ratios"].items():
            vals += [r for s, r in zip(e["sizes"], ratios) if lo <= s <= hi and r is not None]
        return min(vals) if vals else None

    def add(name, value, goal, fmt):
        rows.append({"target": name, "measured": value, "goal": goal,
                     "met": None if value is None else value >= goal,
                     "text": "—" if value is None else fmt % value})

    add("all_reduce, 2 ranks, >= 16 MiB: Braid / best peer (worst size)",
        ratio_min("all_reduce", 2, lo=16 << 20), 2.0, "%.2fx")
    e = result.get("all_reduce", {}).get("2")
    frac = None
    if e and membw.get(2) and e["sizes"]:
        bound = membw[2] / 4.0  # 4n bytes of memory traffic for n bytes, busbw factor 1
        i = len(e["sizes"]) - 1
        bws = [e["series"][b]["busbw_gbps"][i] for b in BRAID_SERIES if b in e["series"]]
        bws = [v for v in bws if v is not None]
        if bws and e["sizes"][i] >= 16 << 20:
            frac = min(bws) / bound
    add("all_reduce, 2 ranks, largest size: busbw / memory-traffic bound (2-thread copy / 4)",
        frac, 0.7, "%.2f")
    add("all_reduce, 2 ranks, 8 B..4 KiB: Braid / best peer (worst size)",
        ratio_min("all_reduce", 2, hi=4096), 1.0, "%.2fx")
    for coll in COLLECTIVES[1:]:
        add("%s, 2 ranks, >= 1 MiB: Braid / best peer (worst size)" % coll,
            ratio_min(coll, 2, lo=1 << 20), 1.5, "%.2fx")
    worst4 = [ratio_min(c, 4) for c in COLLECTIVES]
    worst4 = [v for v in worst4 if v is not None]
    add("every collective, 4 ranks, every size: Braid / best peer (worst)",
        min(worst4) if worst4 else None, 1.0, "%.2fx")
    return rows


def markdown(result, data, target_rows):
    lines = ["# Braid vs Open MPI and Gloo (host memory, float32 sum)", ""]
    if data.membw:
        lines.append("Memory bandwidth (memcpy, bytes read + written): " + ", ".join(
            "%d thread%s %.1f GB/s" % (t, "" if t == 1 else "s", v)
            for t, v in sorted(data.membw.items())) + ".")
        lines.append("")
    lines += ["Cells are busbw in GB/s (nccl-tests definition), medians over repetitions; "
              "ratio = Braid busbw / best peer busbw at that size (> 1: Braid is faster).", ""]
    lines += ["## Targets", "", "| target | measured | goal | met |", "|---|---|---|---|"]
    for t in target_rows:
        met = "—" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append("| %s | %s | %s | %s |" % (t["target"], t["text"], t["goal"], met))
    lines.append("")
    for coll in [c for c in COLLECTIVES if c in result] + sorted(
            c for c in result if c not in COLLECTIVES):
        for n, e in sorted(result[coll].items(), key=lambda kv: int(kv[0])):
            names = list(e["series"])
            braids = [b for b in BRAID_SERIES if b in e["ratios"]]
            lines.append("## %s, %s ranks" % (coll, n))
            lines.append("")
            head = ["size"] + names + ["best peer"] + ["%s / best" % b for b in braids]
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "---:|" * len(head))
            for i, size in enumerate(e["sizes"]):
                cells = [human_size(size)]
                cells += [fmt_bw(e["series"][s]["busbw_gbps"][i]) for s in names]
                cells.append(e["best_peer"][i] or "—")
                cells += [fmt_ratio(e["ratios"][b][i]) for b in braids]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
            if coll == "all_reduce":
                small = [i for i, s in enumerate(e["sizes"]) if s <= 4096]
                if small:
                    lines.append("Latency, %s ranks, small sizes (us per operation):" % n)
                    lines.append("")
                    lines.append("| size | " + " | ".join(names) + " |")
                    lines.append("|" + "---:|" * (len(names) + 1))
                    for i in small:
                        lines.append("| %s | %s |" % (human_size(e["sizes"][i]), " | ".join(
                            fmt_us(e["series"][s]["time_us"][i]) for s in names)))
                    lines.append("")
    if data.missing:
        lines += ["## Missing points", "", "| collective | ranks | series | size | reason |",
                  "|---|---:|---|---:|---|"]
        for m in data.missing:
            lines.append("| %s | %d | %s | %s | %s |" % (m["collective"], m["nranks"], m["series"],
                                                      human_size(m["size"]),
                                                      str(m["reason"]).replace("|", "/")))
        lines.append("")
    return "\n".join(lines)


def plot(result, membw, out_dir):
    """One PNG per collective; returns the written paths ([] without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("merge.py: matplotlib missing, no plots (Debian: python3-matplotlib)",
              file=sys.stderr)
        return []
    paths = []
    for coll, per_n in result.items():
        ns = sorted(per_n, key=int)
        fig, axes = plt.subplots(2, len(ns), figsize=(6.5 * len(ns), 8.5), squeeze=False)
        for j, n in enumerate(ns):
            e = per_n[n]
            for k, (metric, label) in enumerate((("busbw_gbps", "busbw (GB/s)"),
                                                 ("time_us", "time per op (us)"))):
                ax = axes[k][j]
                for name, s in e["series"].items():
                    pts = [(x, y) for x, y in zip(e["sizes"], s[metric])
                           if x > 0 and y is not None and y > 0]
                    if not pts:
                        continue
                    braid = name in BRAID_SERIES
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name,
                            marker="o" if braid else ".", markersize=4 if braid else 3,
                            linewidth=2.2 if braid else 1.2, linestyle="-" if braid else "--")
                if metric == "busbw_gbps" and coll == "all_reduce" and n == "2" and membw.get(2):
                    ax.axhline(membw[2] / 4.0, color="grey", linestyle=":",
                               label="memory-traffic bound (2-thread copy / 4)")
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_xlabel("size (bytes)")
                ax.set_ylabel(label)
                ax.set_title("%s, %s ranks" % (coll, n))
                ax.grid(True, which="both", alpha=0.3)
                ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, "%s.png" % coll)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    data = Data()
    for path in args.files:
        try:
            data.add_file(path)
        except (OSError, ValueError, KeyError) as e:
            print("merge.py: %s: %s" % (path, e), file=sys.stderr)
            return 1
    if not data.samples:
        print("merge.py: no results in the inputs", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    result = analyse(data)
    target_rows = targets(result, data.membw)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(markdown(result, data, target_rows) + "\n")
    plots = [] if args.no_plots else plot(result, data.membw, args.out)
    doc = {"tool": "braid-compare-merge", "sources": data.sources, "membw_gbps": {
        str(k): v for k, v in sorted(data.membw.items())}, "targets": target_rows,
        "collectives": result, "missing": data.missing,
        "plots": [os.path.basename(p) for p in plots]}
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False)
    print("merge.py: %d series files -> %s (compare.md, compare.json, %d plots)" % (
        len(data.sources), args.out, len(plots)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
