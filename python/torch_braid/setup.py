"""Builds torch_braid, the `braid` torch.distributed backend, against the torch installed
in the environment it goes into.

    pip install ./python/torch_braid          # builds Braid from this tree and bundles it

Braid is found, in order, from
  BRAID_HOME          an install prefix (include/, lib/) or a build tree (its include/ is
                      taken from BRAID_SOURCE_DIR or the tree's CMakeCache); the extension
                      loads libbraid.so from there (an absolute run path)
  this source tree    (two folders up): CMake builds the library alone (Release, the CUDA
                      parts only when the extension's CUDA path is built) into build/braid-*,
                      libbraid.so is copied beside the extension, which finds it through
                      its run path $ORIGIN; BRAID_CMAKE_ARGS adds arguments to that CMake
  pkg-config braid    where the package was copied out of the tree
                      (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig)
The extension links libbraid.so (never libnccl.so.2: torch has loaded NVIDIA's under that
name) and calls Braid through braidGetNcclApi(). With a CUDA build of torch and a CUDA
toolkit, the CUDA path is built too (BRAID_TORCH_CUDA=0 turns it off, 1 requires it).

torch is the environment's own, never one fetched for the build (that would be another
build of torch, with another ABI): pyproject.toml does not list it, and under pip's build
isolation, which hides the environment's packages, they are added back to find it. With
`pip install --no-build-isolation` the build sees the environment directly.
"""
import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))


def import_torch():
    try:
        import torch
        return torch
    except ImportError:
        pass
    # pip's build isolation leaves the environment being installed into (sys.prefix) off
    # sys.path; addsitedir puts its site-packages back, .pth files included.
    paths = sysconfig.get_paths(vars={"base": sys.prefix, "platbase": sys.prefix})
    for key in ("purelib", "platlib"):
        site.addsitedir(paths[key])
    try:
        import torch
        return torch
    except ImportError as e:
        raise SystemExit(f"torch_braid: torch cannot be imported ({e}); install torch into "
                         f"{sys.prefix} first: the backend is built against that torch")


torch = import_torch()
from torch.utils import cpp_extension  # noqa: E402  (after torch is found)


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


def from_home(home):
    home = os.path.abspath(home)
    if os.path.exists(os.path.join(home, "include", "braid", "api_table.h")):
        return [os.path.join(home, "include")], [os.path.join(home, "lib")]
    if os.path.exists(os.path.join(home, "libbraid.so")):
        return _from_build_tree(home)
    raise SystemExit(f"torch_braid: BRAID_HOME={home} holds neither an install "
                     "(include/braid/api_table.h) nor a build tree (libbraid.so)")


def source_tree():
    """Braid's source tree around this package, or None where the package was copied out
    of it (pip before 21.3 built local folders in a temporary copy)."""
    if (os.path.exists(os.path.join(SOURCE, "CMakeLists.txt")) and
            os.path.exists(os.path.join(SOURCE, "include", "braid", "api_table.h"))):
        return SOURCE
    return None


def from_pkg_config():
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags-only-I", "braid"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs-only-L", "braid"], text=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(f"torch_braid: Braid not found: {HERE} is not inside Braid's source "
                         "tree (build it from there, with pip 21.3 or later, which builds a "
                         "local folder in place), BRAID_HOME is not set (an install prefix "
                         "or a build tree) and `pkg-config braid` fails")
    inc = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
    lib = [f[2:] for f in shlex.split(libs) if f.startswith("-L")]
    return inc, lib


def want_cuda():
    flag = os.environ.get("BRAID_TORCH_CUDA")
    if flag is not None:
        return flag == "1"
    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


