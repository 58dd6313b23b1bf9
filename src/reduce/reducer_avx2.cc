// The reduction kernels compiled for AVX2 (x86-64 only; elsewhere avx2Kernels() is
// nullptr). Everything the kernels include is included before the target pragma, so
// only the kernel templates themselves, in their own namespace, become AVX2 code.
// Not enabled: FMA (it would fuse PreMulSum's multiply with the sum and change the
// rounding), AVX-512 (frequency effects; the loops are memory-bound at AVX2 width).
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "src/reduce/float_types.h"
#include "src/reduce/kernel_table.h"

#if defined(__x86_64__) && defined(__GNUC__)

#pragma GCC push_options
#pragma GCC target("avx2")
#define BRAID_REDUCE_KERNEL_NS avx2
#include "src/reduce/kernels.h"
#undef BRAID_REDUCE_KERNEL_NS
#pragma GCC pop_options

namespace braid {
namespace reduce_detail {
const KernelTable* avx2Kernels() { return &avx2::kTable; }
}  // namespace reduce_detail
}  // namespace braid

#else

namespace braid {
namespace reduce_detail {
const KernelTable* avx2Kernels() { return nullptr; }
}  // namespace reduce_detail
}  // namespace braid

#endif
