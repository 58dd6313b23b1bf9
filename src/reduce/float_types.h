// Narrow floating-point formats: conversions between float and the storage bits of
// fp16 (IEEE binary16), bf16 (bfloat16), fp8 e4m3 (OCP E4M3FN) and fp8 e5m2.
//
// Rules (all conversions are exact for every input; no table, no FPU mode besides the
// default round-to-nearest-even is assumed, and flush-to-zero / denormals-are-zero
// modes do not change any result):
//  * narrow -> float is exact (every narrow value is a float). NaN stays NaN (quiet).
//  * float -> narrow rounds to nearest, ties to even, subnormal results included.
//  * fp16 / bf16: overflow gives +-infinity (IEEE); NaN stays NaN: the sign and the top
//    payload bits are kept and the quiet bit is set (what F16C's vcvtps2ph and GCC's
//    _Float16 do).
//  * fp8 e4m3 (no infinities, 0x7F/0xFF are NaN, max 448) and fp8 e5m2 (IEEE-like, max
//    57344, 0x7C is infinity): we saturate, as CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2
//    constructors do (they use __NV_SATFINITE, not __NV_NOSAT; see the CUDA Math API,
//    "__nv_fp8_e4m3: Constructor from float data type, relies on __NV_SATFINITE
//    behavior for out-of-range values"). NCCL's fp8 kernels compute each op in half
//    precision and store the result through those constructors, so a sum that leaves
//    the fp8 range is stored as +-max finite, never as inf/NaN; +-infinity inputs also
//    become +-max finite (an e5m2 infinity therefore does not survive a reduction, as
//    in NCCL). NaN -> 0x7F (the canonical NaN; CUDA drops the sign too). The sign of a
//    zero or of an underflowing value is kept.
//
// The functions are branch-free (selects on bit masks), so loops calling them
// auto-vectorise.
#pragma once
#include <cstdint>
#include <cstring>

// Always inlined: they are meant for the inner loops of the reduction kernels. Also
// compiled for the GPU (the CUDA executor's reductions, src/device/reduce_ops.h), so
// that device and host round identically.
#if defined(__CUDACC__)
#define BRAID_FP_INLINE __host__ __device__ __forceinline__
#else
#define BRAID_FP_INLINE inline __attribute__((always_inline))
#endif

namespace braid {
namespace fpbits {

BRAID_FP_INLINE uint32_t toBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
#endif
}
BRAID_FP_INLINE float fromBits(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(x);
#else
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
#endif
}
/// c ? a : b, written with masks so that the vectoriser does not see control flow.
BRAID_FP_INLINE uint32_t select(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

/// float -> fp8 with M mantissa bits and exponent bias `Bias`, round to nearest even,
/// saturating to the code `MaxCode` (the largest finite magnitude); NaN -> 0x7F.
template <unsigned M, unsigned Bias, unsigned MaxCode>
BRAID_FP_INLINE uint8_t floatToFp8(float f) {
  constexpr unsigned kShift = 23 - M;                         // float mantissa bits dropped
  constexpr uint32_t kMinNormal = (128u - Bias) << 23;        // 2^(1-Bias)
  constexpr uint32_t kRebias = (127u - Bias) << 23;           // float exponent -> fp8 exponent
  constexpr uint32_t kMagic = (127u + 24u - Bias - M) << 23;  // a float whose ulp is 2^(1-Bias-M)
  const uint32_t x = toBits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  const bool small = a < kMinNormal;
  // Subnormal (or zero) result: adding kMagic makes the FPU round |f| to a multiple of
  // the fp8 minimum subnormal; the low bits of the sum are the code (8 << ... = the
  // smallest normal when it rounds up, which is the right encoding too).
  const uint32_t sub = toBits(fromBits(select(small, a, 0u)) + fromBits(kMagic)) - kMagic;
  // Normal result: rebias the exponent and round the mantissa (a carry out of the
  // mantissa correctly bumps the exponent); then saturate.
  uint32_t nor = (a - kRebias + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u)) >> kShift;
  nor = select(nor > MaxCode, MaxCode, nor);
  uint32_t r = select(small, sub, nor) | sign;
  r = select(a > 0x7f800000u, 0x7fu, r);
  return static_cast<uint8_t>(r);
}

/// fp8 (M mantissa bits, bias `Bias`) -> float. Specials: e4m3 (IeeeSpecials false):
/// only 0x7F/0xFF are NaN; e5m2 (true): exponent all ones is inf / NaN.
template <unsigned M, unsigned Bias, bool IeeeSpecials>
BRAID_FP_INLINE float fp8ToFloat(uint8_t v) {
  constexpr unsigned kShift = 23 - M;
  constexpr uint32_t kSubScale = (127u + 1u - Bias - M) << 23;  // 2^(1-Bias-M) as float bits
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t em = v & 0x7fu;
  const uint32_t nor = (em << kShift) + ((127u - Bias) << 23);
  const uint32_t sub = toBits(static_cast<float>(static_cast<int>(em)) * fromBits(kSubScale));
  uint32_t r = select(em < (1u << M), sub, nor);
  if (IeeeSpecials) {
    constexpr uint32_t kInfCode = 0x7fu & ~((1u << M) - 1u);
    r = select(em == kInfCode, 0x7f800000u, r);
    r = select(em > kInfCode, 0x7fc00000u | ((em & ((1u << M) - 1u)) << kShift), r);
  } else {
    r = select(em == 0x7fu, 0x7fc00000u, r);
  }
  return fromBits(r | sign);
}

}  // namespace fpbits

