#!/usr/bin/env bash
# Prepares a GPU run on a machine without a GPU: builds the tree scripts/run-gpu-tests.sh
# uses (Release, sm_90, the GPU tests, the perf suite, the device-API program and
# NVIDIA's nccl-tests from ../nccl-tests when that copy is there), then stages what the
# run needs into one folder small enough to send to a lent GPU machine: the build tree
# without objects, binaries stripped, and the shared libraries the binaries need that a
# bare CUDA image lacks (hwloc, verbs, UCX, ...) in <stage>/deplibs.
#
#   scripts/gpu-stage.sh [pack-dir]     (default build-gpu-pack; ignored by git)
#
# writes <pack-dir>/tree.tar.xz. Carry <pack-dir> to the GPU machine and there, from the
# repository root (the tree's tests name absolute paths, so the checkout must be
# reachable where it was built):
#
#   mkdir -p "$(dirname "$BUILT_AT")"; [ -e "$BUILT_AT" ] || ln -s "$PWD" "$BUILT_AT"
#   tar -xJf build-gpu-pack/tree.tar.xz
#   LD_LIBRARY_PATH=$PWD/build-gpu/deplibs BRAID_GPU_SKIP_BUILD=1 scripts/run-gpu-tests.sh DIR
#
# (BUILT_AT is printed at the end.) Environment: as scripts/run-gpu-tests.sh
# (BRAID_GPU_BUILD_DIR, BRAID_CUDA_ARCHS, BRAID_JOBS).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BRAID_GPU_BUILD_DIR:-build-gpu}
pack=${1:-build-gpu-pack}
stage=$pack/$build
BRAID_GPU_BUILD_ONLY=1 bash scripts/run-gpu-tests.sh "$build/prepare-log"

rm -rf "$stage"
mkdir -p "$stage"
# The tree without what only the build needs.
tar -C "$build" -cf - --exclude=CMakeFiles --exclude='*.o' --exclude='*.a' \
  --exclude='.ninja_*' --exclude=build.ninja --exclude=prepare-log --exclude=nccl-home \
  --exclude='*.d' . | tar -C "$stage" -xf -
# Strip every ELF file (symbols are not needed to run; the tree shrinks several times).
find "$stage" -type f -print0 | while IFS= read -r -d '' f; do
  if head -c 4 "$f" 2>/dev/null | grep -q $'\x7fELF'; then strip --strip-unneeded "$f" 2>/dev/null || true; fi
done
# Shared libraries from outside the tree that a bare CUDA image may lack: everything
# ldd resolves except the C runtime, the C++ runtime and CUDA's own libraries, which the
# GPU machine brings in versions matching its driver.
mkdir -p "$stage/deplibs"
find "$stage" -type f -perm -u+x -print0 | xargs -0 ldd 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcudart|libnccl|libnvidia[^/]*)\.so' |
  grep -v "^$root/" | while read -r lib; do cp -L "$lib" "$stage/deplibs/"; done
# Which source the tree was built from (the GPU machine's copy of .git may be older).
git -C "$root" describe --always --dirty >"$stage/BUILT_FROM" 2>/dev/null || true
# One compressed file: the binaries shrink about four times, well inside what a call
# may carry.
tar -C "$pack" -cJf "$pack/tree.tar.xz" "$build"
rm -rf "$stage"
du -sh "$pack/tree.tar.xz"
echo "BUILT_AT=$root"
