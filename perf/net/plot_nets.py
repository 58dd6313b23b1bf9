#!/usr/bin/python3
"""Plot perf/net/compare_nets.sh output: the median over all rounds of every log given,
per network, as bars (busbw of sendrecv at 64 KiB, 1 MiB, 16 MiB and all-reduce at
16 MiB) beside the 8 B all-reduce time; and print the medians as a markdown table.

usage: perf/net/plot_nets.py OUT.png compare.log [compare.log ...]
Needs matplotlib: Debian's python3-matplotlib, hence /usr/bin/python3.
"""
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROW = re.compile(
    r"^(\S+)\s+sendrecv busbw 64K\s+(\S+)\s+1M\s+(\S+)\s+16M\s+(\S+)\s+\|"
    r"\s+all_reduce 8B\s+(\S+) us\s+16M\s+(\S+)")
BW = ("sendrecv 64 KiB", "sendrecv 1 MiB", "sendrecv 16 MiB", "all-reduce 16 MiB")


def parse(paths):
    """{net: [[five figures] per round]}, in first-seen order."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                m = ROW.match(line)
                if not m:
                    continue
                try:
                    vals = [float(v) for v in m.groups()[1:]]
                except ValueError:  # a run that printed no figure
                    continue
                rows.setdefault(m.group(1), []).append(vals)
    return rows


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    rows = parse(argv[2:])
    if not rows:
        print("no compare_nets.sh rows in", argv[2:], file=sys.stderr)
        return 1
    med = {n: [statistics.median(r[i] for r in rs) for i in range(5)] for n, rs in rows.items()}
    print("| net | rounds | " + " | ".join(BW) + " | all-reduce 8 B |")
    print("|---" * 7 + "|")
    for n, v in med.items():
        print(f"| {n} | {len(rows[n])} | {v[0]:.2f} | {v[1]:.2f} | {v[2]:.2f} | {v[4]:.2f} | "
              f"{v[3]:.1f} us |")
    fig, (bw, lat) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(med)
    for k, (n, v) in enumerate(med.items()):
        xs = [i + k * width for i in range(len(BW))]
        bw.bar(xs, [v[0], v[1], v[2], v[4]], width, label=n)
        lat.bar(k, v[3], 0.6, label=n)
    bw.set_xticks([i + 0.4 - width / 2 for i in range(len(BW))])
    bw.set_xticklabels(BW)
    bw.set_ylabel("busbw (GB/s), median")
    bw.legend(fontsize=8)
    bw.set_title("2 processes over the net transport")
    lat.set_xticks(range(len(med)))
    lat.set_xticklabels(list(med), rotation=30, ha="right", fontsize=8)
    lat.set_ylabel("8 B all-reduce (us), median")
    fig.tight_layout()
    fig.savefig(argv[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
