// Conversions of src/reduce/float_types.h, checked exhaustively where the domain is
// small and against independent references (GCC's _Float16, a bit-twiddling bf16
// rounder, a brute-force nearest-value search for fp8, and, when the CUDA headers are
// installed, CUDA's own host implementation of __nv_cvt_float_to_fp8).
#include "src/reduce/float_types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(BRAID_TEST_CUDA_FP8)
#include <cuda_fp8.h>
#endif

namespace braid {
namespace {

uint32_t bitsOf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
float floatOf(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

/// The float inputs every float -> narrow test sweeps: a stride over all 2^32 patterns
/// (every exponent, both signs, NaNs, infinities, float subnormals), random patterns,
/// and for each value `v` of the narrow format the midpoints to its neighbours and the
/// floats one ulp either side of them (the ties and near-ties).
std::vector<float> sweepInputs(const std::vector<float>& narrowValues, uint32_t stride,
                               size_t randomCount) {
  std::vector<float> out;
  for (uint64_t b = 0; b <= 0xffffffffull; b += stride) out.push_back(floatOf(uint32_t(b)));
  std::mt19937 rng(12345);
  for (size_t i = 0; i < randomCount; ++i) out.push_back(floatOf(rng()));
  std::vector<double> finite;
  for (float v : narrowValues)
    if (std::isfinite(v)) finite.push_back(v);
  std::sort(finite.begin(), finite.end());
  for (size_t i = 0; i + 1 < finite.size(); ++i) {
    const float mid = static_cast<float>((finite[i] + finite[i + 1]) / 2);  // exact in float
    out.push_back(mid);
    out.push_back(std::nextafter(mid, -INFINITY));
    out.push_back(std::nextafter(mid, INFINITY));
    out.push_back(static_cast<float>(finite[i]));
  }
  return out;
}

// ---- fp16 -------------------------------------------------------------------------

uint16_t gccHalfBits(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

TEST(Fp16, AllPatternsDecodeExactlyAndRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = halfToFloat(uint16_t(b));
    _Float16 h;
    const uint16_t b16 = uint16_t(b);
    std::memcpy(&h, &b16, 2);
    const float ref = static_cast<float>(h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_EQ(bitsOf(f) >> 31, b >> 15) << "NaN sign kept " << std::hex << b;
      ASSERT_EQ(floatToHalf(f) | 0x200u, b | 0x200u) << "NaN payload kept " << std::hex << b;
    } else {
      ASSERT_EQ(bitsOf(f), bitsOf(ref)) << std::hex << b;
      ASSERT_EQ(floatToHalf(f), b) << std::hex << b;
    }
  }
}

TEST(Fp16, FromFloatMatchesGccFloat16) {
  std::vector<float> values;
  for (uint32_t b = 0; b < 65536; ++b) values.push_back(halfToFloat(uint16_t(b)));
  const std::vector<float> in = sweepInputs(values, 997, 2000000);
  ASSERT_GT(in.size(), 6000000u);
  size_t mismatches = 0;
  for (float f : in) {
    const uint16_t got = floatToHalf(f), want = gccHalfBits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(got)));
      EXPECT_EQ(got & 0x8000u, want & 0x8000u);
    } else if (got != want && ++mismatches < 10) {
      ADD_FAILURE() << "float " << f << " (0x" << std::hex << bitsOf(f) << ") -> 0x" << got
                    << ", _Float16 gives 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Fp16, HandPickedCases) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);               // tie -> even (down)
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);           // tie -> even (up)
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);                      // max
  EXPECT_EQ(floatToHalf(65519.996f), 0x7bff);                    // just below the tie
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);                      // tie to even = inf
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);                      // min subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);                      // tie -> 0
  EXPECT_EQ(floatToHalf(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(floatToHalf(-0x1p-26f), 0x8000);                     // signed underflow
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-25f), 0x0400);           // tie up to min normal
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x7c00), INFINITY);
}

// ---- bf16 -------------------------------------------------------------------------

/// Independent reference: split the float into kept and dropped halves and decide.
uint16_t refBf16(float f) {
  const uint32_t x = bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  uint32_t kept = x >> 16;
  const uint32_t dropped = x & 0xffffu;
  if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u))) kept += 1;  // may reach inf
  return uint16_t(kept);
}

TEST(Bf16, AllPatternsRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bfloat16ToFloat(uint16_t(b));
    ASSERT_EQ(bitsOf(f), b << 16);
    if (std::isnan(f))
      ASSERT_EQ(floatToBfloat16(f), b | 0x40u) << std::hex << b;
    else
      ASSERT_EQ(floatToBfloat16(f), b) << std::hex << b;
  }
}

