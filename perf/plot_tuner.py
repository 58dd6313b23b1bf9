#!/usr/bin/env python3
"""Plots a tuner benchmark (perf/tuner_table.py --json): time of every forced algorithm
and of the tuner against size, and the tuner/best ratio.

  perf/plot_tuner.py table.json out.png
"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    doc = json.load(open(sys.argv[1]))
    rows = doc["rows"]
    sizes = [r["size"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.2))
    for algo in doc["algorithms"]:
        pts = [(r["size"], r["times_us"].get(algo)) for r in rows if r["times_us"].get(algo)]
        a1.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=algo)
    a1.plot(sizes, [r["tuner_us"] for r in rows], "k--", marker="s", ms=4, label="tuner")
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xlabel("size (bytes)")
    a1.set_ylabel("time (us, median)")
    a1.set_title(f"{doc['collective']}: forced algorithms and the tuner")
    a1.grid(True, alpha=0.3)
    a1.legend(fontsize=8)
    a2.plot(sizes, [r["ratio"] for r in rows], "k-", marker="s", ms=4)
    a2.axhline(1.0 + doc["threshold"], color="r", ls=":", label="best + 10 %")
    a2.axhline(1.0, color="g", ls=":")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("size (bytes)")
    a2.set_ylabel("tuner / best forced")
    a2.set_title("tuner against the best forced algorithm")
    a2.grid(True, alpha=0.3)
    a2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
