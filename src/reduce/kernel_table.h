// The reduction kernels' dispatch table and instruction-set levels (internal to
// src/reduce). The same kernel templates (kernels.h) are compiled once per level:
// portable (reducer.cc; SSE2 on x86-64), AVX2 + F16C (reducer_avx2.cc) and AVX-512
// (reducer_avx512.cc). The Reducer uses the table of the current level, chosen on first
// use from the CPU's features and BRAID_SIMD, or forced by setKernelLevel().
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
/// The same kernels compiled for AVX2 + F16C, or nullptr where not built (non-x86).
const KernelTable* avx2Kernels();
/// The same kernels compiled for AVX-512 (F, BW, DQ, VL) + F16C, or nullptr where not built.
const KernelTable* avx512Kernels();

/// Instruction-set levels of the kernels, lowest first.
enum class KernelLevel : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
constexpr int kNumKernelLevels = 3;

/// "portable", "avx2", "avx512" (the BRAID_SIMD spellings).
const char* kernelLevelName(KernelLevel level);
/// Parses a BRAID_SIMD value ("auto" is not a level: false). Case-insensitive.
bool parseKernelLevel(const char* text, KernelLevel* level);
/// True when `level` is built into this binary and this CPU can run it.
bool kernelLevelAvailable(KernelLevel level);
/// The highest available level.
KernelLevel bestKernelLevel();
/// The kernels of an available level (nullptr if not available).
const KernelTable* kernelsFor(KernelLevel level);

/// The level Reducers use now. On first use: BRAID_SIMD if it names an available level
/// (a level the CPU lacks warns once and falls back to the best available), else
/// bestKernelLevel().
KernelLevel kernelLevel();
/// Forces the level used by every Reducer of the process from now on (tests and
/// benchmarks). Returns false, changing nothing, when the level is not available.
bool setKernelLevel(KernelLevel level);
/// Returns to the automatic choice (BRAID_SIMD, else the best level).
void resetKernelLevel();
/// The table of the current level (one relaxed atomic load).
const KernelTable& currentKernels();

}  // namespace reduce_detail
}  // namespace braid
