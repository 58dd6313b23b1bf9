#!/usr/bin/env bash
# check_install.sh <build dir> <scratch dir> <cmake> <c++ compiler>
# Installs the build into <scratch>/prefix and proves the installed tree works as a user
# would use it: the layout, find_package(Braid) with Braid::nccl and with Braid::braid,
# pkg-config with nccl.pc and with braid.pc, and installed programs running from there
# (RPATH) with the build tree out of reach.
set -euo pipefail
build=$1 scratch=$2 cmake=$3 cxx=$4
src=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$scratch" && mkdir -p "$scratch"
prefix=$scratch/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log"; fail "cmake --install"; }

for f in lib/libbraid.so lib/libnccl.so.2.30.7 include/nccl.h include/braid/braid.h \
         include/nccl_device.h include/nccl_device/core.h include/nccl_device/barrier.h \
         bin/braidrun bin/braid-info bin/braid-sim bin/braid-doctor lib/cmake/Braid/BraidConfig.cmake \
         lib/cmake/Braid/BraidConfigVersion.cmake lib/cmake/Braid/BraidTargets.cmake \
         lib/pkgconfig/braid.pc lib/pkgconfig/nccl.pc; do
  [ -f "$prefix/$f" ] || fail "missing $f"
done
[ "$(readlink "$prefix/lib/libnccl.so.2")" = libnccl.so.2.30.7 ] || fail "lib/libnccl.so.2 link"
[ "$(readlink "$prefix/lib/libnccl.so")" = libnccl.so.2 ] || fail "lib/libnccl.so link"
grep -q "#define NCCL_VERSION_CODE 23007" "$prefix/include/nccl.h" || fail "installed nccl.h"
if [ -f "$build/bin/all_reduce_perf" ]; then
  [ -x "$prefix/bin/all_reduce_perf" ] || fail "missing bin/all_reduce_perf (the perf suite)"
fi
echo "layout ok"

# find_package(Braid), each target: the program must be served by the installed library.
for target in nccl braid; do
  dir=$scratch/cmake-$target
  "$cmake" -S "$src/consumer" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCONSUMER_TARGET=Braid::$target -DCMAKE_CXX_COMPILER="$cxx" >"$dir.log" 2>&1 ||
    { cat "$dir.log"; fail "configure with find_package(Braid), Braid::$target"; }
  "$cmake" --build "$dir" >>"$dir.log" 2>&1 || { cat "$dir.log"; fail "build, Braid::$target"; }
  want=$(realpath "$prefix")/lib/lib$target.so
  (cd "$scratch" && env -u LD_LIBRARY_PATH "$dir/consumer" "$want") ||
    fail "consumer linked to Braid::$target"
done

# pkg-config: nccl.pc and braid.pc.
for pc in nccl braid; do
  flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs "$pc") ||
    fail "pkg-config $pc"
  [ "$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --modversion "$pc")" = \
    "$([ $pc = nccl ] && echo 2.30.7 || echo 0.1.0)" ] || fail "pkg-config --modversion $pc"
  # shellcheck disable=SC2086  # the flags are words
  "$cxx" -std=c++17 -o "$scratch/pc-$pc" "$src/consumer/consumer.cc" $flags -pthread -ldl ||
    fail "compile with pkg-config $pc"
  (cd "$scratch" && env -u LD_LIBRARY_PATH "$scratch/pc-$pc" "$(realpath "$prefix")/lib/lib$pc.so") ||
    fail "consumer built with pkg-config $pc"
done

# The device API: a program written as nccl-tests' device implementations are, built with
# nvcc against the installed headers alone (it stops if it sees NVIDIA's nccl_device.h),
# linked to the installed libnccl, run (host checks here; with a GPU, the kernels too).
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$nvcc" ]; then
  "$nvcc" -std=c++17 -arch=sm_90 -I"$prefix/include" -o "$scratch/device-api" \
    "$src/../device_api/lsa_program.cu" -L"$prefix/lib" -lnccl -Xlinker -rpath="$prefix/lib" ||
    fail "nvcc: the device-API program against the installed headers"
  (cd "$scratch" && env -u LD_LIBRARY_PATH "$scratch/device-api" 2) || fail "device-API program"
  echo "device API ok"
else
  echo "device API: SKIPPED (no nvcc at $nvcc)"
fi

# Installed programs run from the prefix (RPATH), not the build tree.
# Whole output first: grep -q stopping early would kill braid-info with SIGPIPE (pipefail).
info=$(env -u LD_LIBRARY_PATH "$prefix/bin/braid-info") || fail "braid-info exited $?"
grep -q "NCCL_BUFFSIZE" <<<"$info" || fail "braid-info: no NCCL_BUFFSIZE in its output"
if [ -x "$prefix/bin/all_reduce_perf" ]; then
  out=$(cd "$scratch" && env -u LD_LIBRARY_PATH "$prefix/bin/all_reduce_perf" -b 8 -e 64K -f 8 \
    -g 2 2>&1) || { echo "$out"; fail "installed all_reduce_perf"; }
  echo "$out" | grep -q "Out of bounds values : 0 OK" || { echo "$out"; fail "all_reduce_perf check"; }
  # ldd's whole output first, as above: grep -q closing the pipe early would make ldd
  # die of SIGPIPE and the pipeline fail now and then.
  libs=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/all_reduce_perf")
  grep -qF "=> $prefix/bin/../lib/libbraid.so" <<<"$libs" ||
    fail "installed all_reduce_perf does not load $prefix/lib/libbraid.so"
fi
echo "INSTALL OK"
