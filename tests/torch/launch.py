"""Runs a test function on N processes with torch.distributed, for the torch tests.

    launch.run(world, fn, *args, backend="braid")

Each process calls init_process_group(backend, FileStore) (no ports to collide), then
fn(rank, world, *args); a failure on any rank fails the run with that rank's traceback.
Exit status 77 (ctest's SKIP_RETURN_CODE) with a reason when torch_braid is missing.
"""
import os
import sys
import tempfile
import traceback

SKIP = 77


def require_torch_braid():
    venv = os.path.dirname(os.path.dirname(sys.executable))
    skipped = os.path.join(venv, "SKIPPED")
    if os.path.exists(skipped):
        print("SKIP: the Python environment could not be made: " + open(skipped).read().strip())
        sys.exit(SKIP)
    try:
        import torch_braid  # noqa: F401
    except ImportError as e:
        print(f"SKIP: torch_braid is not installed in {venv} ({e})")
        sys.exit(SKIP)


def _entry(rank, world, path, backend, fn, args, timeout_s):
    import datetime
    import torch.distributed as dist
    import torch_braid  # noqa: F401  (registers "braid" in this process)
    store = dist.FileStore(path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    try:
        fn(rank, world, *args)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        raise
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def run(world, fn, *args, backend="braid", timeout_s=120, preload=()):
    """`preload`: more modules for the fork server to import once, for every rank (the
    first run of a process starts the fork server; later runs reuse it)."""
    import torch.multiprocessing as mp
    fd, path = tempfile.mkstemp(prefix="braid-torch-store-")
    os.close(fd)
    os.unlink(path)
    # A fork server that imported torch once forks every rank (spawning would import
    # torch afresh in each, about 2 s of CPU apiece); it is a fresh process, not this one,
    # so no thread pool of ours is forked mid-use.
    mp.set_forkserver_preload(["torch", "torch.distributed", "torch_braid", *preload])
    try:
        mp.start_processes(_entry, args=(world, path, backend, fn, args, timeout_s),
                           nprocs=world, join=True, start_method="forkserver")
    finally:
        if os.path.exists(path):
            os.unlink(path)
