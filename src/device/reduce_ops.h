// Element functors of the CUDA executor (host and device code): for each NCCL datatype
// the arithmetic of the host Reducer (src/reduce/kernels.h), step for step, so that a
// reduction computed by the kernel is bit-identical to the host executor's:
//  * integers: sum/prod wrap (computed in the unsigned type), max/min compare in the
//    type, PreMulSum multiplies in the type (wrapping), Avg divides the wrapped sum by
//    nranks truncating toward zero;
//  * fp32 / fp64: computed in the type, every operation rounded on its own (on the GPU
//    through the __f*_rn / __d*_rn intrinsics, which the compiler never contracts into
//    an FMA; the host build uses no FMA either);
//  * fp16, bf16, fp8 e4m3 / e5m2: computed in float and rounded back to the type
//    (nearest even, fp8 saturating) after every operation, with the conversions of
//    src/reduce/float_types.h;
//  * max/min of floating types: IEEE maxNum/minNum with +0 > -0, on the bits.
// The one documented difference: a NaN produced by arithmetic on the GPU is the
// canonical NaN, while x86 keeps an operand's payload (NaN stays NaN either way; fp8
// NaNs are canonical on both).
//
//   DevOp<DevTraits<ncclFloat16>, DevRed::kSum> op(work, flags);
//   out = op.reduce(in, local);   // post( in + pre(local) )
//   out = op.copy(in);            // post( pre(in) )
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "algorithms/plan.h"
#include "nccl.h"
#include "src/device/dev_launch.h"
#include "src/device/hd.h"
#include "src/reduce/float_types.h"

