"""PyTorch's own parallel training code on the `braid` backend, CPU tensors:

    python training.py ddp|fsdp2|pipeline <world size>

A small MLP trains for a few SGD steps on a fixed batch split across the processes:
DistributedDataParallel, FSDP2 (fully_shard), or torch.distributed.pipelining (2 stages
with ScheduleGPipe; with 4 processes, 2 pipelines of 2 stages, gradients averaged across
them). The run must match one process training on the whole batch, and every gradient
must agree with the same run on Gloo to rounding.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn

import launch

STEPS, BATCH, LR = 4, 16, 0.1


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4)).double()


def batches():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, BATCH, 16, generator=g, dtype=torch.float64)
    y = torch.randn(STEPS, BATCH, 4, generator=g, dtype=torch.float64)
    return x, y


def reference():
    """One process, the whole batch: parameters after training and each step's grads."""
    model, (x, y) = make_model(), batches()
    grads = []
    for s in range(STEPS):
        nn.functional.mse_loss(model(x[s]), y[s]).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        # SGD's update (what torch.optim.SGD does without momentum), by hand: the
        # optimizer's first step would import torch._dynamo here, ~2.8 s of CPU.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-LR)
                p.grad = None
    return {n: p.detach().clone() for n, p in model.named_parameters()}, grads


def shard(t, index, parts):
    n = t.shape[0] // parts
    return t[index * n:(index + 1) * n]


def train_ddp(rank, world, out):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(make_model())
    x, y = batches()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    grads = []
    for s in range(STEPS):
        loss = nn.functional.mse_loss(model(shard(x[s], rank, world)), shard(y[s], rank, world))
        loss.backward()
        grads.append({n[len("module."):]: p.grad.clone() for n, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
    params = {n[len("module."):]: p.detach().clone() for n, p in model.named_parameters()}
    torch.save({"params": params, "grads": grads}, os.path.join(out, f"{rank}.pt"))


def train_fsdp2(rank, world, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    model = make_model()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    x, y = batches()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    grads = []
    for s in range(STEPS):
        loss = nn.functional.mse_loss(model(shard(x[s], rank, world)), shard(y[s], rank, world))
        loss.backward()
        grads.append({n: p.grad.full_tensor().clone() for n, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
    params = {n: p.full_tensor().detach().clone() for n, p in model.named_parameters()}
    torch.save({"params": params, "grads": grads}, os.path.join(out, f"{rank}.pt"))


def train_pipeline(rank, world, out):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    stages = 2
    replicas = world // stages
    stage, replica = rank % stages, rank // stages
    # Every rank makes every group, in the same order.
    pipes = [dist.new_group([r * stages + s for s in range(stages)]) for r in range(replicas)]
    dps = [dist.new_group([r * stages + s for r in range(replicas)]) for s in range(stages)]
    full = make_model()
    names = {0: ["0", "2"], 1: ["4"]}[stage]  # stage 0: Linear, Tanh, Linear, Tanh
    submod = full[0:4] if stage == 0 else full[4:5]
    pipe = PipelineStage(submod, stage, stages, torch.device("cpu"), group=pipes[replica])
    micro = 4
    schedule = ScheduleGPipe(pipe, n_microbatches=micro, loss_fn=nn.functional.mse_loss)
    x, y = batches()
    opt = torch.optim.SGD(submod.parameters(), lr=LR)
    grads = []
    for s in range(STEPS):
        xs, ys = shard(x[s], replica, replicas), shard(y[s], replica, replicas)
        if stage == 0:
            schedule.step(xs)
        else:
            schedule.step(target=ys, losses=[])
        if replicas > 1:
            for p in submod.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=dps[stage])
        # Slices of a Sequential keep the layers' names ("4.weight"): the same keys as
        # the whole model's.
        grads.append({n: p.grad.clone() for n, p in submod.named_parameters()})
        opt.step()
        opt.zero_grad()
    assert all(k.split(".")[0] in names for k in grads[0]), grads[0].keys()
    params = {n: p.detach().clone() for n, p in submod.named_parameters()}
    torch.save({"params": params, "grads": grads}, os.path.join(out, f"{rank}.pt"))


def gather_results(out, world):
    """Each rank's saved parameters and grads, merged over ranks (pipeline stages hold
    different layers; DDP/FSDP2 ranks hold the same: all ranks are compared)."""
    return [torch.load(os.path.join(out, f"{r}.pt")) for r in range(world)]


def compare(a, b, what, tol):
    for n in b:
        if n not in a:
            continue
        d = (a[n] - b[n]).abs().max().item()
        if d > tol:
            raise AssertionError(f"{what} {n}: differs by {d:.3g} (tolerance {tol:g})")


def main():
    launch.require_torch_braid()
    mode, world = sys.argv[1], int(sys.argv[2])
    fn = {"ddp": train_ddp, "fsdp2": train_fsdp2, "pipeline": train_pipeline}[mode]
    ref_params, ref_grads = reference()
    runs = {}
    for backend in ("braid", "gloo"):
        with tempfile.TemporaryDirectory() as out:
            # torch._dynamo: the optimizers' first step imports it (and pipelining does),
            # about 2.8 s of CPU in every rank otherwise.
            launch.run(world, fn, out, backend=backend, preload=("torch._dynamo",))
            runs[backend] = gather_results(out, world)
    covered = set()
    for rank in range(world):
        braid, gloo = runs["braid"][rank], runs["gloo"][rank]
        covered |= set(braid["params"])
        # the same model as one process on the whole batch (float64: summation order only)
        compare(braid["params"], ref_params, f"{mode} rank {rank} vs one process: parameter",
                1e-10)
        for s in range(STEPS):
            compare(braid["grads"][s], ref_grads[s],
                    f"{mode} rank {rank} step {s} vs one process: gradient", 1e-10)
            compare(braid["grads"][s], gloo["grads"][s],
                    f"{mode} rank {rank} step {s} vs gloo: gradient", 1e-12)
    assert covered == set(ref_params), f"parameters not covered: {set(ref_params) - covered}"
    diff = max((runs["braid"][r]["grads"][s][n] - runs["gloo"][r]["grads"][s][n]).abs().max().item()
               for r in range(world) for s in range(STEPS) for n in runs["braid"][r]["grads"][s])
    print(f"{mode} on {world} processes: {STEPS} steps match one process (float64, tolerance "
          f"1e-10); largest gradient difference from gloo {diff:.3g}")


if __name__ == "__main__":
    main()
