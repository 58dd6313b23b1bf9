// The fuzz build's stand-in for src/reduce/reducer_avx2.cc and reducer_avx512.cc: clang
// cannot compile their `#pragma GCC target` sections, so a BRAID_FUZZ=ON build has no
// SIMD kernel tables and every reduction runs the portable kernels (which the reduce
// tests prove bit-identical to the SIMD ones). See tests/fuzz.cmake.
#include "src/reduce/kernel_table.h"

namespace braid {
namespace reduce_detail {

const KernelTable* avx2Kernels() { return nullptr; }
const KernelTable* avx512Kernels() { return nullptr; }

}  // namespace reduce_detail
}  // namespace braid
