// Explicit-SIMD kernels for the narrow floats (fp16, bf16, fp8 e4m3 / e5m2), replacing
// the generic templates of kernels.h in the x86 builds, where the auto-vectorised
// bit-twiddling conversions cost several cycles per element. Internal to src/reduce.
//
// Included by an instruction set's .cc (reducer_avx2.cc, reducer_avx512.cc) inside its
// BRAID_REDUCE_KERNEL_NS, after kernels.h and after defining `struct Isa`, the vector
// operations of that instruction set on Isa::kLanes float / int32 lanes:
//   F, I, M                       float vector, int32 vector, lane mask
//   loadF/storeF                  kLanes floats (unaligned)
//   loadHalf/storeHalf/roundHalf  kLanes fp16 <-> float (F16C, round to nearest even)
//   loadU16/loadU8, storeU16/U8   kLanes narrow integers <-> int32 lanes (zero-extend,
//                                 truncate)
//   setF/setI, add/mul/div (F), addI/subI/andI/orI, srl<k>/sll<k> (logical shifts)
//   gtI (signed), eqI, ltF/eqF (ordered), nanF, selI/selF (m ? a : b), asF/asI (bit
//   casts), cvtF (int32 -> float)
// and before kernel_fill.h, which then picks the specializations below.
//
// Every operation mirrors the scalar definition in float_types.h / kernels.h step by
// step (same float operations in the same order, same integer rounding), so the results
// are bit-identical to the portable build (NaN payloads aside). fp16 uses the hardware
// conversions, which round to nearest even and handle subnormals exactly like
// halfToFloat / floatToHalf. The kernels load a whole vector of both inputs before
// storing it, so dst == in / dst == local (exactly) is safe; a tail shorter than a vector
// goes through a small zero-filled stack buffer.
#pragma once
#ifndef BRAID_REDUCE_KERNEL_NS
#error "define BRAID_REDUCE_KERNEL_NS before including src/reduce/narrow_simd.h"
#endif
#include "src/reduce/kernels.h"

