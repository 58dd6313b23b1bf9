#!/usr/bin/env python3
"""Compare the tuner's choice with every forced algorithm, size by size.

Input: perf-suite JSON files (`-J`), one per forced algorithm (NCCL_ALGO=<coll>:<algo>)
and one with the tuner choosing (NCCL_ALGO unset); optionally the runs' logs with
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, to show which algorithm actually ran (a forced
algorithm that declines a size falls back to another one) and what the tuner picked.

    tuner_table.py --tuner tuner.json [--tuner tuner.2.json ...] [--tuner-log tuner.log]
                   ring=ring.json [ring=ring.2.json] [ring=ring.log] tree=tree.json ...
                   [--threshold 0.10] [--place out|in|min] [--title TEXT] [--json OUT.json]

Prints a markdown table: per size, the time (us) of each algorithm, the tuner's time,
the best algorithm, and tuner/best; a size where the tuner is more than THRESHOLD
slower than the best is marked. Several files for one algorithm (repeated runs) and
several rows of one size (-N sweeps) give the median. scripts/run-multinode-bench.sh
drives it.
"""
import argparse
import json
import math
import os
import re
import sys

# TUNING log lines of rank 0 (the launcher prefixes "[0] "). Two formats are understood:
#   "AllReduce 4K B (2 nodes x 2): ring/Simple channels 1 ..."   (bytes: N, NK or NM)
#   "AllReduce count 1024: algorithm ring, 7 steps ..."           (count of floats)
_NEW = re.compile(r"NCCL INFO (\w+) (\d+)([KM]?) B \(.*?\): ([\w-]+)/(\w+)")
_OLD = re.compile(r"NCCL INFO (\w+) count (\d+): algorithm ([\w-]+)")
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20}


def used_algorithms(log_paths, coll_key):
    """{bytes: set(algorithm)} from rank 0's TUNING lines for the collective."""
    used = {}
    for path in log_paths:
        if os.path.exists(path):
            used_in(path, coll_key, used)
    return used


def used_in(log_path, coll_key, used):
    with open(log_path, errors="replace") as f:
        for line in f:
            if not line.startswith("[0] ") or "NCCL INFO" not in line:
                continue
            m = _NEW.search(line)
            if m:
                coll, size, algo = m.group(1), int(m.group(2)) * _UNIT[m.group(3)], m.group(4)
            else:
                m = _OLD.search(line)
                if not m:
                    continue
                coll, size, algo = m.group(1), int(m.group(2)) * 4, m.group(3)
            if coll.lower().replace("_", "") != coll_key:
                continue
            used.setdefault(size, set()).add(algo)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def load_times(paths, place):
    """({size: median time_us}, collective, first document) over perf JSON files."""
    samples, coll, first = {}, "", {}
    for path in paths:
        t, c, doc = load_samples(path, place)
        coll, first = coll or c, first or doc
        for size, xs in t.items():
            samples.setdefault(size, []).extend(xs)
    return {size: median(xs) for size, xs in samples.items()}, coll, first


def load_samples(path, place):
    """({size: [time_us, ...]}, collective, document) from one perf JSON file."""
    with open(path) as f:
        doc = json.load(f)
    times = {}
    for row in doc.get("results", []):
        t_out = (row.get("out_of_place") or {}).get("time_us")
        t_in = (row.get("in_place") or {}).get("time_us")
        if place == "out":
            t = t_out
        elif place == "in":
            t = t_in
        else:
            t = min(x for x in (t_out, t_in) if x is not None) if (t_out or t_in) else None
        if t is None or (isinstance(t, float) and math.isnan(t)):
            continue
        times.setdefault(row["size"], []).append(float(t))
    return times, doc.get("collective", ""), doc


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def fmt_time(t):
    if t is None:
        return "—"
    return "%.0f" % t if t >= 1000 else ("%.1f" % t if t >= 10 else "%.2f" % t)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tuner", required=True, action="append",
                   help="perf JSON of a run with NCCL_ALGO unset (repeatable)")
    p.add_argument("--tuner-log", action="append", default=[],
                   help="a log of a tuner run (TUNING lines): what it picked (repeatable)")
    p.add_argument("--threshold", type=float, default=0.10,
                   help="mark sizes where tuner/best - 1 exceeds this (default 0.10)")
    p.add_argument("--place", choices=("out", "in", "min"), default="out",
                   help="which time: out-of-place (default), in-place, or the smaller")
    p.add_argument("--title", default="", help="a line printed above the table")
    p.add_argument("--json", help="also write the table as JSON here")
    p.add_argument("algos", nargs="+", metavar="ALGO=FILE",
                   help="forced-algorithm results: ALGO=run.json, and ALGO=run.log for its log")
    return p.parse_args(argv)


