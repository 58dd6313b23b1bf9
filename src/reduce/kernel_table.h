// The reduction kernels' dispatch table (internal to src/reduce). reducer.cc builds the
// portable one and, on x86-64, reducer_avx2.cc the same kernels compiled for AVX2; the
// Reducer picks one once per process from the CPU's features.
#pragma once
#include <cstddef>

#include "src/reduce/reducer.h"

namespace braid {
namespace reduce_detail {

constexpr int kNumTypes = 12;
constexpr int kNumKinds = 4;
static_assert(ncclNumTypes == kNumTypes, "one kernel row per NCCL datatype");

using ReduceFn = void (*)(void* dst, void* dst2, const void* in, const void* local, size_t n,
                          const void* scalar, int nranks);
using CopyFn = void (*)(void* dst, const void* src, size_t n, const void* scalar, int nranks);

/// Kernels by key. reduce[..][..][pre][post]: pre/post as the effective kPreOp/kPostOp.
struct KernelTable {
  ReduceFn reduce[kNumTypes][kNumKinds][2][2] = {};  ///< [type][kind][pre][post]
  CopyFn copy[kNumTypes][2][2] = {};                 ///< [type][pre][post]; [0][0] unused
};

/// Portable build of the kernels (SSE2 on x86-64).
const KernelTable& portableKernels();
/// The same kernels compiled for AVX2, or nullptr where not built (non-x86).
const KernelTable* avx2Kernels();

}  // namespace reduce_detail
}  // namespace braid