namespace braid {
namespace reduce_detail {
namespace BRAID_REDUCE_KERNEL_NS {

namespace narrow {

using F = Isa::F;
using I = Isa::I;
constexpr int kLanes = Isa::kLanes;

/// fp32 itself (WideFloatTraits<float>: no rounding steps). Through these kernels rather
/// than the generic ones, results go straight to the destination(s) without the
/// generic kernels' stack block.
struct F32Vec {
  using S = float;
  static F load(const void* p) { return Isa::loadF(p); }
  static void store(void* p, F v) { Isa::storeF(p, v); }
  static F round(F v) { return v; }
};

/// fp16 through the hardware conversions.
struct HalfVec {
  using S = uint16_t;
  static F load(const void* p) { return Isa::loadHalf(p); }
  static void store(void* p, F v) { Isa::storeHalf(p, v); }
  static F round(F v) { return Isa::roundHalf(v); }
};

/// bf16: the upper half of a float; rounding as floatToBfloat16.
struct Bf16Vec {
  using S = uint16_t;
  static F decode(I v) { return Isa::asF(Isa::sll<16>(v)); }
  static F load(const void* p) { return decode(Isa::loadU16(p)); }
  static void store(void* p, F v) { Isa::storeU16(p, encode(v)); }
  static F round(F v) { return decode(encode(v)); }
  static I encode(F v) {
    const I x = Isa::asI(v);
    const I lsb = Isa::andI(Isa::srl<16>(x), Isa::setI(1));
    const I r = Isa::srl<16>(Isa::addI(Isa::addI(x, Isa::setI(0x7fffu)), lsb));
    const I nan = Isa::orI(Isa::srl<16>(x), Isa::setI(0x40u));
    const I a = Isa::andI(x, Isa::setI(0x7fffffffu));
    return Isa::selI(Isa::gtI(a, Isa::setI(0x7f800000u)), nan, r);
  }
};

/// fp8 with M mantissa bits and bias Bias: fpbits::fp8ToFloat / floatToFp8, lane-wise.
/// All the integer compares below are between values below 2^31, so signed is right.
template <unsigned M, unsigned Bias, unsigned MaxCode, bool IeeeSpecials>
struct Fp8Vec {
  using S = uint8_t;
  static F load(const void* p) { return decode(Isa::loadU8(p)); }
  static void store(void* p, F v) { Isa::storeU8(p, encode(v)); }
  static F round(F v) { return decode(encode(v)); }
  static F decode(I v) {
    constexpr unsigned kShift = 23 - M;
    constexpr uint32_t kSubScale = (127u + 1u - Bias - M) << 23;
    const I sign = Isa::sll<24>(Isa::andI(v, Isa::setI(0x80u)));
    const I em = Isa::andI(v, Isa::setI(0x7fu));
    const I nor = Isa::addI(Isa::sll<kShift>(em), Isa::setI((127u - Bias) << 23));
    const I sub = Isa::asI(Isa::mul(Isa::cvtF(em), Isa::asF(Isa::setI(kSubScale))));
    I r = Isa::selI(Isa::gtI(Isa::setI(1u << M), em), sub, nor);
    if (IeeeSpecials) {
      constexpr uint32_t kInfCode = 0x7fu & ~((1u << M) - 1u);
      r = Isa::selI(Isa::eqI(em, Isa::setI(kInfCode)), Isa::setI(0x7f800000u), r);
      const I nan = Isa::orI(Isa::setI(0x7fc00000u),
                             Isa::sll<kShift>(Isa::andI(em, Isa::setI((1u << M) - 1u))));
      r = Isa::selI(Isa::gtI(em, Isa::setI(kInfCode)), nan, r);
    } else {
      r = Isa::selI(Isa::eqI(em, Isa::setI(0x7fu)), Isa::setI(0x7fc00000u), r);
    }
    return Isa::asF(Isa::orI(r, sign));
  }
  static I encode(F f) {
    constexpr unsigned kShift = 23 - M;
    constexpr uint32_t kMinNormal = (128u - Bias) << 23;
    constexpr uint32_t kRebias = (127u - Bias) << 23;
    constexpr uint32_t kMagic = (127u + 24u - Bias - M) << 23;
    const I x = Isa::asI(f);
    const I sign = Isa::andI(Isa::srl<24>(x), Isa::setI(0x80u));
    const I a = Isa::andI(x, Isa::setI(0x7fffffffu));
    const auto small = Isa::gtI(Isa::setI(kMinNormal), a);
    const I aSmall = Isa::selI(small, a, Isa::setI(0));
    const I sub =
        Isa::subI(Isa::asI(Isa::add(Isa::asF(aSmall), Isa::asF(Isa::setI(kMagic)))), Isa::setI(kMagic));
    const I lsb = Isa::andI(Isa::srl<kShift>(a), Isa::setI(1));
    I nor = Isa::srl<kShift>(Isa::addI(
        Isa::addI(Isa::subI(a, Isa::setI(kRebias)), Isa::setI((1u << (kShift - 1)) - 1u)), lsb));
    // nor wraps (huge) when a < kRebias; then `small` holds and sub is chosen anyway.
    nor = Isa::selI(Isa::gtI(nor, Isa::setI(MaxCode)), Isa::setI(MaxCode), nor);
    I r = Isa::orI(Isa::selI(small, sub, nor), sign);
    return Isa::selI(Isa::gtI(a, Isa::setI(0x7f800000u)), Isa::setI(0x7fu), r);
  }
};

using E4m3Vec = Fp8Vec<3, 7, 0x7e, false>;
using E5m2Vec = Fp8Vec<2, 15, 0x7b, true>;

/// IEEE maxNum / minNum with +0 > -0 (FloatMinMax in kernels.h).
inline F maxF(F a, F b) {
  F r = Isa::selF(Isa::ltF(a, b), b, a);
  r = Isa::selF(Isa::eqF(a, b), Isa::asF(Isa::andI(Isa::asI(a), Isa::asI(b))), r);
  return Isa::selF(Isa::nanF(a), b, r);
}
inline F minF(F a, F b) {
  F r = Isa::selF(Isa::ltF(b, a), b, a);
  r = Isa::selF(Isa::eqF(a, b), Isa::asF(Isa::orI(Isa::asI(a), Isa::asI(b))), r);
  return Isa::selF(Isa::nanF(a), b, r);
}

template <Kind K>
inline F applyF(F a, F b) {
  if (K == Kind::kSum) return Isa::add(a, b);
  if (K == Kind::kProd) return Isa::mul(a, b);
  if (K == Kind::kMax) return maxF(a, b);
  return minF(a, b);
}

template <class V, Kind K, bool Pre, bool Post>
inline void reduceVec(void* out, void* out2, const void* a, const void* b, F scalar, F nranks) {
  const F x = V::load(a);
  F y = V::load(b);
  if (Pre) y = V::round(Isa::mul(y, scalar));
  F r = applyF<K>(x, y);
  if (Post) r = Isa::div(V::round(r), nranks);
  V::store(out, r);
  if (out2 != nullptr) V::store(out2, r);
}

template <class V, bool Pre, bool Post>
inline void copyVec(void* out, const void* a, F scalar, F nranks) {
  F r = V::load(a);
  if (Pre) r = Isa::mul(r, scalar);
  if (Pre && Post) r = V::round(r);
  if (Post) r = Isa::div(r, nranks);
  V::store(out, r);
}

template <class V, class Tr, Kind K, bool Pre, bool Post>
void reduceKernel(void* dst, void* dst2, const void* in, const void* local, size_t n,
                  const void* scalarBytes, int nranksIn) {
  using S = typename V::S;
  const Params<Tr> p(scalarBytes, nranksIn);
  const F scalar = Isa::setF(p.scalar), nranks = Isa::setF(static_cast<float>(p.nranks));
  S* d = static_cast<S*>(dst);
  S* d2 = static_cast<S*>(dst2);
  const S* a = static_cast<const S*>(in);
  const S* b = static_cast<const S*>(local);
  size_t i = 0;
  if (d2 == nullptr) {
    for (; i + kLanes <= n; i += kLanes)
      reduceVec<V, K, Pre, Post>(d + i, nullptr, a + i, b + i, scalar, nranks);
  } else {
    for (; i + kLanes <= n; i += kLanes)
      reduceVec<V, K, Pre, Post>(d + i, d2 + i, a + i, b + i, scalar, nranks);
  }
  if (i < n) {
    const size_t bytes = (n - i) * sizeof(S);
    alignas(64) S ta[kLanes] = {}, tb[kLanes] = {}, to[kLanes];
    std::memcpy(ta, a + i, bytes);
    std::memcpy(tb, b + i, bytes);
    reduceVec<V, K, Pre, Post>(to, nullptr, ta, tb, scalar, nranks);
    std::memcpy(d + i, to, bytes);
    if (d2 != nullptr) std::memcpy(d2 + i, to, bytes);
  }
}

template <class V, class Tr, bool Pre, bool Post>
void copyKernel(void* dst, const void* src, size_t n, const void* scalarBytes, int nranksIn) {
  using S = typename V::S;
  const Params<Tr> p(scalarBytes, nranksIn);
  const F scalar = Isa::setF(p.scalar), nranks = Isa::setF(static_cast<float>(p.nranks));
  S* d = static_cast<S*>(dst);
  const S* a = static_cast<const S*>(src);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) copyVec<V, Pre, Post>(d + i, a + i, scalar, nranks);
  if (i < n) {
    const size_t bytes = (n - i) * sizeof(S);
    alignas(64) S ta[kLanes] = {}, to[kLanes];
    std::memcpy(ta, a + i, bytes);
    copyVec<V, Pre, Post>(to, ta, scalar, nranks);
    std::memcpy(d + i, to, bytes);
  }
}

}  // namespace narrow

// The specializations kernel_fill.h picks up, one pair per narrow type.
#define BRAID_NARROW_SIMD(T, V)                                                             \
  template <Kind K, bool Pre, bool Post>                                                    \
  struct ReduceKernel<TraitsOf<T>, K, Pre, Post> {                                          \
    static void run(void* dst, void* dst2, const void* in, const void* local, size_t n,     \
                    const void* scalar, int nranks) {                                       \
      narrow::reduceKernel<narrow::V, TraitsOf<T>, K, Pre, Post>(dst, dst2, in, local, n,   \
                                                                 scalar, nranks);           \
    }                                                                                       \
  };                                                                                        \
  template <bool Pre, bool Post>                                                            \
  struct CopyKernel<TraitsOf<T>, Pre, Post> {                                               \
    static void run(void* dst, const void* src, size_t n, const void* scalar, int nranks) { \
      narrow::copyKernel<narrow::V, TraitsOf<T>, Pre, Post>(dst, src, n, scalar, nranks);   \
    }                                                                                       \
  };
BRAID_NARROW_SIMD(ncclFloat32, F32Vec)
BRAID_NARROW_SIMD(ncclFloat16, HalfVec)
BRAID_NARROW_SIMD(ncclBfloat16, Bf16Vec)
BRAID_NARROW_SIMD(ncclFloat8e4m3, E4m3Vec)
BRAID_NARROW_SIMD(ncclFloat8e5m2, E5m2Vec)
#undef BRAID_NARROW_SIMD

}  // namespace BRAID_REDUCE_KERNEL_NS
}  // namespace reduce_detail
}  // namespace braid