TEST(Bf16, FromFloatMatchesReference) {
  std::vector<float> values;
  for (uint32_t b = 0; b < 65536; ++b) values.push_back(bfloat16ToFloat(uint16_t(b)));
  const std::vector<float> in = sweepInputs(values, 1009, 2000000);
  size_t mismatches = 0;
  for (float f : in)
    if (floatToBfloat16(f) != refBf16(f) && ++mismatches < 10)
      ADD_FAILURE() << "float 0x" << std::hex << bitsOf(f) << " -> 0x" << floatToBfloat16(f)
                    << ", want 0x" << refBf16(f);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(floatToBfloat16(3.3895314e38f), 0x7f7f);  // max bf16
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(floatToBfloat16(1.0f + 0x1p-8f), 0x3f80);  // tie -> even
  EXPECT_EQ(floatToBfloat16(0x1p-133f), 0x0001);       // bf16 subnormal
}

// ---- fp8 --------------------------------------------------------------------------

struct Fp8Format {
  const char* name;
  float (*toFloat)(uint8_t);
  uint8_t (*fromFloat)(float);
  uint8_t maxCode;  ///< largest finite positive code
  float maxValue;
};
const Fp8Format kE4m3{"e4m3", fp8e4m3ToFloat, floatToFp8e4m3, 0x7e, 448.0f};
const Fp8Format kE5m2{"e5m2", fp8e5m2ToFloat, floatToFp8e5m2, 0x7b, 57344.0f};

/// Brute force: the nearest finite value (ties: even code), saturating; NaN -> 0x7F.
uint8_t refFp8(const Fp8Format& fmt, float f) {
  if (std::isnan(f)) return 0x7f;
  // SATFINITE: anything beyond the largest finite value becomes it (clamping first also
  // keeps the distances below exact enough to see ties).
  const double a = std::fmin(std::fabs(static_cast<double>(f)), static_cast<double>(fmt.maxValue));
  int best = 0;
  double bestErr = INFINITY;
  for (int c = 0; c <= fmt.maxCode; ++c) {
    const double err = std::fabs(static_cast<double>(fmt.toFloat(uint8_t(c))) - a);
    if (err < bestErr || (err == bestErr && (c & 1) == 0)) {
      best = c;
      bestErr = err;
    }
  }
  return uint8_t(best | (std::signbit(f) ? 0x80 : 0));
}

/// Slow exact decode from the format definition, independent of the bit tricks.
double refFp8Decode(const Fp8Format& fmt, uint8_t v) {
  const bool e4m3 = fmt.maxCode == 0x7e;
  const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exp = (v & 0x7f) >> mbits, man = v & ((1 << mbits) - 1);
  const double sign = (v & 0x80) ? -1.0 : 1.0;
  if (e4m3 && (v & 0x7f) == 0x7f) return NAN;
  if (!e4m3 && exp == 31) return man == 0 ? sign * INFINITY : NAN;
  if (exp == 0) return sign * std::ldexp(man, 1 - bias - mbits);
  return sign * std::ldexp((1 << mbits) + man, exp - bias - mbits);
}

class Fp8 : public ::testing::TestWithParam<Fp8Format> {};

TEST_P(Fp8, AllPatternsDecodeAndRoundTrip) {
  const Fp8Format& fmt = GetParam();
  for (int c = 0; c < 256; ++c) {
    const float f = fmt.toFloat(uint8_t(c));
    const double want = refFp8Decode(fmt, uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << c;
      EXPECT_EQ(fmt.fromFloat(f), 0x7f) << c;  // canonical NaN
    } else if (std::isinf(want)) {
      EXPECT_EQ(static_cast<double>(f), want) << c;
      EXPECT_EQ(fmt.fromFloat(f), fmt.maxCode | (c & 0x80)) << "inf saturates (SATFINITE)";
    } else {
      EXPECT_EQ(static_cast<double>(f), want) << c;
      EXPECT_EQ(fmt.fromFloat(f), c) << c;
    }
  }
}

TEST_P(Fp8, FromFloatMatchesBruteForce) {
  const Fp8Format& fmt = GetParam();
  std::vector<float> values;
  for (int c = 0; c < 256; ++c) values.push_back(fmt.toFloat(uint8_t(c)));
  const std::vector<float> in = sweepInputs(values, 4099, 100000);
  size_t mismatches = 0;
  for (float f : in)
    if (fmt.fromFloat(f) != refFp8(fmt, f) && ++mismatches < 10)
      ADD_FAILURE() << fmt.name << ": float " << f << " -> 0x" << std::hex
                    << int(fmt.fromFloat(f)) << ", want 0x" << int(refFp8(fmt, f));
  EXPECT_EQ(mismatches, 0u);
}

