#!/usr/bin/env python3
"""Plots a braid-train CSV log (training and validation loss per step) to a PNG.

usage: plot_loss.py LOG.csv OUT.png [BASELINE]
BASELINE (optional): a loss drawn as a horizontal line (the unigram baseline).
Exit status: 0 written, 2 bad usage or unreadable log, 3 matplotlib missing.
"""
import csv
import sys


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_loss.py: matplotlib is not installed", file=sys.stderr)
        return 3
    steps, loss, vsteps, vloss = [], [], [], []
    try:
        with open(argv[1], newline="") as f:
            for row in csv.DictReader(f):
                steps.append(int(row["step"]))
                loss.append(float(row["loss"]))
                if row.get("val_loss"):
                    vsteps.append(int(row["step"]))
                    vloss.append(float(row["val_loss"]))
    except (OSError, KeyError, ValueError) as e:
        print(f"plot_loss.py: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 2
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    ax.plot(steps, loss, label="training loss (global batch)", linewidth=1)
    if vloss:
        ax.plot(vsteps, vloss, "o-", label="validation loss", markersize=4)
    if len(argv) == 4:
        try:
            base = float(argv[3])
            ax.axhline(base, color="gray", linestyle="--", linewidth=1,
                       label=f"unigram baseline ({base:.3f})")
        except ValueError:
            pass
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/char)")
    ax.set_title("braid-train")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
