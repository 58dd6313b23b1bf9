"""torch.compile with the functional collectives (torch.distributed._functional_collectives)
on the `braid` backend, CPU tensors:

    python compile.py <world size>

A DDP-style training step (a small MLP's loss, its gradients by torch.func.grad, each
gradient all-reduced with funcol.all_reduce and divided by the world size, then an SGD
update) is compiled whole with torch.compile(fullgraph=True) and inductor, the default
backend, and run for a few steps beside the same step run eagerly in the same process:
parameters must agree to rounding (float64) after every step, and match one process
training on the whole batch. A second compiled function all-gathers, reduce-scatters,
exchanges all-to-all and broadcasts (all_gather_single and reduce_scatter_single, which
torch 2.15 names what were all_gather_tensor and reduce_scatter_tensor, the same ops;
all_to_all_single, broadcast), checked against values computed locally. fullgraph=True makes any graph break an error, and the backend (inductor,
wrapped) checks that each graph holds the collectives, so none runs outside the graph.
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn

import launch

STEPS, BATCH, LR = 3, 8, 0.1
TOL = 1e-12  # float64: inductor's fused kernels round differently from eager, no more


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).double()


def batches():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS, BATCH, 8, generator=g, dtype=torch.float64)
    y = torch.randn(STEPS, BATCH, 4, generator=g, dtype=torch.float64)
    return x, y


def inductor_checking(want):
    """Inductor (torch.compile's default), after checking that the graph Dynamo captured
    calls every collective op named in `want`."""
    from torch._inductor.compile_fx import compile_fx

    def backend(gm, example_inputs):
        ops = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
        missing = [w for w in want if not any(w in op for op in ops)]
        assert not missing, f"the compiled graph lacks {missing}: {sorted(ops)}"
        return compile_fx(gm, example_inputs)
    return backend


def ddp_step(model, group, world):
    """step(params, x, y) -> new params: this rank's gradients, averaged over the group by
    all-reduce, then SGD."""
    def loss(params, x, y):
        return nn.functional.mse_loss(torch.func.functional_call(model, params, (x,)), y)

    def step(params, x, y):
        grads = torch.func.grad(loss)(params, x, y)
        return {n: p - LR * funcol.all_reduce(grads[n], "sum", group) / world
                for n, p in params.items()}
    return step


def reference():
    """One process, the whole batch: the parameters after each step."""
    model, (x, y) = make_model(), batches()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    after = []
    for s in range(STEPS):
        nn.functional.mse_loss(model(x[s]), y[s]).backward()
        opt.step()
        opt.zero_grad()
        after.append({n: p.detach().clone() for n, p in model.named_parameters()})
    return after


def check_training(rank, world, ref):
    group = dist.group.WORLD
    model = make_model()
    step = ddp_step(model, group, world)
    compiled = torch.compile(step, fullgraph=True,
                             backend=inductor_checking(["_c10d_functional.all_reduce",
                                                        "_c10d_functional.wait_tensor"]))
    x, y = batches()
    n = BATCH // world
    eager_p = {k: v.detach().clone() for k, v in model.named_parameters()}
    comp_p = {k: v.clone() for k, v in eager_p.items()}
    for s in range(STEPS):
        xs, ys = x[s, rank * n:(rank + 1) * n], y[s, rank * n:(rank + 1) * n]
        t0 = time.time()
        comp_p = compiled(comp_p, xs, ys)
        took = time.time() - t0
        eager_p = step(eager_p, xs, ys)
        if rank == 0 and s == 0:
            print(f"compiled step: first call (compile and run) {took:.1f} s", flush=True)
        for k in eager_p:
            d = (comp_p[k] - eager_p[k]).abs().max().item()
            assert d <= TOL, f"step {s} {k}: compiled and eager differ by {d:.3g}"
            d = (comp_p[k] - ref[s][k]).abs().max().item()
            assert d <= 1e-10, f"step {s} {k}: compiled and one process differ by {d:.3g}"


def check_gather_scatter(rank, world):
    group = dist.group.WORLD

    def fn(t):
        gathered = funcol.all_gather_single(t * 2, 0, group)                   # (world*3, 5)
        scattered = funcol.reduce_scatter_single(gathered + 1, "sum", 0, group)  # (3, 5)
        swapped = funcol.all_to_all_single(gathered, None, None, group)        # (world*3, 5)
        root = funcol.broadcast(t - 1, 1 % world, group)                       # (3, 5)
        return gathered, scattered, swapped, root

    compiled = torch.compile(fn, fullgraph=True, backend=inductor_checking(
        ["_c10d_functional.all_gather_into_tensor", "_c10d_functional.reduce_scatter_tensor",
         "_c10d_functional.all_to_all_single", "_c10d_functional.broadcast",
         "_c10d_functional.wait_tensor"]))

    def data(r):
        return torch.arange(15, dtype=torch.float32).reshape(3, 5) * (r + 1) + r

    rows = slice(rank * 3, (rank + 1) * 3)
    want = (torch.cat([data(r) * 2 for r in range(world)]), None, None, data(1 % world) - 1)
    # Every rank gathers the same rows: the reduce-scatter keeps this rank's rows of
    # world x (gathered + 1), and the all-to-all sends every rank this rank's rows.
    want = (want[0], world * (want[0][rows] + 1), torch.cat([want[0][rows]] * world), want[3])
    names = ("all_gather_single", "reduce_scatter_single", "all_to_all_single", "broadcast")
    for how, got in (("compiled", compiled(data(rank))), ("eager", fn(data(rank)))):
        for name, g, w in zip(names, got, want):
            assert torch.equal(g, w), f"{how} {name}: {g.flatten()[:6]}, want {w.flatten()[:6]}"


def main(rank, world, ref):
    for check, args in ((check_gather_scatter, ()), (check_training, (ref,))):
        t0 = time.time()
        check(rank, world, *args)
        if rank == 0:
            print(f"{check.__name__}: ok ({time.time() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    launch.require_torch_braid()
    world = int(sys.argv[1])
    assert BATCH % world == 0
    with tempfile.TemporaryDirectory(prefix="braid-inductor-") as cache:
        # Inductor's caches in a folder of this run, so every run compiles for real.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        # Every rank compiles: dynamo and inductor imported once, in the fork server.
        launch.run(world, main, reference(),
                   preload=("torch._dynamo", "torch._inductor.compile_fx"))
    print(f"torch.compile and functional collectives on {world} processes: ok")
