"""The backend's own cost per call: a blocking 8 B all_reduce of CPU tensors, repeated.

    build/venv/bin/python perf/torch/latency.py [--world 2] [--iters 3000] [--backend braid]
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "torch"))
import launch  # noqa: E402


def main(rank, world, iters):
    torch.set_num_threads(1)
    x = torch.ones(2)
    for _ in range(200):
        dist.all_reduce(x)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    if rank == 0:
        print(f"8 B all_reduce, {world} processes: "
              f"{(time.perf_counter() - t0) / iters * 1e6:.1f} us per call", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--backend", default="braid")
    a = ap.parse_args()
    launch.run(a.world, main, a.iters, backend=a.backend)
