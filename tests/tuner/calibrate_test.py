#!/usr/bin/env python3
"""perf/calibrate.py on synthetic sendrecv results: recovers alpha and bandwidth, and
its output loads as a BRAID_TUNER_MODEL (key=value lines the library accepts)."""
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(path, alpha, gbps):
    sizes = [1024 * 4 ** k for k in range(7)]
    res = [{"size": s, "out_of_place": {"time_us": alpha + s / (gbps * 1e3)}} for s in sizes]
    with open(path, "w") as f:
        json.dump({"results": res}, f)


with tempfile.TemporaryDirectory() as d:
    write(f"{d}/intra.json", 2.0, 8.0)
    write(f"{d}/inter.json", 50.0, 0.125)
    out = subprocess.run([sys.executable, f"{root}/perf/calibrate.py", "--intra", f"{d}/intra.json",
                          "--inter", f"{d}/inter.json"], check=True, capture_output=True,
                         text=True).stdout
    model = dict(line.split("=") for line in out.splitlines() if "=" in line)
    got = {k: float(v) for k, v in model.items()}
    step = got["step_us"]
    checks = [("intra_gbps", 8.0), ("inter_gbps", 0.125), ("nic_gbps", 0.125),
              ("intra_alpha_us", 2.0 - step), ("inter_alpha_us", 50.0 - step)]
    bad = [f"{k}={got[k]} (want {v})" for k, v in checks if abs(got[k] - v) > 0.02 * v + 1e-3]
    if bad:
        sys.exit("FAIL: " + ", ".join(bad) + "\n" + out)
    # Too few sizes is an error with a message, not a bad model.
    with open(f"{d}/short.json", "w") as f:
        json.dump({"results": [{"size": 8, "out_of_place": {"time_us": 1.0}}]}, f)
    r = subprocess.run([sys.executable, f"{root}/perf/calibrate.py", "--inter", f"{d}/short.json"],
                       capture_output=True, text=True)
    if r.returncode == 0 or "at least 3" not in r.stderr:
        sys.exit("FAIL: a one-size file was accepted: " + r.stderr)
print("PASS")
