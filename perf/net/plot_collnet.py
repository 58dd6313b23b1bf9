#!/usr/bin/python3
"""Plot perf/net/collnet_shaped.sh results: all-reduce algbw (median over the rounds, out
of place) against the message size, one panel per layout, one line per algorithm, and
the link rate as a dashed line. A forced algorithm that fell back at a size (its TUNING
lines name another algorithm) is left out at that size.

usage: perf/net/plot_collnet.py RUNS.csv [OUT.png]   (default docs/img/collnet_shaped.png)
Needs matplotlib: Debian's python3-matplotlib, hence /usr/bin/python3.
"""
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

STYLE = {"collnet_chain": "o-", "collnet_direct": "s-", "ring": "^--", "tree": "v--",
         "hier": "d--", "tuner": "x:"}


def load(path):
    """({(layout, algo): {bytes: median algbw}}, layouts in order, link GB/s, rate)."""
    vals, ran, layouts = {}, {}, []
    link, rate = None, ""
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (r["layout"], r["algo"])
            b = int(r["bytes"])
            vals.setdefault(key, {}).setdefault(b, []).append(float(r["algbw_gbs"]))
            ran.setdefault(key, {}).setdefault(b, set()).update(r["ran"].split())
            if r["layout"] not in layouts:
                layouts.append(r["layout"])
            link, rate = float(r["link_gbs"]), r["rate"]
    med = {}
    for (l, a), by_size in vals.items():
        pts = {}
        for b, v in by_size.items():
            used = ran[(l, a)][b] - {"?"}
            if a != "tuner" and used and used != {a}:
                continue  # fell back: not this algorithm's figure
            pts[b] = statistics.median(v)
        med[(l, a)] = pts
    return med, layouts, link, rate


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    out = argv[2] if len(argv) > 2 else "docs/img/collnet_shaped.png"
    med, layouts, link, rate = load(argv[1])
    if not layouts:
        print("no rows in", argv[1], file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(layouts), figsize=(5.5 * len(layouts), 4), squeeze=False)
    for ax, l in zip(axes[0], layouts):
        for (ll, a), pts in med.items():
            if ll != l or not pts:
                continue
            xs = sorted(pts)
            ax.plot([x / 2**20 for x in xs], [pts[x] for x in xs], STYLE.get(a, ".-"), label=a,
                    markersize=4)
        ax.axhline(link, color="gray", linestyle="--", linewidth=1, label=f"link ({rate})")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.set_xlabel("message size (MiB)")
        ax.set_ylabel("algbw (GB/s), median")
        top = max([link] + [v for (ll, _), pts in med.items() if ll == l for v in pts.values()])
        ax.set_ylim(0, top * 1.15)
        nodes, per = l.split("x")
        ax.set_title(f"all-reduce, {nodes} nodes x {per} rank(s)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
