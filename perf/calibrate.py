#!/usr/bin/env python3
"""Fits the tuner's cost model (BRAID_TUNER_MODEL) to perf-suite results.

Give sendrecv_perf JSON files (-J) measured between two ranks of one node (--intra)
and between two ranks on two nodes (--inter). Each is fitted with
time_us = alpha + bytes / (gbps * 1e3) by least squares over its sizes (out-of-place
times, at least 3 sizes); the executor's own per-step cost (step_us) is subtracted from
alpha (taken at the smallest size). Keys not measured keep their defaults (src/core/machine.cc). Writes key=value
lines that BRAID_TUNER_MODEL reads:

  perf/calibrate.py --intra intra.json --inter inter.json -o model.txt
"""
import argparse
import json
import sys

DEFAULTS = {"intra_alpha_us": 0.7, "intra_gbps": 8, "inter_alpha_us": 25, "inter_gbps": 2.5,
            "nic_gbps": 1.25, "reduce_gbps": 20, "step_us": 0.3, "slice_us": 0.05}


def points(path):
    with open(path) as f:
        doc = json.load(f)
    pts = [(r["size"], r["out_of_place"]["time_us"]) for r in doc["results"]
           if r["size"] > 0 and r["out_of_place"]["time_us"] > 0]
    if len(pts) < 3:
        sys.exit(f"calibrate: {path}: need at least 3 non-zero sizes, found {len(pts)}")
    return pts


def fit(pts):
    """Fits t = alpha + size / bandwidth; returns (alpha_us, gbps)."""
    n = len(pts)
    sx = sum(p[0] for p in pts)
    sy = sum(p[1] for p in pts)
    sxx = sum(p[0] * p[0] for p in pts)
    sxy = sum(p[0] * p[1] for p in pts)
    den = n * sxx - sx * sx
    if den <= 0:
        sys.exit("calibrate: sizes must differ")
    b = (n * sxy - sx * sy) / den
    if b <= 0:
        sys.exit("calibrate: time does not grow with size: measure larger sizes")
    # The slope from the fit (large sizes dominate it); the latency from the smallest
    # size, less its bytes at that bandwidth (the fit's intercept is unreliable: large
    # sizes' noise moves it by more than the latency itself).
    size, t = min(pts)
    return max(t - size * b, 0.05), 1.0 / b / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--intra", help="sendrecv_perf -J of 2 ranks on one node")
    ap.add_argument("--inter", help="sendrecv_perf -J of 2 ranks on two nodes")
    ap.add_argument("-o", "--output", help="model file (default: stdout)")
    args = ap.parse_args()
    model = dict(DEFAULTS)
    if args.intra:
        a, g = fit(points(args.intra))
        model["intra_alpha_us"] = max(a - model["step_us"], 0.05)
        model["intra_gbps"] = g
    if args.inter:
        a, g = fit(points(args.inter))
        model["inter_alpha_us"] = max(a - model["step_us"], 0.05)
        model["inter_gbps"] = g
        model["nic_gbps"] = g  # one link per node: the ranks of a node share it
    text = "# fitted by perf/calibrate.py\n" + "".join(
        f"{k}={v:.6g}\n" for k, v in model.items())
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
