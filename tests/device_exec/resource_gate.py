#!/usr/bin/env python3
"""The CUDA kernels' resource gate, read from the built library with cuobjdump:

    resource_gate.py <libbraid.so> [cuobjdump]

For every kernel of every architecture in the library's fatbinary:
  * no local memory (LOCAL:0) and no stack (STACK:0): spills and stack frames cost
    memory traffic on every access,
  * at most 128 registers per thread (512 threads a block: 64 K registers, one block
    an SM at least),
  * at most 4096 bytes of parameters (EIATTR_CBANK_PARAM_SIZE): the parameter block
    travels with every launch.
Prints one line per kernel; exits 1 naming each breach, 77 (skip) when no cuobjdump
can be found (it comes with the CUDA toolkit and with Triton's wheel, which the test
command's Python environment holds).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

MAX_REGS = 128
MAX_PARAM_BYTES = 4096
SKIP = 77


def find_cuobjdump(hint):
    cands = [hint] if hint else []
    cands.append(shutil.which("cuobjdump"))
    cands.append("/usr/local/cuda/bin/cuobjdump")
    here = os.path.dirname(os.path.abspath(sys.argv[1]))
    for root in (here, os.path.join(here, "build")):
        cands += sorted(glob.glob(os.path.join(
            root, "venv/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump")))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def run(tool, flag, lib):
    return subprocess.run([tool, flag, lib], check=True, capture_output=True,
                          text=True).stdout


def with_arch(text):
    """(architecture, line) for each line of cuobjdump's output (its "arch = sm_XX"
    lines open each fatbinary entry)."""
    arch = "?"
    for line in text.splitlines():
        m = re.match(r"arch = (sm_\d+)", line)
        if m:
            arch = m.group(1)
        yield arch, line


def res_usage(text):
    """[(arch, kernel, {REG, STACK, LOCAL, ...})] from cuobjdump -res-usage."""
    out, fn = [], None
    for arch, line in with_arch(text):
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            fn = m.group(1)
        elif fn and "REG:" in line:
            vals = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}
            out.append((arch, fn, vals))
            fn = None
    return out


def param_sizes(text):
    """{(arch, kernel): parameter bytes} from cuobjdump -elf (.nv.info.<kernel>)."""
    sizes, fn, want = {}, None, False
    for arch, line in with_arch(text):
        m = re.match(r"\.nv\.info\.(\S+)\s*$", line)
        if m:
            fn = m.group(1)
        elif line.startswith(".section"):
            fn = None
        elif fn and "EIATTR_CBANK_PARAM_SIZE" in line:
            want = True
        elif want:
            m = re.search(r"Value:\s*0x([0-9a-fA-F]+)", line)
            if m:
                sizes[(arch, fn)] = int(m.group(1), 16)
                want = False
    return sizes


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    lib = sys.argv[1]
    tool = find_cuobjdump(sys.argv[2] if len(sys.argv) > 2 else None)
    if tool is None:
        print("SKIP: no cuobjdump (CUDA toolkit, or Triton's wheel in <build>/venv: "
              "scripts/setup-python-env.sh)")
        return SKIP
    kernels = res_usage(run(tool, "-res-usage", lib))
    params = param_sizes(run(tool, "-elf", lib))
    if not kernels:
        print(f"FAIL: {lib} holds no CUDA kernels ({tool} -res-usage found none)")
        return 1
    bad = []
    for arch, fn, v in kernels:
        p = params.get((arch, fn))
        print(f"{arch} REG {v.get('REG', -1):3d} STACK {v.get('STACK', -1)} "
              f"LOCAL {v.get('LOCAL', -1)} params {p if p is not None else '?':>5} {fn}")
        why = []
        if v.get("LOCAL", 0) != 0:
            why.append(f"local memory {v['LOCAL']} B")
        if v.get("STACK", 0) != 0:
            why.append(f"stack {v['STACK']} B")
        if v.get("REG", 0) > MAX_REGS:
            why.append(f"{v['REG']} registers > {MAX_REGS}")
        if p is None:
            why.append("no parameter size in the ELF (EIATTR_CBANK_PARAM_SIZE)")
        elif p > MAX_PARAM_BYTES:
            why.append(f"{p} B of parameters > {MAX_PARAM_BYTES}")
        if why:
            bad.append(f"{arch} {fn}: " + ", ".join(why))
    print(f"{len(kernels)} kernels checked with {tool}")
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