namespace braid {
namespace devred {

// ---- rounding-exact arithmetic (no FMA contraction on the GPU) -----------------------

BRAID_HD_INLINE float addF(float a, float b) {
#if BRAID_DEVICE_PASS
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
BRAID_HD_INLINE float mulF(float a, float b) {
#if BRAID_DEVICE_PASS
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
BRAID_HD_INLINE float divF(float a, float b) {
#if BRAID_DEVICE_PASS
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
BRAID_HD_INLINE double addF(double a, double b) {
#if BRAID_DEVICE_PASS
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
BRAID_HD_INLINE double mulF(double a, double b) {
#if BRAID_DEVICE_PASS
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
BRAID_HD_INLINE double divF(double a, double b) {
#if BRAID_DEVICE_PASS
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

BRAID_HD_INLINE uint32_t bitsOf(float f) { return fpbits::toBits(f); }
BRAID_HD_INLINE float floatOf(uint32_t b) { return fpbits::fromBits(b); }
BRAID_HD_INLINE uint64_t bitsOf(double d) {
#if BRAID_DEVICE_PASS
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
#endif
}
BRAID_HD_INLINE double doubleOf(uint64_t b) {
#if BRAID_DEVICE_PASS
  return __longlong_as_double(static_cast<long long>(b));
#else
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
#endif
}
BRAID_HD_INLINE float fromBitsOf(uint32_t b, float) { return floatOf(b); }
BRAID_HD_INLINE double fromBitsOf(uint64_t b, double) { return doubleOf(b); }

/// IEEE maxNum/minNum with +0 > -0 (kernels.h FloatMinMax, same selects).
template <class F>
struct MinMax {
  using B = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  BRAID_HD_INLINE static F max(F a, F b) {
    const B ab = bitsOf(a), bb = bitsOf(b);
    B r = a < b ? bb : ab;
    if (a == b) r = ab & bb;  // max(+0, -0) = +0
    if (a != a) r = bb;       // a NaN: take b
    return fromBitsOf(r, F());
  }
  BRAID_HD_INLINE static F min(F a, F b) {
    const B ab = bitsOf(a), bb = bitsOf(b);
    B r = b < a ? bb : ab;
    if (a == b) r = ab | bb;  // min(+0, -0) = -0
    if (a != a) r = bb;
    return fromBitsOf(r, F());
  }
};

// ---- per-type traits --------------------------------------------------------------------

/// Integers: compute in the type, wrap through the unsigned type.
template <class S>
struct IntTraits {
  using Storage = S;
  using Compute = S;
  using U = std::make_unsigned_t<S>;
  using Wide = std::conditional_t<std::is_signed<S>::value, int64_t, uint64_t>;
  BRAID_HD_INLINE static Compute load(S v) { return v; }
  BRAID_HD_INLINE static S store(Compute v) { return v; }
  BRAID_HD_INLINE static Compute round(Compute v) { return v; }
  BRAID_HD_INLINE static Compute add(Compute a, Compute b) {
    return static_cast<S>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
  BRAID_HD_INLINE static Compute mul(Compute a, Compute b) {
    return static_cast<S>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
  BRAID_HD_INLINE static Compute max(Compute a, Compute b) { return a > b ? a : b; }
  BRAID_HD_INLINE static Compute min(Compute a, Compute b) { return a < b ? a : b; }
  /// Truncating division (the host divides 8/32-bit values in float/double, which is
  /// exact and so the same as this integer division).
  BRAID_HD_INLINE static Compute div(Compute a, int n) {
    return static_cast<S>(static_cast<Wide>(a) / static_cast<Wide>(n));
  }
};

/// fp32 / fp64: compute in the type.
template <class F>
struct WideFloatTraits {
  using Storage = F;
  using Compute = F;
  BRAID_HD_INLINE static Compute load(F v) { return v; }
  BRAID_HD_INLINE static F store(Compute v) { return v; }
  BRAID_HD_INLINE static Compute round(Compute v) { return v; }
  BRAID_HD_INLINE static Compute add(Compute a, Compute b) { return addF(a, b); }
  BRAID_HD_INLINE static Compute mul(Compute a, Compute b) { return mulF(a, b); }
  BRAID_HD_INLINE static Compute max(Compute a, Compute b) { return MinMax<F>::max(a, b); }
  BRAID_HD_INLINE static Compute min(Compute a, Compute b) { return MinMax<F>::min(a, b); }
  BRAID_HD_INLINE static Compute div(Compute a, int n) { return divF(a, static_cast<F>(n)); }
};

/// The storage codecs of the narrow floats (float_types.h).
struct HalfCodec {
  BRAID_HD_INLINE static float toFloat(uint16_t v) { return halfToFloat(v); }
  BRAID_HD_INLINE static uint16_t fromFloat(float f) { return floatToHalf(f); }
};
struct Bf16Codec {
  BRAID_HD_INLINE static float toFloat(uint16_t v) { return bfloat16ToFloat(v); }
  BRAID_HD_INLINE static uint16_t fromFloat(float f) { return floatToBfloat16(f); }
};
struct E4m3Codec {
  BRAID_HD_INLINE static float toFloat(uint8_t v) { return fp8e4m3ToFloat(v); }
  BRAID_HD_INLINE static uint8_t fromFloat(float f) { return floatToFp8e4m3(f); }
};
struct E5m2Codec {
  BRAID_HD_INLINE static float toFloat(uint8_t v) { return fp8e5m2ToFloat(v); }
  BRAID_HD_INLINE static uint8_t fromFloat(float f) { return floatToFp8e5m2(f); }
};

/// Narrow floats: compute in float, round to the type on every store.
template <class S, class Codec>
struct NarrowFloatTraits {
  using Storage = S;
  using Compute = float;
  BRAID_HD_INLINE static Compute load(S v) { return Codec::toFloat(v); }
  BRAID_HD_INLINE static S store(Compute v) { return Codec::fromFloat(v); }
  BRAID_HD_INLINE static Compute round(Compute v) { return Codec::toFloat(Codec::fromFloat(v)); }
  BRAID_HD_INLINE static Compute add(Compute a, Compute b) { return addF(a, b); }
  BRAID_HD_INLINE static Compute mul(Compute a, Compute b) { return mulF(a, b); }
  BRAID_HD_INLINE static Compute max(Compute a, Compute b) { return MinMax<float>::max(a, b); }
  BRAID_HD_INLINE static Compute min(Compute a, Compute b) { return MinMax<float>::min(a, b); }
  BRAID_HD_INLINE static Compute div(Compute a, int n) { return divF(a, static_cast<float>(n)); }
};

/// Raw bytes: the storage of the copy-only kernels (DevRed::kNone). No arithmetic.
struct ByteTraits {
  using Storage = uint8_t;
  using Compute = uint8_t;
  BRAID_HD_INLINE static Compute load(uint8_t v) { return v; }
  BRAID_HD_INLINE static uint8_t store(Compute v) { return v; }
  BRAID_HD_INLINE static Compute round(Compute v) { return v; }
  BRAID_HD_INLINE static Compute add(Compute a, Compute) { return a; }
  BRAID_HD_INLINE static Compute mul(Compute a, Compute) { return a; }
  BRAID_HD_INLINE static Compute max(Compute a, Compute) { return a; }
  BRAID_HD_INLINE static Compute min(Compute a, Compute) { return a; }
  BRAID_HD_INLINE static Compute div(Compute a, int) { return a; }
};

/// The traits of each NCCL datatype, keyed by its enum value.
template <int T>
struct DevTraits;
template <>
struct DevTraits<ncclInt8> : IntTraits<int8_t> {};
template <>
struct DevTraits<ncclUint8> : IntTraits<uint8_t> {};
template <>
struct DevTraits<ncclInt32> : IntTraits<int32_t> {};
template <>
struct DevTraits<ncclUint32> : IntTraits<uint32_t> {};
template <>
struct DevTraits<ncclInt64> : IntTraits<int64_t> {};
template <>
struct DevTraits<ncclUint64> : IntTraits<uint64_t> {};
template <>
struct DevTraits<ncclFloat16> : NarrowFloatTraits<uint16_t, HalfCodec> {};
template <>
struct DevTraits<ncclFloat32> : WideFloatTraits<float> {};
template <>
struct DevTraits<ncclFloat64> : WideFloatTraits<double> {};
template <>
struct DevTraits<ncclBfloat16> : NarrowFloatTraits<uint16_t, Bf16Codec> {};
template <>
struct DevTraits<ncclFloat8e4m3> : NarrowFloatTraits<uint8_t, E4m3Codec> {};
template <>
struct DevTraits<ncclFloat8e5m2> : NarrowFloatTraits<uint8_t, E5m2Codec> {};

// ---- the functor --------------------------------------------------------------------------

/// One work's reduction with one step's flags: reduce(in, local) = post(in OP pre(local)),
/// copy(in) = post(pre(in)); pre only for a PreMulSum work with kPreOp, post only for
/// an Avg work with kPostOp (both only for sums), as the host Reducer.
template <class Tr, DevRed R>
struct DevOp {
  using S = typename Tr::Storage;
  using C = typename Tr::Compute;
  C scalar{};
  int nranks = 1;
  bool pre = false;
  bool post = false;

  DevOp() = default;
  /// scalarStorage: the PreMulSum scalar as one element (read by the caller).
  BRAID_HD_INLINE DevOp(bool hasPre, S scalarStorage, bool hasPost, int n, uint8_t flags)
      : scalar(Tr::load(scalarStorage)),
        nranks(n > 0 ? n : 1),
        pre(R == DevRed::kSum && hasPre && (flags & kPreOp) != 0),
        post(R == DevRed::kSum && hasPost && (flags & kPostOp) != 0) {}

  /// Whether copy() is the identity (a plain byte copy does the job).
  BRAID_HD_INLINE bool copyIsIdentity() const { return !pre && !post; }

  BRAID_HD_INLINE static C apply(C a, C b) {
    if (R == DevRed::kSum) return Tr::add(a, b);
    if (R == DevRed::kProd) return Tr::mul(a, b);
    if (R == DevRed::kMax) return Tr::max(a, b);
    if (R == DevRed::kMin) return Tr::min(a, b);
    return a;  // kNone: never reduces
  }
  BRAID_HD_INLINE S reduce(S in, S local) const {
    const C x = Tr::load(in);
    C y = Tr::load(local);
    if (pre) y = Tr::round(Tr::mul(y, scalar));
    C r = apply(x, y);
    if (post) r = Tr::div(Tr::round(r), nranks);
    return Tr::store(r);
  }
  BRAID_HD_INLINE S copy(S in) const {
    if (!pre && !post) return in;  // the bits as they are (a NaN's payload included)
    C r = Tr::load(in);
    if (pre) r = Tr::mul(r, scalar);
    if (pre && post) r = Tr::round(r);
    if (post) r = Tr::div(r, nranks);
    return Tr::store(r);
  }
};

}  // namespace devred
}  // namespace braid
