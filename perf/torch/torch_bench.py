"""torch.distributed on CPU tensors: the `braid` backend against `gloo`, same run.

    python perf/torch/torch_bench.py --world 2 --json out.json [--min 8] [--max 256M]
                                     [--rounds 5] [--backends braid,gloo,braid+BRAID_SLEEP=0]

For each backend in turn: all_reduce, all_gather_into_tensor and reduce_scatter_tensor of
float32 tensors from --min to --max bytes (x4 steps), then a DistributedDataParallel
training step of an MLP (forward, backward with DDP's bucketed all-reduce, SGD step).
Times are medians of timed iterations after warm-up (with --rounds N: the median of the
N sweeps' medians, the backends' sweeps alternating); busbw as nccl-tests counts it
(size = the all-gather output / the reduce-scatter input). Needs torch_braid installed.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * units[s[-1].upper()]) if s[-1].upper() in units else int(s)


def iterations(size):
    """Enough iterations for a stable median, few where one op takes long."""
    return max(5, min(200, int(64e6 / max(size, 64 << 10))))


def bus_factor(coll, n):
    return 2 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n


def time_op(fn, iters):
    for _ in range(max(2, iters // 10)):
        fn()
    dist.barrier()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    # every rank's median, the slowest one counts (a collective ends when all have it)
    t = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def collectives(rank, world, sizes):
    rows = []
    for size in sizes:
        count = max(world, size // 4 // world * world)
        for coll in COLLECTIVES:
            if coll == "all_reduce":
                x = torch.ones(count)
                fn = lambda: dist.all_reduce(x)  # noqa: E731
            elif coll == "all_gather":
                inp, out = torch.ones(count // world), torch.empty(count)
                fn = lambda: dist.all_gather_into_tensor(out, inp)  # noqa: E731
            else:
                inp, out = torch.ones(count), torch.empty(count // world)
                fn = lambda: dist.reduce_scatter_tensor(out, inp)  # noqa: E731
            t = time_op(fn, iterations(count * 4))
            nbytes = count * 4
            rows.append({"collective": coll, "size": nbytes, "time_us": t * 1e6,
                         "busbw_gbps": nbytes / t / 1e9 * bus_factor(coll, world)})
    return rows


def ddp_step(rank, world, hidden, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(1024, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                              nn.ReLU(), nn.Linear(hidden, 1024)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 1024), torch.randn(32, 1024)

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    params = sum(p.numel() for p in model.parameters())
    return {"params": params, "step_ms": time_op(step, steps) * 1e3}


def worker(rank, world, backend, path, sizes, hidden, steps, out):
    # "braid+BRAID_SLEEP=0": the braid backend with that variable set (compare settings
    # of Braid in one run).
    backend, *settings = backend.split("+")
    for kv in settings:
        k, v = kv.split("=", 1)
        os.environ[k] = v
    import torch_braid  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group(backend, store=dist.FileStore(path, world), rank=rank,
                            world_size=world)
    if sizes:
        result = {"collectives": collectives(rank, world, sizes)}
    else:
        result = {"ddp": ddp_step(rank, world, hidden, steps)}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--min", default="8")
    ap.add_argument("--max", default="256M")
    ap.add_argument("--backends", default="braid,gloo")
    ap.add_argument("--hidden", type=int, default=2048, help="DDP model width")
    ap.add_argument("--ddp-steps", type=int, default=20)
    ap.add_argument("--ddp-rounds", type=int, default=3,
                    help="DDP runs per backend, alternating backends (the median is kept)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="collective sweeps per backend, alternating backends; each size "
                         "reports the median over the rounds")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    sizes, s, top = [], parse_size(a.min), parse_size(a.max)
    while s <= top:
        sizes.append(s)
        s *= 4
    if sizes[-1] != top:
        sizes.append(top)  # the largest size is always measured
    report = {"world": a.world, "torch": torch.__version__, "backends": {}}
    backends = a.backends.split(",")

    def spawn(backend, sizes):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            mp.spawn(worker, args=(a.world, backend, os.path.join(tmp, "store"), sizes, a.hidden,
                                   a.ddp_steps, out), nprocs=a.world)
            return json.load(open(out))
    sweeps = {b: [] for b in backends}
    for r in range(a.rounds):
        for backend in backends:
            sweeps[backend].append(spawn(backend, sizes)["collectives"])
            print(f"{backend}: collectives done (round {r + 1} of {a.rounds})", file=sys.stderr,
                  flush=True)
    for backend in backends:
        rows = []
        for i, row in enumerate(sweeps[backend][0]):
            times = sorted(sweep[i]["time_us"] for sweep in sweeps[backend])
            t = statistics.median(times)
            rows.append(dict(row, time_us=t, busbw_gbps=row["busbw_gbps"] * row["time_us"] / t,
                             rounds_us=times))
        report["backends"][backend] = {"collectives": rows}
    # DDP steps: backends alternate, a few rounds (this machine's load drifts)
    runs = {b: [] for b in backends}
    for _ in range(a.ddp_rounds):
        for backend in backends:
            runs[backend].append(spawn(backend, [])["ddp"])
    for backend in backends:
        steps = sorted(r["step_ms"] for r in runs[backend])
        report["backends"][backend]["ddp"] = {"params": runs[backend][0]["params"],
                                              "step_ms": statistics.median(steps),
                                              "rounds_ms": steps}
    with open(a.json, "w") as f:
        json.dump(report, f, indent=1)
    table(report)


def table(report):
    b = report["backends"]
    names = list(b)
    print(f"# world {report['world']}, torch {report['torch']}: busbw GB/s"
          + ("" if len(names) < 2 else f", ratio {names[0]}/{names[1]}"))
    for coll in COLLECTIVES:
        rows = {n: [r for r in b[n]["collectives"] if r["collective"] == coll] for n in names}
        for i, r in enumerate(rows[names[0]]):
            vals = [rows[n][i] for n in names]
            line = f"{coll:15s} {r['size']:>11d} " + " ".join(
                f"{n}={v['time_us']:10.1f}us/{v['busbw_gbps']:7.3f}" for n, v in zip(names, vals))
            if len(names) > 1:
                line += f"  x{vals[1]['time_us'] / vals[0]['time_us']:.2f}"
            print(line)
    for n in names:
        d = b[n]["ddp"]
        print(f"ddp step ({d['params'] / 1e6:.1f} M params) {n}: {d['step_ms']:.2f} ms")


if __name__ == "__main__":
    main()
