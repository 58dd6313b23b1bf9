"""PyTorch training on CUDA tensors through Braid, two ways (scripts/run-gpu-tests.sh):

    python cuda_training.py braid-ddp|braid-fsdp2 <world>
        the `braid` backend (torch_braid) on CUDA tensors
    python cuda_training.py nccl-ddp <world> <Braid's libnccl.so.2>
        PyTorch's own ProcessGroupNCCL with Braid's library preloaded (LD_PRELOAD)

A small MLP (float64) trains for a few SGD steps on a fixed batch split across the
processes; parameters and every step's gradients must match one process training on the
whole batch on the same GPU (tolerance 1e-10: summation order only). With Braid preloaded,
each rank first proves that torch's NCCL is Braid (version 2.30, braidVersionString
resolves in the process); where there is a GPU per rank, the same run on NVIDIA's NCCL
must give the same parameters. Ranks share GPUs when there are fewer GPUs than ranks
(Braid allows it; NVIDIA's NCCL does not, so that comparison then says it was skipped).
Exit 77 (skip) without a CUDA device.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

SKIP = 77
STEPS, BATCH, LR = 4, 16, 0.1


def make_model(dev):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4)).double().to(dev)


def batches(dev):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, BATCH, 16, generator=g, dtype=torch.float64)
    y = torch.randn(STEPS, BATCH, 4, generator=g, dtype=torch.float64)
    return x.to(dev), y.to(dev)


def shard(t, index, parts):
    n = t.shape[0] // parts
    return t[index * n:(index + 1) * n]


def reference(dev):
    model, (x, y) = make_model(dev), batches(dev)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    grads = []
    for s in range(STEPS):
        nn.functional.mse_loss(model(x[s]), y[s]).backward()
        grads.append({n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters()}, grads


def train(rank, world, mode, out):
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    x, y = batches(dev)
    if mode == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cuda", (world,))
        model = make_model(dev)
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        full = lambda t: t.full_tensor()  # noqa: E731
        name = lambda n: n  # noqa: E731
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(make_model(dev), device_ids=[dev.index])
        full = lambda t: t  # noqa: E731
        name = lambda n: n[len("module."):]  # noqa: E731
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    grads = []
    for s in range(STEPS):
        loss = nn.functional.mse_loss(model(shard(x[s], rank, world)), shard(y[s], rank, world))
        loss.backward()
        grads.append({name(n): full(p.grad).detach().cpu().clone()
                      for n, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
    params = {name(n): full(p).detach().cpu().clone() for n, p in model.named_parameters()}
    torch.cuda.synchronize()
    torch.save({"params": params, "grads": grads}, os.path.join(out, f"{rank}.pt"))


def which_nccl():
    """(torch's NCCL version, Braid's version string or None) in this process."""
    version = ".".join(map(str, torch.cuda.nccl.version()))
    try:
        f = ctypes.CDLL(None).braidVersionString
        f.restype = ctypes.c_char_p
        return version, f().decode()
    except AttributeError:
        return version, None


def entry(rank, world, backend, mode, store_path, out, want_braid):
    if backend == "braid":
        import torch_braid  # noqa: F401  (registers the backend)
    if want_braid is not None:
        version, braid = which_nccl()
        if want_braid:
            assert braid is not None and version.startswith("2.30."), \
                f"rank {rank}: torch's NCCL is {version}, not Braid (braidVersionString missing)"
        else:
            assert braid is None, f"rank {rank}: Braid {braid} is loaded in the NVIDIA run"
    store = dist.FileStore(store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)
    try:
        train(rank, world, mode, out)
    finally:
        dist.destroy_process_group()


def run(world, backend, mode, want_braid=None):
    """Trains on `world` spawned processes; returns rank 0's results."""
    preload = os.environ.get("BRAID_TEST_PRELOADED")
    if want_braid and preload:
        # The spawned ranks inherit os.environ, not the environment this process started
        # with: some Python setups drop LD_PRELOAD from os.environ at startup (a lent GPU
        # machine's did: its ranks ran NVIDIA's NCCL 2.28.9). Hand the preload on.
        os.environ["LD_PRELOAD"] = preload
    elif want_braid is False:
        os.environ.pop("LD_PRELOAD", None)
    with tempfile.TemporaryDirectory() as out:
        store = os.path.join(out, "store")
        mp.start_processes(entry, args=(world, backend, mode, store, out, want_braid),
                           nprocs=world, join=True, start_method="spawn")
        return [torch.load(os.path.join(out, f"{r}.pt")) for r in range(world)]


def compare(got, want, what, tol=1e-10):
    for n, w in want.items():
        d = (got[n] - w).abs().max().item()
        assert d <= tol, f"{what} {n}: differs by {d:.3g} (tolerance {tol:g})"


def check(runs, ref, what):
    ref_params, ref_grads = ref
    for r, res in enumerate(runs):
        compare(res["params"], ref_params, f"{what} rank {r}: parameter")
        for s in range(STEPS):
            compare(res["grads"][s], ref_grads[s], f"{what} rank {r} step {s}: gradient")


def main():
    mode, world = sys.argv[1], int(sys.argv[2])
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device visible to torch")
        sys.exit(SKIP)
    ngpu = torch.cuda.device_count()
    if mode.startswith("braid-"):
        import torch_braid
        if not torch_braid.has_cuda:
            print("SKIP: torch_braid was built without CUDA")
            sys.exit(SKIP)
        ref = reference(torch.device("cuda", 0))
        check(run(world, "braid", mode[len("braid-"):]), ref, mode)
        print(f"{mode} on {world} processes, {ngpu} GPU(s): {STEPS} steps match one process")
        return
    assert mode == "nccl-ddp", mode
    braid = os.path.realpath(sys.argv[3])
    if os.environ.get("BRAID_TEST_PRELOADED") != braid:
        # Re-run this script with Braid in NCCL's place from the start of the process.
        env = dict(os.environ, LD_PRELOAD=braid, BRAID_TEST_PRELOADED=braid)
        sys.exit(subprocess.run([sys.executable] + sys.argv, env=env).returncode)
    ref = reference(torch.device("cuda", 0))
    version, braid_version = which_nccl()
    assert braid_version is not None, f"LD_PRELOAD={braid}: torch's NCCL {version} is not Braid"
    on_braid = run(world, "nccl", "ddp", want_braid=True)
    check(on_braid, ref, "ProcessGroupNCCL on Braid")
    note = "NVIDIA's NCCL: not run (it needs a GPU per rank; %d here)" % ngpu
    if ngpu >= world:
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",)}
        code = subprocess.run([sys.executable, "-c",
                               "import sys; sys.argv = %r; import cuda_training as t; "
                               "t.nvidia_run(%d)" % (sys.argv, world)],
                              env=env, cwd=os.path.dirname(os.path.abspath(__file__))).returncode
        assert code == 0, "the same DDP run on NVIDIA's NCCL failed or differed"
        note = "NVIDIA's NCCL: same parameters and gradients"
    print(f"ProcessGroupNCCL (torch {torch.__version__}) on Braid {braid_version} as NCCL "
          f"{version}: DDP on {world} processes, {ngpu} GPU(s), {STEPS} steps match one "
          f"process; {note}")


def nvidia_run(world):
    """The reference run on NVIDIA's NCCL (no preload), compared with one process."""
    ref = reference(torch.device("cuda", 0))
    check(run(world, "nccl", "ddp", want_braid=False), ref, "ProcessGroupNCCL on NVIDIA's NCCL")


if __name__ == "__main__":
    main()
