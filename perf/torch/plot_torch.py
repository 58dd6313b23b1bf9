#!/usr/bin/python3
"""Plot torch_bench.py results: busbw against size, one panel per collective, one line
per backend and world size; and print the markdown table for docs/performance.md.

usage: perf/torch/plot_torch.py OUT.png results.json [results.json ...]
Needs matplotlib: Debian's python3-matplotlib, hence /usr/bin/python3.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    reports = [json.load(open(p)) for p in argv[2:]]
    fig, axes = plt.subplots(1, len(COLLECTIVES), figsize=(15, 4.5))
    for ax, coll in zip(axes, COLLECTIVES):
        for rep in reports:
            for backend, res in rep["backends"].items():
                rows = [r for r in res["collectives"] if r["collective"] == coll]
                ax.plot([r["size"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o",
                        ms=3, ls="-" if backend == "braid" else "--",
                        label=f"{backend}, {rep['world']} processes")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(f"torch.distributed {coll}, CPU tensors")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(argv[1], dpi=110)
    # The table: time per op and braid's speed-up over gloo
    for rep in reports:
        b = rep["backends"]
        print(f"\n{rep['world']} processes (torch {rep['torch']}): time per op, braid / gloo\n")
        print("| size | " + " | ".join(f"{c} braid | gloo | x" for c in COLLECTIVES) + " |")
        print("|---:|" + "---:|---:|---:|" * len(COLLECTIVES))
        sizes = [r["size"] for r in b["braid"]["collectives"] if r["collective"] == "all_reduce"]
        for s in sizes:
            cells = []
            for c in COLLECTIVES:
                t = {n: next(r["time_us"] for r in b[n]["collectives"]
                             if r["collective"] == c and r["size"] == s) for n in ("braid", "gloo")}
                cells.append(f"{t['braid']:.0f} us | {t['gloo']:.0f} us | "
                             f"{t['gloo'] / t['braid']:.1f}")
            print(f"| {human(s)} | " + " | ".join(cells) + " |")
        d = {n: b[n]["ddp"] for n in ("braid", "gloo")}
        print(f"\nDDP step ({d['braid']['params'] / 1e6:.1f} M parameters): braid "
              f"{d['braid']['step_ms']:.1f} ms, gloo {d['gloo']['step_ms']:.1f} ms "
              f"(x{d['gloo']['step_ms'] / d['braid']['step_ms']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
