"""Every c10d collective of the `braid` backend on CPU tensors, checked against results
computed locally from every rank's inputs (each rank can build every rank's data).

    python collectives.py <world size>
"""
import datetime
import sys
import time

import torch
import torch.distributed as dist

import launch

TYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
         torch.int64, torch.int8, torch.uint8, torch.int16]


def data(rank, n=37, dtype=torch.float32):
    """Rank `rank`'s input: small values, so sums and products are exact in every type."""
    base = (torch.arange(n) * (rank + 3) + rank) % 5 + 1
    if dtype == torch.bool:
        return (base % 2 == rank % 2)
    if dtype.is_complex:
        return torch.complex(base.float(), -base.float())
    return base.to(dtype)


def expect_reduce(op, tensors):
    t = torch.stack([x.double() if not x.is_complex() else x for x in tensors])
    if op == dist.ReduceOp.SUM:
        r = t.sum(0)
    elif op == dist.ReduceOp.PRODUCT:
        r = t.prod(0)
    elif op == dist.ReduceOp.MIN:
        r = t.min(0).values
    elif op == dist.ReduceOp.MAX:
        r = t.max(0).values
    elif op == dist.ReduceOp.AVG:
        r = t.mean(0)
    return r


def close(got, want, what):
    got = got.double() if not got.is_complex() else got
    want = want.to(got.dtype)
    tol = 2e-2 if what.endswith(("bfloat16", "float16")) else 1e-6
    if not torch.allclose(got, want, rtol=tol, atol=tol):
        raise AssertionError(f"{what}: got {got.flatten()[:8].tolist()} want "
                             f"{want.flatten()[:8].tolist()}")


def check_allreduce(rank, world):
    for dtype in TYPES:
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
                   dist.ReduceOp.MAX, dist.ReduceOp.AVG):
            if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            t = data(rank, dtype=dtype)
            dist.all_reduce(t, op=op)
            want = expect_reduce(op, [data(r, dtype=dtype) for r in range(world)])
            close(t, want, f"all_reduce {op} {dtype}")
    # bool: SUM is OR, PRODUCT is AND (as torch's NCCL backend)
    t = data(rank, dtype=torch.bool)
    dist.all_reduce(t)
    want = torch.stack([data(r, dtype=torch.bool) for r in range(world)]).any(0)
    assert torch.equal(t, want), "all_reduce bool"
    # complex SUM and AVG (as real pairs)
    t = data(rank, dtype=torch.complex64)
    dist.all_reduce(t)
    close(t, expect_reduce(dist.ReduceOp.SUM, [data(r, dtype=torch.complex64)
                                               for r in range(world)]), "all_reduce complex")
    # bitwise ops on integers (gather-and-fold)
    for op, f in ((dist.ReduceOp.BAND, torch.bitwise_and), (dist.ReduceOp.BOR, torch.bitwise_or),
                  (dist.ReduceOp.BXOR, torch.bitwise_xor)):
        t = data(rank, dtype=torch.int32) * 37
        dist.all_reduce(t, op=op)
        want = data(0, dtype=torch.int32) * 37
        for r in range(1, world):
            want = f(want, data(r, dtype=torch.int32) * 37)
        assert torch.equal(t, want), f"all_reduce {op}"
    # complex through the backend itself (torch's Python layer would view it as real
    # pairs first; DDP's C++ reducer does not), SUM and AVG
    cpu = dist.group.WORLD._get_backend(torch.device("cpu"))
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
        t = data(rank, dtype=torch.complex128)
        opts = dist.AllreduceOptions()
        opts.reduceOp = op
        cpu.allreduce([t], opts).wait()
        close(t, expect_reduce(op, [data(r, dtype=torch.complex128) for r in range(world)]),
              f"backend allreduce complex {op}")
    # integer AVG truncates toward zero (NCCL's ncclAvg), also where the backend folds
    for dtype in (torch.int32, torch.int16):
        t = data(rank, dtype=dtype) - 4
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        total = sum(data(r, dtype=dtype).long() - 4 for r in range(world))
        want = torch.div(total, world, rounding_mode="trunc")
        assert torch.equal(t.long(), want), f"all_reduce AVG {dtype}: {t[:8]} want {want[:8]}"
    try:
        dist.all_reduce(data(rank, dtype=torch.int32), op=dist._make_nccl_premul_sum(0.5))
        raise AssertionError("PREMUL_SUM on an integer tensor was accepted")
    except (RuntimeError, ValueError) as e:
        assert "floating-point" in str(e) or "PREMUL_SUM" in str(e), str(e)
    # PREMUL_SUM with a float and with a tensor factor
    for factor in (0.5, torch.tensor(0.25, dtype=torch.float64)):
        t = data(rank)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        want = sum(data(r) for r in range(world)) * float(factor)
        close(t, want, f"all_reduce PREMUL_SUM {factor}")
    # non-contiguous (every other column of a matrix), and a large tensor
    m = torch.stack([data(rank + k) for k in range(6)])
    col = m[:, ::2]
    dist.all_reduce(col)
    want = sum(torch.stack([data(r + k) for k in range(6)]) for r in range(world))[:, ::2]
    close(col, want, "all_reduce non-contiguous")
    close(m[:, 1::2], torch.stack([data(rank + k) for k in range(6)])[:, 1::2],
          "all_reduce non-contiguous leaves the rest")
    big = torch.full((3 << 20,), float(rank + 1))
    dist.all_reduce(big)
    assert torch.all(big == world * (world + 1) / 2), "all_reduce 12 MiB"