/// fp16 (IEEE binary16) bits -> float, exact.
BRAID_FP_INLINE float halfToFloat(uint16_t h) {
  using namespace fpbits;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t nor = (em << 13) + (112u << 23);  // rebias 15 -> 127
  // subnormal: em * 2^-24, exact in float
  const uint32_t sub = toBits(static_cast<float>(static_cast<int>(em)) * fromBits(103u << 23));
  uint32_t r = select(em < 0x400u, sub, nor);
  r = select(em >= 0x7c00u, (em << 13) | 0x7f800000u, r);  // inf / NaN (payload kept)
  return fromBits(r | sign);
}

/// float -> fp16 bits, round to nearest even; overflow -> inf; NaN stays NaN (quieted).
BRAID_FP_INLINE uint16_t floatToHalf(float f) {
  using namespace fpbits;
  const uint32_t x = toBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  const bool small = a < 0x38800000u;  // below 2^-14, the smallest normal half
  // 0.5f has an ulp of 2^-24, the smallest half subnormal: see floatToFp8.
  const uint32_t sub = toBits(fromBits(select(small, a, 0u)) + 0.5f) - 0x3f000000u;
  const uint32_t nor = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  uint32_t r = select(small, sub, nor);
  r = select(a >= 0x477ff000u, 0x7c00u, r);  // >= 65520 rounds to inf (inf included)
  r = select(a > 0x7f800000u, 0x7e00u | ((a >> 13) & 0x3ffu), r);  // NaN
  return static_cast<uint16_t>(r | sign);
}

/// bf16 bits -> float, exact.
BRAID_FP_INLINE float bfloat16ToFloat(uint16_t b) { return fpbits::fromBits(static_cast<uint32_t>(b) << 16); }

/// float -> bf16 bits, round to nearest even; overflow -> inf; NaN stays NaN (quieted).
BRAID_FP_INLINE uint16_t floatToBfloat16(float f) {
  using namespace fpbits;
  const uint32_t x = toBits(f);
  const uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(select((x & 0x7fffffffu) > 0x7f800000u, (x >> 16) | 0x40u, r));
}

/// fp8 e4m3 (OCP E4M3FN) bits -> float, exact; 0x7F / 0xFF -> NaN.
BRAID_FP_INLINE float fp8e4m3ToFloat(uint8_t v) { return fpbits::fp8ToFloat<3, 7, false>(v); }
/// float -> fp8 e4m3, round to nearest even, saturating to +-448 (__NV_SATFINITE).
BRAID_FP_INLINE uint8_t floatToFp8e4m3(float f) { return fpbits::floatToFp8<3, 7, 0x7e>(f); }

/// fp8 e5m2 bits -> float, exact; 0x7C/0xFC -> +-inf, 0x7D..0x7F (and negatives) -> NaN.
BRAID_FP_INLINE float fp8e5m2ToFloat(uint8_t v) { return fpbits::fp8ToFloat<2, 15, true>(v); }
/// float -> fp8 e5m2, round to nearest even, saturating to +-57344 (__NV_SATFINITE).
BRAID_FP_INLINE uint8_t floatToFp8e5m2(float f) { return fpbits::floatToFp8<2, 15, 0x7b>(f); }

}  // namespace braid
