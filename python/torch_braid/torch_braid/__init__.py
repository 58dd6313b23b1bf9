"""Braid as a torch.distributed backend.

    import torch_braid                      # registers the backend "braid"
    import torch.distributed as dist
    dist.init_process_group("braid", ...)   # CPU tensors: Braid's host path;
                                            # CUDA tensors: torch's current stream

The unique id of each Braid communicator travels through the c10d Store given to
init_process_group (or new_group / split_group), so every launcher that works with
Gloo or NCCL works here.
"""
from datetime import timedelta

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND", "braid_version", "nccl_version", "has_cuda"]

BACKEND = "braid"
braid_version = _C.braid_version
nccl_version = _C.nccl_version
has_cuda = bool(_C.cuda)


def _create_backend(opts, backend_options=None):
    timeout = opts.timeout
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return _C.create_backend(opts.store, opts.group_rank, opts.group_size, seconds,
                             getattr(opts, "group_id", "") or "",
                             list(getattr(opts, "global_ranks_in_group", []) or []))


def _register():
    devices = ["cpu", "cuda"] if has_cuda else ["cpu"]
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True,
                                  devices=devices)


_register()
