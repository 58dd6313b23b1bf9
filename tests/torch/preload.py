"""PyTorch with Braid in NCCL's place (LD_PRELOAD):

    python preload.py <Braid's libnccl.so.2>

Starts a child Python with LD_PRELOAD=<Braid>, LD_BIND_NOW=1 (every symbol bound at
load, so a missing function fails the import) and LD_DEBUG=bindings, imports torch and
asks it for NCCL's version. Passes when the import works, torch reports NCCL 2.30, and
the dynamic linker bound every nccl* function libtorch_cuda.so imports to Braid's
library (torch also dlopens NVIDIA's wheel copy by path; it stays unused).
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

import launch


def main():
    launch.require_torch_braid()
    braid = os.path.realpath(sys.argv[1])
    probe = ("import torch, ctypes\n"
             "assert torch.cuda._is_compiled(), 'CPU-only torch'\n"
             "p = ctypes.CDLL(None); p.braidVersionString.restype = ctypes.c_char_p\n"
             "print(torch.__version__, '.'.join(map(str, torch.cuda.nccl.version())),"
             " p.braidVersionString().decode())\n")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LD_PRELOAD=braid, LD_BIND_NOW="1", LD_DEBUG="bindings",
                   LD_DEBUG_OUTPUT=os.path.join(tmp, "ld"))
        run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                             text=True, timeout=300)
        if run.returncode != 0:
            if "CPU-only torch" in run.stderr:
                print("SKIP: this torch has no CUDA, so it imports no NCCL")
                sys.exit(launch.SKIP)
            raise SystemExit(f"torch did not run with Braid preloaded:\n{run.stderr[-3000:]}")
        bound = {}
        pattern = re.compile(r"binding file (\S*libtorch_cuda\.so) \[\d+\] to (\S+) \[\d+\]: "
                             r"normal symbol `(nccl\w+)'")
        for f in glob.glob(os.path.join(tmp, "ld.*")):
            for m in pattern.finditer(open(f, errors="replace").read()):
                bound[m.group(3)] = os.path.realpath(m.group(2))
    elsewhere = {s: lib for s, lib in bound.items() if lib != braid}
    assert bound, "no nccl* binding of libtorch_cuda.so was seen (LD_DEBUG output)"
    assert not elsewhere, f"bound outside Braid: {elsewhere}"
    torch_version, nccl_version, braid_version = run.stdout.split()
    assert nccl_version.startswith("2.30."), nccl_version
    print(f"torch {torch_version} on Braid {braid_version} as NCCL {nccl_version}: all "
          f"{len(bound)} nccl* functions of libtorch_cuda.so bound to {braid}")


if __name__ == "__main__":
    main()
