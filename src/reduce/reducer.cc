// Reducer: element-wise kernels of the host executor.
//
// Design:
//  * One kernel template per (type, op kind, pre, post) (src/reduce/kernels.h); a
//    constexpr table keyed by those four (filled by key from the type's ncclDataType_t,
//    not by position) is consulted once per call. Only sums have pre/post variants
//    (PreMulSum and Avg are sums), so the other kinds share their plain kernel.
//  * The table is built three times on x86-64: portable (SSE2, here), for AVX2 + F16C
//    (reducer_avx2.cc) and for AVX-512 (reducer_avx512.cc); kernel_level.cc picks one
//    from the CPU's features and BRAID_SIMD. All give bit-identical results (no FMA
//    contraction in any), NaN payloads aside: which NaN operand propagates may depend
//    on how the compiler orders a commutative op.
//  * Kernels work in blocks of kBlockBytes: the block is computed into a stack buffer
//    by a loop of constant trip count over __restrict pointers (which GCC vectorises
//    even at -O2, whose "very cheap" cost model refuses loops that need an epilogue
//    or alias checks), then copied to the destination(s). Reading a whole block
//    before writing it is what makes dst == in / dst == local exactly safe, and gives
//    reduce2 its second store for free. When the (single) destination overlaps no
//    input, the same loops write straight to it (the __restrict promise then holds),
//    saving the copy.
//  * The x86 builds replace the generic kernels of fp32 and of the narrow floats with
//    explicit vector code (narrow_simd.h: F16C for fp16, integer rounding for bf16 and
//    fp8), one vector of each input loaded before its result is stored, straight to the
//    destination(s).
//  * Loads and stores go through under-aligned typedefs, so any pointer works
//    (element-misaligned included) and the vectoriser emits unaligned accesses.
//
// Numerics (deterministic, documented in reducer.h and float_types.h):
//  * Integers: sum/prod wrap (computed in the unsigned type), max/min compare in the
//    signed or unsigned type, PreMulSum multiplies in the type (wrapping), Avg divides
//    the wrapped sum by nranks truncating toward zero (as NCCL's integer Avg).
//  * fp32 / fp64: computed in the type. fp16, bf16, fp8: computed in float and rounded
//    to the type (nearest even; fp8 saturating) after every operation: after the
//    PreMulSum multiply, after the op, and after Avg's division. For two narrow
//    operands float is wide enough (24 >= 2p+2 bits) that this equals the correctly
//    rounded narrow operation, i.e. what NCCL's __hadd/__hmul (and, for fp8, half
//    arithmetic then the SATFINITE store) produce.
//  * Avg divides by nranks (NCCL multiplies floats by 1/nranks; the division is the
//    correctly rounded mean and the same whenever nranks is a power of two).
//  * max/min of floating types follow IEEE maxNum/minNum as NCCL's fmaxf/fminf and
//    __hmax/__hmin do: a NaN operand is ignored (NaN only if both are NaN), and
//    +0 > -0, so the op is commutative and every algorithm's order gives the same bits.
#include "src/reduce/reducer.h"

#include <cstring>

#include "algorithms/plan.h"
#include "src/reduce/kernel_table.h"

#define BRAID_REDUCE_KERNEL_NS portable
#include "src/reduce/kernels.h"
#include "src/reduce/kernel_fill.h"
#undef BRAID_REDUCE_KERNEL_NS

namespace braid {
namespace reduce_detail {

const KernelTable& portableKernels() { return portable::kTable; }

}  // namespace reduce_detail

namespace {

using reduce_detail::KernelTable;
using reduce_detail::kNumTypes;
using Kind = Reducer::Kind;

/// The kernels of the current level (kernel_level.cc).
const KernelTable& kernels() { return reduce_detail::currentKernels(); }

bool validType(ncclDataType_t t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumTypes; }

}  // namespace

// ---- Reducer ------------------------------------------------------------------------

Reducer::Reducer(ncclDataType_t type, ncclRedOp_t op, int nranks)
    : type_(validType(type) ? type : ncclFloat32), nranks_(nranks > 0 ? nranks : 1) {
  typeSize_ = dataTypeSize(type_);
  switch (op) {
    case ncclProd:
      kind_ = Kind::kProd;
      break;
    case ncclMax:
      kind_ = Kind::kMax;
      break;
    case ncclMin:
      kind_ = Kind::kMin;
      break;
    case ncclAvg:
      kind_ = Kind::kSum;
      hasPost_ = true;
      break;
    default:  // ncclSum, and (caller-validated, so never) anything else
      kind_ = Kind::kSum;
      break;
  }
}

Reducer Reducer::preMulSum(ncclDataType_t type, const void* scalar, int nranks) {
  Reducer r(type, ncclSum, nranks);
  r.hasPre_ = true;
  if (scalar != nullptr) std::memcpy(r.scalar_, scalar, r.typeSize_);
  return r;
}

void Reducer::reduce(void* dst, const void* in, const void* local, size_t n,
                     uint8_t flags) const {
  reduce2(dst, nullptr, in, local, n, flags);
}

void Reducer::reduce2(void* dst, void* dst2, const void* in, const void* local, size_t n,
                      uint8_t flags) const {
  if (n == 0) return;
  const int pre = hasPre_ && (flags & kPreOp) ? 1 : 0;
  const int post = hasPost_ && (flags & kPostOp) ? 1 : 0;
  kernels().reduce[type_][static_cast<int>(kind_)][pre][post](dst, dst2, in, local, n, scalar_,
                                                             nranks_);
}

void Reducer::copy(void* dst, const void* src, size_t n, uint8_t flags) const {
  if (n == 0) return;
  const int pre = hasPre_ && (flags & kPreOp) ? 1 : 0;
  const int post = hasPost_ && (flags & kPostOp) ? 1 : 0;
  if (pre == 0 && post == 0) {
    if (dst != src) std::memmove(dst, src, n * typeSize_);
    return;
  }
  kernels().copy[type_][pre][post](dst, src, n, scalar_, nranks_);
}

// ---- names and sizes ------------------------------------------------------------------

size_t dataTypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* dataTypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "half";
    case ncclFloat32: return "float";
    case ncclFloat64: return "double";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "f8e4m3";
    case ncclFloat8e5m2: return "f8e5m2";
    default: return "unknown";
  }
}

const char* redOpName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default:
      // User-created ops (ncclRedOpCreatePreMulSum) are numbered from ncclNumOps.
      return static_cast<int>(op) >= static_cast<int>(ncclNumOps) && op != ncclMaxRedOp
                 ? "premulsum"
                 : "unknown";
  }
}

}  // namespace braid
