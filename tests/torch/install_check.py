"""What install.sh runs in the venv it installed torch_braid into: an all-reduce on 2
processes with backend "braid", checked, and a check that the backend runs on the
libbraid.so bundled beside its extension (the installed package's own, no other).

    <venv>/bin/python install_check.py
"""
import os
import sys

import torch
import torch.distributed as dist

import launch


def mapped(name):
    """Paths of the files mapped into this process whose name is `name`."""
    with open("/proc/self/maps") as f:
        paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    return sorted(p for p in paths if os.path.basename(p) == name)


def check(rank, world):
    import torch_braid
    here = os.path.dirname(os.path.realpath(torch_braid.__file__))
    libs = mapped("libbraid.so")
    want = os.path.join(here, "libbraid.so")
    assert libs == [want], f"rank {rank}: libbraid.so mapped from {libs}, want [{want}]"
    assert not any(os.path.dirname(p) == here for p in mapped("libnccl.so.2")), \
        "a libnccl.so.2 from the package is loaded"
    for n in (1000, 1 << 20):
        t = torch.full((n,), float(rank + 1))
        dist.all_reduce(t)
        want_sum = world * (world + 1) / 2
        assert torch.equal(t, torch.full((n,), want_sum)), \
            f"rank {rank}: all-reduce of {n} floats gave {t[:4].tolist()}, want {want_sum}"
    if rank == 0:
        print(f"torch_braid {torch_braid.__file__} on {libs[0]} (Braid "
              f"{torch_braid.braid_version()}): all-reduce on {world} processes ok", flush=True)


if __name__ == "__main__":
    import torch_braid
    prefix = os.path.realpath(sys.prefix)
    if not os.path.realpath(torch_braid.__file__).startswith(prefix + os.sep):
        sys.exit(f"FAIL: torch_braid imported from {torch_braid.__file__}, not from {prefix}")
    assert dist.is_available()
    launch.run(2, check)