TEST(Fp8Hand, E4m3TiesAndSaturation) {
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(464.0f), 0x7e);   // tie between 448 and (absent) 480: even
  EXPECT_EQ(floatToFp8e4m3(465.0f), 0x7e);   // saturates, never NaN
  EXPECT_EQ(floatToFp8e4m3(1e30f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(INFINITY), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(NAN), 0x7f);
  EXPECT_EQ(floatToFp8e4m3(-NAN), 0x7f);
  EXPECT_EQ(floatToFp8e4m3(0x1p-10f), 0x00);  // tie between 0 and min subnormal: even
  EXPECT_EQ(floatToFp8e4m3(-0x1p-10f), 0x80);
  EXPECT_EQ(floatToFp8e4m3(0x1p-10f + 0x1p-30f), 0x01);
  EXPECT_EQ(floatToFp8e4m3(3 * 0x1p-10f), 0x02);  // tie between codes 1 and 2: even
  EXPECT_EQ(floatToFp8e4m3(15 * 0x1p-10f), 0x08);  // tie between 7*2^-9 and 2^-6 (code 8)
  EXPECT_EQ(floatToFp8e4m3(1.0625f), 0x38);  // tie between 1 and 1.125: even (1)
  EXPECT_EQ(floatToFp8e4m3(1.1875f), 0x3a);  // tie between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(fp8e4m3ToFloat(0x01), 0x1p-9f);
  EXPECT_EQ(fp8e4m3ToFloat(0x08), 0x1p-6f);
  EXPECT_EQ(fp8e4m3ToFloat(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
}

TEST(Fp8Hand, E5m2TiesAndSaturation) {
  EXPECT_EQ(floatToFp8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(61440.0f), 0x7b);  // the tie that IEEE rounding sends to inf
  EXPECT_EQ(floatToFp8e5m2(1e30f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(INFINITY), 0x7b);  // SATFINITE: inf is not kept
  EXPECT_EQ(floatToFp8e5m2(-INFINITY), 0xfb);
  EXPECT_EQ(floatToFp8e5m2(NAN), 0x7f);
  EXPECT_EQ(floatToFp8e5m2(0x1p-17f), 0x00);  // tie -> 0
  EXPECT_EQ(floatToFp8e5m2(3 * 0x1p-17f), 0x02);
  EXPECT_EQ(floatToFp8e5m2(1.125f), 0x3c);  // tie between 1 and 1.25: even (1)
  EXPECT_EQ(floatToFp8e5m2(1.375f), 0x3e);  // tie between 1.25 and 1.5: even (1.5)
  EXPECT_EQ(fp8e5m2ToFloat(0x01), 0x1p-16f);
  EXPECT_EQ(fp8e5m2ToFloat(0x7c), INFINITY);
  EXPECT_EQ(fp8e5m2ToFloat(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(0x7d)));
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8, ::testing::Values(kE4m3, kE5m2),
                         [](const ::testing::TestParamInfo<Fp8Format>& i) {
                           return std::string(i.param.name);
                         });

// ---- against CUDA's own host implementation ------------------------------------------

TEST(Fp8Cuda, FromFloatMatchesCudaSatfinite) {
#if defined(BRAID_TEST_CUDA_FP8)
  std::vector<float> values;
  for (int c = 0; c < 256; ++c) {
    values.push_back(fp8e4m3ToFloat(uint8_t(c)));
    values.push_back(fp8e5m2ToFloat(uint8_t(c)));
  }
  const std::vector<float> in = sweepInputs(values, 211, 1000000);
  size_t mismatches = 0;
  for (float f : in) {
    const uint8_t w4 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
    const uint8_t w5 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2);
    if ((floatToFp8e4m3(f) != w4 || floatToFp8e5m2(f) != w5) && ++mismatches < 10)
      ADD_FAILURE() << "float 0x" << std::hex << bitsOf(f) << ": e4m3 0x" << int(floatToFp8e4m3(f))
                    << " vs CUDA 0x" << int(w4) << ", e5m2 0x" << int(floatToFp8e5m2(f))
                    << " vs CUDA 0x" << int(w5);
  }
  EXPECT_EQ(mismatches, 0u);
  for (int c = 0; c < 256; ++c) {
    __nv_fp8_e4m3 a;
    a.__x = uint8_t(c);
    __nv_fp8_e5m2 b;
    b.__x = uint8_t(c);
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);
    if (std::isnan(fa))
      EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(uint8_t(c))));
    else
      EXPECT_EQ(bitsOf(fp8e4m3ToFloat(uint8_t(c))), bitsOf(fa)) << c;
    if (std::isnan(fb))
      EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(uint8_t(c))));
    else
      EXPECT_EQ(bitsOf(fp8e5m2ToFloat(uint8_t(c))), bitsOf(fb)) << c;
  }
#else
  GTEST_SKIP() << "CUDA's cuda_fp8.h was not found at configure time; the brute-force "
                  "reference test still covers fp8 rounding";
#endif
}

}  // namespace
}  // namespace braid