def main(argv):
    a = parse_args(argv)
    runs = {}  # algo -> {"json": path, "log": path}
    order = []
    for spec in a.algos:
        if "=" not in spec:
            sys.exit("tuner_table.py: expected ALGO=FILE, got '%s'" % spec)
        name, path = spec.split("=", 1)
        if name not in runs:
            runs[name] = {"json": [], "log": []}
            order.append(name)
        if path.endswith(".log"):
            runs[name]["log"].append(path)
        else:
            runs[name]["json"].append(path)

    tuner_times, coll, tuner_doc = load_times(a.tuner, a.place)
    coll_key = coll.lower().replace("_", "")
    times, used, missing = {}, {}, []
    for name in order:
        paths = [p for p in runs[name]["json"] if os.path.exists(p)]
        if not paths:
            missing.append(name)
            times[name] = {}
            continue
        times[name], _, _ = load_times(paths, a.place)
        used[name] = used_algorithms(runs[name].get("log"), coll_key)
    tuner_used = used_algorithms(a.tuner_log, coll_key)

    sizes = sorted(set(tuner_times).union(*[set(t) for t in times.values()]))
    show_pick = bool(tuner_used)
    head = ["size"] + order + ["tuner"] + (["tuner picked"] if show_pick else []) + \
        ["best", "tuner/best", ""]
    out = []
    if a.title:
        out.append(a.title)
        out.append("")
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["---:"] * (len(head) - 1) + [":---"]) + "|")
    rows_json = []
    flagged = 0
    ratios = []
    for s in sizes:
        cells = [fmt_size(s)]
        best_name, best_t = None, None
        for name in order:
            t = times[name].get(s)
            cell = fmt_time(t)
            ran = used.get(name, {}).get(s)
            # A forced algorithm that declined this size ran as another one: say which.
            if t is not None and ran and name not in ran:
                cell += " (→%s)" % "+".join(sorted(ran))
            elif t is not None and (best_t is None or t < best_t):
                best_name, best_t = name, t
            cells.append(cell)
        tt = tuner_times.get(s)
        cells.append(fmt_time(tt))
        if show_pick:
            cells.append("+".join(sorted(tuner_used.get(s, []))) or "?")
        ratio = tt / best_t if (tt is not None and best_t) else None
        mark = ""
        if ratio is not None:
            ratios.append(ratio)
            if ratio > 1.0 + a.threshold:
                mark = "**tuner >%d%% slower**" % round(a.threshold * 100)
                flagged += 1
        cells += [best_name or "—", "%.2f" % ratio if ratio is not None else "—", mark]
        out.append("| " + " | ".join(cells) + " |")
        rows_json.append({"size": s, "times_us": {n: times[n].get(s) for n in order},
                          "tuner_us": tt, "tuner_picked": sorted(tuner_used.get(s, [])),
                          "best": best_name, "best_us": best_t, "ratio": ratio,
                          "ran_as": {n: sorted(used.get(n, {}).get(s, [])) for n in order}})
    out.append("")
    if ratios:
        gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        out.append("%s, %d ranks: tuner within %d%% of the best forced algorithm at %d of %d "
                   "sizes; geometric mean tuner/best %.3f; worst %.2f." %
                   (coll or "?", tuner_doc.get("nranks", 0), round(a.threshold * 100),
                    len(ratios) - flagged, len(ratios), gmean, max(ratios)))
    out.append("Times in us (%s), lower is better; best is the fastest forced algorithm that "
               "ran as itself; \"(→x)\" marks a forced algorithm that declined that size and "
               "fell back to x." % {"out": "out-of-place", "in": "in-place",
                                     "min": "min of out-of-place and in-place"}[a.place])
    if missing:
        out.append("No results (every run failed): %s." % ", ".join(missing))
    print("\n".join(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"collective": coll, "threshold": a.threshold, "place": a.place,
                       "algorithms": order, "missing": missing, "rows": rows_json,
                       "flagged": flagged}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