def build_braid(build, cuda):
    """Configures and builds the library target `braid` of the source tree into `build`."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit("torch_braid: building Braid needs CMake 3.22 or later on PATH "
                         "(or set BRAID_HOME to an installed Braid)")
    args = [cmake, "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
            "-DBRAID_BUILD_TESTS=OFF", "-DBRAID_BUILD_PERF=OFF",
            "-DBRAID_WITH_CUDA=" + ("ON" if cuda else "OFF")]
    cache = os.path.join(build, "CMakeCache.txt")
    ninja = shutil.which("ninja")
    if os.path.exists(cache):
        with open(cache) as f:
            uses_ninja = re.search(r"^CMAKE_GENERATOR:INTERNAL=Ninja$", f.read(), re.M)
        # The ninja of an earlier build may have been pip's, in a build environment
        # since deleted: name this build's.
        if uses_ninja and ninja:
            args.append("-DCMAKE_MAKE_PROGRAM=" + ninja)
    else:
        if ninja:
            args += ["-G", "Ninja", "-DCMAKE_MAKE_PROGRAM=" + ninja]
        if cuda:
            args.append("-DCMAKE_CUDA_COMPILER=" +
                        os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc"))
    args += shlex.split(os.environ.get("BRAID_CMAKE_ARGS", ""))
    jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
    print("torch_braid: building Braid's library: " + shlex.join(args), flush=True)
    subprocess.check_call(args)
    subprocess.check_call([cmake, "--build", build, "--target", "braid", "-j", jobs])


def soname(path):
    """The SONAME of a shared library (the name an executable linked against it needs)."""
    try:
        out = subprocess.check_output(["readelf", "-d", path], text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    m = re.search(r"\(SONAME\).*\[(.+)\]", out)
    return m.group(1) if m else None


cuda = want_cuda()
home = os.environ.get("BRAID_HOME")
bundled_build = None          # the CMake build folder whose libbraid.so is bundled
if home:
    include_dirs, library_dirs = from_home(home)
    runtime_dirs = library_dirs
elif source_tree():
    bundled_build = os.path.join(HERE, "build", "braid-cuda" if cuda else "braid-cpu")
    include_dirs, library_dirs = [os.path.join(SOURCE, "include")], [bundled_build]
    runtime_dirs = ["$ORIGIN"]
else:
    include_dirs, library_dirs = from_pkg_config()
    runtime_dirs = library_dirs

BuildExtensionNinja = cpp_extension.BuildExtension.with_options(use_ninja=True)


class BuildExtension(BuildExtensionNinja):
    """torch's build_ext; with a bundled Braid, builds the library first and copies it
    beside the extension."""

    def run(self):
        if bundled_build:
            build_braid(bundled_build, cuda)
        super().run()
        if bundled_build:
            self._bundled = self.bundle()

    def bundle(self):
        lib = os.path.realpath(os.path.join(bundled_build, "libbraid.so"))
        name = soname(lib) or "libbraid.so"
        if not name.startswith("libbraid.so"):
            raise SystemExit(f"torch_braid: {lib} has the soname {name}, not libbraid.so*")
        dest = os.path.join(os.path.dirname(self.get_ext_fullpath("torch_braid._C")), name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(lib, dest)
        shutil.copymode(lib, dest)
        return dest

    def get_outputs(self):
        outputs = super().get_outputs()
        bundled = getattr(self, "_bundled", None)
        return outputs + [bundled] if bundled else outputs


def torch_macros():
    """What differs between the torch releases the backend builds against, read from
    torch's own headers: the PREMUL_SUM supplement is NCCLPreMulSumSupplement up to
    torch 2.12 and PreMulSumSupplement in later releases."""
    types = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc",
                         "distributed", "c10d", "Types.hpp")
    try:
        with open(types) as f:
            text = f.read()
    except OSError:
        return []
    if re.search(r"struct\s+NCCLPreMulSumSupplement\b", text):
        return [("BRAID_TORCH_PREMUL_SUPPLEMENT", "NCCLPreMulSumSupplement")]
    return []


sources = [os.path.join("csrc", f) for f in
           ("api.cc", "comm.cc", "work.cc", "process_group.cc", "collectives.cc", "module.cc")]
Extension = cpp_extension.CUDAExtension if cuda else cpp_extension.CppExtension
ext = Extension(
    "torch_braid._C",
    sources,
    include_dirs=include_dirs,
    library_dirs=library_dirs,
    libraries=["braid"],
    runtime_library_dirs=runtime_dirs,
    define_macros=([("BRAID_TORCH_CUDA", "1")] if cuda else []) + torch_macros(),
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
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
    # The torch it was built against (C++ ABI): same release, any local build (+cu132,
    # +cpu); a CUDA build of the extension needs a CUDA build of torch.
    install_requires=["torch==" + torch.__version__.split("+")[0]],
)
