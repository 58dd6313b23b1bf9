#!/usr/bin/env python3
"""Plots braid-sim predictions: bus bandwidth against size, one line per algorithm.

  perf/plot_sim.py out.png "1 node x 8" sim1.csv "128 nodes x 8" sim128.csv

Each CSV is `braid-sim --csv` output for one collective (lines starting with '#' or
'##' and blank lines are skipped).
"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    rows = [line for line in open(path) if line.strip() and not line.startswith("#")]
    return list(csv.DictReader(rows))


def main():
    if len(sys.argv) < 4 or len(sys.argv) % 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    panels = list(zip(sys.argv[2::2], sys.argv[3::2]))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    for ax, (title, path) in zip(axes[0], panels):
        rows = read(path)
        algos = [k[:-6] for k in rows[0] if k.endswith("_busbw")]
        sizes = [int(r["bytes"]) for r in rows]
        for a in algos:
            pts = [(s, float(r[a + "_busbw"])) for s, r in zip(sizes, rows) if r[a + "_busbw"]]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=a)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("predicted busbw (GB/s)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
