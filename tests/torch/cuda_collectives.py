"""The `braid` backend on CUDA tensors (stream-ordered on torch's current stream), one
GPU per rank where there are enough, else ranks sharing GPUs:

    python cuda_collectives.py <world size>

Skips (77) where torch sees no GPU or torch_braid was built without CUDA.
"""
import sys

import torch
import torch.distributed as dist

import launch


def main(rank, world):
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)

    def data(r, n=1 << 16):
        return ((torch.arange(n, device=dev) * (r + 3) + r) % 5 + 1).float()

    want_sum = sum(data(r) for r in range(world))
    t = data(rank)
    dist.all_reduce(t)
    assert torch.equal(t, want_sum), "all_reduce"
    t = data(rank)
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    work.wait()  # the current stream waits; the host does not
    assert torch.allclose(t, want_sum / world), "all_reduce AVG async"
    fut = dist.all_reduce(data(rank), async_op=True).get_future()
    assert torch.equal(fut.wait()[0], want_sum), "future"
    out = torch.empty(world << 16, device=dev)
    dist.all_gather_into_tensor(out, data(rank))
    assert torch.equal(out, torch.cat([data(r) for r in range(world)])), "all_gather"
    rs = torch.empty(1 << 16, device=dev)
    dist.reduce_scatter_tensor(rs, torch.cat([data(rank) * (k + 1) for k in range(world)]))
    assert torch.equal(rs, want_sum * (rank + 1)), "reduce_scatter"
    b = data(rank)
    dist.broadcast(b, src=world - 1)
    assert torch.equal(b, data(world - 1)), "broadcast"
    a2a = torch.empty(world * 4, device=dev)
    dist.all_to_all_single(a2a, torch.arange(world * 4, device=dev, dtype=torch.float32) + 100 * rank)
    want = torch.cat([torch.arange(rank * 4, rank * 4 + 4, device=dev).float() + 100 * r
                      for r in range(world)])
    assert torch.equal(a2a, want), "all_to_all_single"
    got = torch.empty(1 << 16, device=dev)
    ops = [dist.P2POp(dist.isend, data(rank), (rank + 1) % world),
           dist.P2POp(dist.irecv, got, (rank - 1) % world)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got, data((rank - 1) % world)), "batch_isend_irecv"
    dist.barrier()
    torch.cuda.synchronize()


if __name__ == "__main__":
    launch.require_torch_braid()
    import torch_braid
    if not torch.cuda.is_available() or not torch_braid.has_cuda:
        print("SKIP: no CUDA device visible to torch (or torch_braid built without CUDA)")
        sys.exit(launch.SKIP)
    world = int(sys.argv[1])
    launch.run(world, main)
    print(f"CUDA collectives on {world} processes, {torch.cuda.device_count()} GPU(s): ok")
