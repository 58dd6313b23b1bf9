"""Builds torch_braid against the installed torch and an installed (or built) Braid.

Braid is found, in order, from
  BRAID_HOME          an install prefix (include/, lib/) or a build tree (its include/ is
                      taken from BRAID_SOURCE_DIR or the tree's CMakeCache)
  pkg-config braid    (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig)
The extension links libbraid.so (not libnccl.so.2: torch has loaded NVIDIA's under that
name) and calls Braid through braidGetNcclApi(). With a CUDA build of torch and a CUDA
toolkit, the CUDA path is built too (BRAID_TORCH_CUDA=0 turns it off).

    pip install --no-build-isolation ./python/torch_braid
"""
import os
import re
import shlex
import subprocess

from setuptools import setup

import torch
from torch.utils import cpp_extension

HERE = os.path.dirname(os.path.abspath(__file__))


def _from_build_tree(home):
    cache = os.path.join(home, "CMakeCache.txt")
    src = os.environ.get("BRAID_SOURCE_DIR")
    if not src and os.path.exists(cache):
        with open(cache) as f:
            m = re.search(r"^braid_SOURCE_DIR:STATIC=(.*)$", f.read(), re.M | re.I)
            src = m.group(1) if m else None
    if not src:
        raise SystemExit(f"torch_braid: {home} is a Braid build tree but its source is "
                         "unknown; set BRAID_SOURCE_DIR")
    return [os.path.join(src, "include")], [home]


def find_braid():
    home = os.environ.get("BRAID_HOME")
    if home:
        home = os.path.abspath(home)
        if os.path.exists(os.path.join(home, "include", "braid", "api_table.h")):
            return [os.path.join(home, "include")], [os.path.join(home, "lib")]
        if os.path.exists(os.path.join(home, "libbraid.so")):
            return _from_build_tree(home)
        raise SystemExit(f"torch_braid: BRAID_HOME={home} holds neither an install "
                         "(include/braid/api_table.h) nor a build tree (libbraid.so)")
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags-only-I", "braid"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs-only-L", "braid"], text=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("torch_braid: Braid not found: set BRAID_HOME to its install prefix "
                         "(cmake --install) or build tree, or make `pkg-config braid` work")
    inc = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    lib = [f[2:] for f in shlex.split(libs) if f.startswith("-L")]
    return inc, lib


def want_cuda():
    flag = os.environ.get("BRAID_TORCH_CUDA")
    if flag is not None:
        return flag == "1"
    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


include_dirs, library_dirs = find_braid()
sources = [os.path.join("csrc", f) for f in
           ("api.cc", "comm.cc", "work.cc", "process_group.cc", "collectives.cc", "module.cc")]
cuda = want_cuda()
Extension = cpp_extension.CUDAExtension if cuda else cpp_extension.CppExtension
ext = Extension(
    "torch_braid._C",
    sources,
    include_dirs=include_dirs,
    library_dirs=library_dirs,
    libraries=["braid"],
    runtime_library_dirs=library_dirs,
    define_macros=[("BRAID_TORCH_CUDA", "1")] if cuda else [],
    # torch's own headers trip -Winterference-size (c10/cuda/CUDAEvent.h) on GCC 12.
    # Hidden visibility, as pybind11 wants for the types it binds. Line tables only
    # (-g1, after Python's -g): full debug info of torch's headers is a quarter of the
    # compile time.
    extra_compile_args={"cxx": ["-O2", "-g1", "-Wall", "-Werror", "-Wno-interference-size",
                                "-fvisibility=hidden"],
                        "nvcc": ["-O2"]},
)

setup(
    name="torch_braid",
    version="0.1.0",
    description="Braid as a torch.distributed backend (`braid`)",
    packages=["torch_braid"],
    ext_modules=[ext],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True)},
    python_requires=">=3.9",
)
