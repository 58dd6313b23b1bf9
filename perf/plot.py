#!/usr/bin/env python3
"""Plot perf-suite JSON results (written with -J): busbw and time against size.

usage: perf/plot.py OUT.png LABEL=results.json [LABEL=results.json ...]
Each file becomes one line per panel (out-of-place results). Needs matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = [r for r in data["results"] if r["size"] > 0]
    sizes = [r["size"] for r in rows]
    busbw = [r["out_of_place"]["busbw_gbps"] for r in rows]
    times = [r["out_of_place"]["time_us"] for r in rows]
    return data, sizes, busbw, times


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    out = argv[1]
    fig, (ax_bw, ax_t) = plt.subplots(1, 2, figsize=(12, 4.5))
    title = None
    for spec in argv[2:]:
        label, _, path = spec.partition("=")
        data, sizes, busbw, times = load(path)
        title = title or data["collective"]
        ax_bw.plot(sizes, busbw, marker="o", ms=3, label=label)
        ax_t.plot(sizes, times, marker="o", ms=3, label=label)
    for ax, ylabel in ((ax_bw, "bus bandwidth (GB/s)"), (ax_t, "time (us)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ax_t.set_yscale("log")
    fig.suptitle(f"Braid {title}, host memory")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