def check_async(rank, world):
    t = data(rank)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    res = fut.wait()
    close(res, sum(data(r) for r in range(world)) * 2, "future then")
    assert work.is_completed() and work.is_success()
    xs = [data(rank) * (k + 1) for k in range(8)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for w in works:
        w.wait()
    for k, x in enumerate(xs):
        close(x, sum(data(r) for r in range(world)) * (k + 1), f"async all_reduce {k}")
    # a future's callback that issues another collective and waits for it (as DDP's
    # PowerSGD hook does): the backend must not run callbacks where they block it
    t = data(rank)

    def again(fut):
        u = fut.value()[0] + 1
        dist.all_reduce(u, async_op=True).get_future().wait()
        return u
    res = dist.all_reduce(t, async_op=True).get_future().then(again).wait()
    close(res, (sum(data(r) for r in range(world)) + 1) * world, "collective in a callback")
    # all_reduce_coalesced and the coalescing manager (one group for several ops)
    ts = [data(rank, n) for n in (1, 5, 1000)]
    dist.all_reduce_coalesced(ts)
    for n, t in zip((1, 5, 1000), ts):
        close(t, sum(data(r, n) for r in range(world)), "all_reduce_coalesced")
    from torch.distributed.distributed_c10d import _coalescing_manager
    ts = [data(rank, n) for n in (3, 7)]
    with _coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for n, t in zip((3, 7), ts):
        close(t, sum(data(r, n) for r in range(world)), "coalescing manager")
    # with a device: the backend's own startCoalescing/endCoalescing, mixed collectives
    for async_ops in (False, True):
        a, b = data(rank, 9), data(rank, 4)
        with _coalescing_manager(device=torch.device("cpu"), async_ops=async_ops) as cm:
            dist.broadcast(a, src=world - 1)
            dist.all_reduce(b, op=dist.ReduceOp.MAX)
        if async_ops:
            cm.wait()
        close(a, data(world - 1, 9), f"coalesced broadcast (async {async_ops})")
        close(b, expect_reduce(dist.ReduceOp.MAX, [data(r, 4) for r in range(world)]),
              f"coalesced all_reduce (async {async_ops})")


def check_rooted(rank, world):
    root = world - 1
    t = data(rank, dtype=torch.int16)
    dist.broadcast(t, src=root)
    assert torch.equal(t, data(root, dtype=torch.int16)), "broadcast int16"
    m = torch.zeros(37, 3)
    col = m[:, 1]  # non-contiguous, written in place
    col.copy_(data(rank))
    dist.broadcast(col, src=root)
    close(m[:, 1], data(root), "broadcast non-contiguous")
    assert torch.all(m[:, 0] == 0) and torch.all(m[:, 2] == 0), "broadcast wrote outside"
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
        t = data(rank)
        dist.reduce(t, dst=0, op=op)
        if rank == 0:
            close(t, expect_reduce(op, [data(r) for r in range(world)]), f"reduce {op}")
    t = data(rank, dtype=torch.int16)  # a type NCCL does not reduce: fold at the root
    dist.reduce(t, dst=root)
    if rank == root:
        close(t, sum(data(r, dtype=torch.int16).double() for r in range(world)), "reduce int16")
    groot = 1 % world
    gl = [torch.empty(37) for _ in range(world)] if rank == groot else None
    dist.gather(data(rank), gather_list=gl, dst=groot)
    if rank == groot:
        for r in range(world):
            close(gl[r], data(r), "gather")
    out = torch.empty(37, dtype=torch.float64)
    sl = [data(r, dtype=torch.float64) * 10 for r in range(world)] if rank == groot else None
    dist.scatter(out, scatter_list=sl, src=groot)
    close(out, data(rank, dtype=torch.float64) * 10, "scatter")


def check_gathers(rank, world):
    outs = [torch.empty(5, 4) for _ in range(world)]
    dist.all_gather(outs, data(rank, 20).view(5, 4))
    for r in range(world):
        close(outs[r], data(r, 20).view(5, 4), "all_gather")
    flat = torch.empty(world * 20, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(flat, data(rank, 20, torch.bfloat16))
    close(flat, torch.cat([data(r, 20, torch.bfloat16) for r in range(world)]),
          "all_gather_into_tensor bfloat16")
    # reduce-scatter: list form, tensor form, AVG, and int16 (all-to-all then fold)
    out = torch.empty(6)
    dist.reduce_scatter(out, [data(rank, 6) + k for k in range(world)])
    close(out, sum(data(r, 6) + rank for r in range(world)), "reduce_scatter list")
    for dtype, op in ((torch.float32, dist.ReduceOp.SUM), (torch.float64, dist.ReduceOp.AVG),
                      (torch.int16, dist.ReduceOp.SUM), (torch.int32, dist.ReduceOp.MAX)):
        inp = data(rank, 8 * world, dtype)
        out = torch.empty(8, dtype=dtype)
        dist.reduce_scatter_tensor(out, inp, op=op)
        want = expect_reduce(op, [data(r, 8 * world, dtype) for r in range(world)])
        close(out, want[rank * 8:(rank + 1) * 8], f"reduce_scatter_tensor {op} {dtype}")
    try:
        dist.all_gather_into_tensor(torch.empty(3), torch.empty(2))
        raise AssertionError("a wrong all_gather_into_tensor size was accepted")
    except RuntimeError as e:
        assert "braid" in str(e) and "world_size" in str(e), str(e)


def check_alltoall(rank, world):
    inp = torch.arange(world * 3, dtype=torch.float32) + 100 * rank
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    want = torch.cat([(torch.arange(world * 3) + 100 * r)[rank * 3:(rank + 1) * 3]
                      for r in range(world)]).float()
    close(out, want, "all_to_all_single")
    # uneven splits: rank r sends (r + p) % 3 rows of 2 to rank p
    send = [(rank + p) % 3 for p in range(world)]
    recv = [(r + rank) % 3 for r in range(world)]
    inp = torch.cat([torch.full(((rank + p) % 3, 2), float(10 * rank + p)) for p in range(world)])
    out = torch.empty(sum(recv), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)
    want = torch.cat([torch.full(((r + rank) % 3, 2), float(10 * r + rank)) for r in range(world)])
    close(out, want, "all_to_all_single with splits")
    outs = [torch.empty(r + 1) for r in range(world)]
    dist.all_to_all(outs, [torch.full((rank + 1,), float(rank * world + p)) for p in range(world)])
    for r in range(world):
        close(outs[r], torch.full((r + 1,), float(r * world + rank)), "all_to_all list")


def check_p2p(rank, world):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if rank % 2 == 0:
        dist.send(data(rank), dst=nxt)
        got = torch.empty(37)
        dist.recv(got, src=prv)
    else:
        got = torch.empty(37)
        dist.recv(got, src=prv)
        dist.send(data(rank), dst=nxt)
    close(got, data(prv), "send/recv")
    got = torch.zeros(37, 2)[:, 0]  # non-contiguous receive buffer
    mine = torch.empty(37)
    ops = [dist.P2POp(dist.isend, data(rank) * 3, nxt), dist.P2POp(dist.irecv, got, prv),
           dist.P2POp(dist.isend, data(rank) * 5, rank), dist.P2POp(dist.irecv, mine, rank)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    close(got, data(prv) * 3, "batch_isend_irecv")
    close(mine, data(rank) * 5, "batch_isend_irecv to this rank itself")
    dist.barrier()


def check_groups(rank, world):
    ends = [0, world - 1]
    g = dist.new_group(ends)
    if rank in ends:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        assert t.item() == world - 1, f"new_group all_reduce {t.item()}"
    if world >= 2:
        pairs = [[r, r + 1] for r in range(0, world - 1, 2)]
        sg = dist.split_group(split_ranks=pairs)
        mine = [p for p in pairs if rank in p]
        if mine:
            t = torch.tensor([float(rank + 1)])
            dist.all_reduce(t, group=sg)
            assert t.item() == sum(x + 1 for x in mine[0]), f"split_group {t.item()}"
            assert dist.get_world_size(sg) == 2
        else:
            assert sg is None or sg == dist.GroupMember.NON_GROUP_MEMBER
        # the same split again: a rank outside it must take part again, not skip
        sg2 = dist.split_group(split_ranks=pairs)
        if mine:
            t = torch.tensor([1.0])
            dist.all_reduce(t, group=sg2)
            assert t.item() == 2, f"second split_group {t.item()}"
    dist.barrier()


def check_timeout(rank, world):
    """Rank 0 all-reduces on a group nobody else uses: it must fail after the op's
    timeout with a message naming the op, not hang."""
    g = dist.new_group(list(range(world)), timeout=datetime.timedelta(seconds=60))
    backend = g._get_backend(torch.device("cpu"))
    if rank == 0:
        opts = dist.AllreduceOptions()
        opts.timeout = datetime.timedelta(seconds=2)
        t0 = time.time()
        try:
            backend.allreduce([torch.ones(4)], opts).wait()
            raise AssertionError("an all-reduce without its peers completed")
        except RuntimeError as e:
            took = time.time() - t0
            assert "did not complete within 2000 ms" in str(e), str(e)
            assert took < 30, f"timeout took {took:.1f} s"
            print(f"rank 0: timed out after {took:.1f} s: {str(e).splitlines()[0]}", flush=True)
    dist.barrier()


def check_mismatch(rank, world):
    """The last rank all-reduces 500 floats, the others 1000 (and then a broadcast from
    another root): with the default settings every rank's call must raise, naming the
    mismatch, within a second, and the process group must work afterwards."""
    odd = rank == world - 1
    for what, call in (
            ("count", lambda: dist.all_reduce(torch.ones(500 if odd else 1000))),
            ("root", lambda: dist.broadcast(torch.ones(64), src=1 if odd else 0))):
        t0 = time.time()
        try:
            call()
            raise AssertionError(f"a mismatched {what} returned success on rank {rank}")
        except RuntimeError as e:
            took = time.time() - t0
            assert "collective mismatch" in str(e), str(e)
            assert took < 1.0, f"the {what} mismatch took {took:.2f} s to fail"
            if rank == 0:
                print(f"{what} mismatch: raised on rank 0 after {took:.3f} s: "
                      f"{str(e).splitlines()[0][:160]}", flush=True)
    t = torch.full((1000,), float(rank))
    dist.all_reduce(t)
    assert t[0].item() == world * (world - 1) / 2, f"all-reduce after the mismatch {t[0]}"


def main(rank, world):
    for check in (check_allreduce, check_async, check_rooted, check_gathers, check_alltoall,
                  check_p2p, check_groups, check_mismatch, check_timeout):
        t0 = time.time()
        check(rank, world)
        if rank == 0:
            print(f"{check.__name__}: ok ({time.time() - t0:.2f} s)", flush=True)


if __name__ == "__main__":
    launch.require_torch_braid()
    world = int(sys.argv[1])
    launch.run(world, main)
    print(f"collectives on {world} processes: ok")
