// Compares the Reducer with the arithmetic NCCL's reduction kernels use on sm_90
// (fp8: convert to half, __hadd/__hmul/__hmax/__hmin, store through the SATFINITE
// __nv_fp8 constructor; fp16/bf16: __hadd/__hmul/__hmax/__hmin), evaluated with the host
// implementations in CUDA's own headers. Built only when cuda_fp8.h is found
// (tests/reduce.cmake); needs no GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "algorithms/plan.h"
#include "src/reduce/float_types.h"
#include "src/reduce/reducer.h"

namespace braid {
namespace {

enum class Op { kSum, kProd, kMax, kMin };
const ncclRedOp_t kNcclOps[] = {ncclSum, ncclProd, ncclMax, ncclMin};

__half halfOp(Op op, __half x, __half y) {
  switch (op) {
    case Op::kSum: return __hadd(x, y);
    case Op::kProd: return __hmul(x, y);
    case Op::kMax: return __hmax(x, y);
    default: return __hmin(x, y);
  }
}
__nv_bfloat16 bf16Op(Op op, __nv_bfloat16 x, __nv_bfloat16 y) {
  switch (op) {
    case Op::kSum: return __hadd(x, y);
    case Op::kProd: return __hmul(x, y);
    case Op::kMax: return __hmax(x, y);
    default: return __hmin(x, y);
  }
}

template <class Fp8>
uint8_t ncclFp8(Op op, uint8_t a, uint8_t b) {
  Fp8 x, y;
  x.__x = a;
  y.__x = b;
  return Fp8(halfOp(op, __half(x), __half(y))).__x;
}

/// Equal, or both NaN in the given decoder.
template <class Decode>
bool same(uint32_t got, uint32_t want, Decode decode) {
  return got == want || (std::isnan(decode(got)) && std::isnan(decode(want)));
}

template <class Fp8>
void checkAllFp8Pairs(ncclDataType_t type, float (*decode)(uint8_t)) {
  std::vector<uint8_t> a(65536), b(65536), out(65536);
  for (int i = 0; i < 65536; ++i) {
    a[i] = uint8_t(i >> 8);
    b[i] = uint8_t(i);
  }
  for (int k = 0; k < 4; ++k) {
    const Op op = static_cast<Op>(k);
    Reducer(type, kNcclOps[k], 2).reduce(out.data(), a.data(), b.data(), out.size(), 0);
    int bad = 0;
    for (int i = 0; i < 65536; ++i) {
      const uint8_t want = ncclFp8<Fp8>(op, a[i], b[i]);
      if (!same(out[i], want, [&](uint32_t v) { return decode(uint8_t(v)); }) && ++bad < 8)
        ADD_FAILURE() << redOpName(kNcclOps[k]) << "(0x" << std::hex << int(a[i]) << ", 0x"
                      << int(b[i]) << "): got 0x" << int(out[i]) << ", NCCL 0x" << int(want);
    }
    EXPECT_EQ(bad, 0) << redOpName(kNcclOps[k]);
  }
  // PreMulSum's pre step: x * scalar in half, stored as fp8.
  std::vector<uint8_t> x(256);
  for (int i = 0; i < 256; ++i) x[i] = uint8_t(i);
  for (int s = 0; s < 256; s += 5) {
    const uint8_t scalar = uint8_t(s);
    Reducer::preMulSum(type, &scalar, 2).copy(out.data(), x.data(), 256, kPreOp);
    Fp8 fs;
    fs.__x = scalar;
    for (int i = 0; i < 256; ++i) {
      Fp8 fx;
      fx.__x = x[i];
      const uint8_t want = Fp8(__hmul(__half(fx), __half(fs))).__x;
      EXPECT_TRUE(same(out[i], want, [&](uint32_t v) { return decode(uint8_t(v)); }))
          << "premul 0x" << std::hex << i << " * 0x" << s;
    }
  }
}

TEST(NcclArith, Fp8E4m3AllPairs) { checkAllFp8Pairs<__nv_fp8_e4m3>(ncclFloat8e4m3, fp8e4m3ToFloat); }
TEST(NcclArith, Fp8E5m2AllPairs) { checkAllFp8Pairs<__nv_fp8_e5m2>(ncclFloat8e5m2, fp8e5m2ToFloat); }

template <class H, class Raw, class OpFn>
void checkRandom16(ncclDataType_t type, OpFn ncclOp, float (*decode)(uint16_t)) {
  constexpr size_t kN = 1 << 20;
  std::mt19937 rng(7);
  std::vector<uint16_t> a(kN), b(kN), out(kN);
  for (size_t i = 0; i < kN; ++i) {
    a[i] = uint16_t(rng());
    // half the pairs close in magnitude, so sums round (not just absorb)
    b[i] = (i & 1) ? uint16_t(rng()) : uint16_t((a[i] ^ (rng() & 0x83ff)));
  }
  for (int k = 0; k < 4; ++k) {
    const Op op = static_cast<Op>(k);
    Reducer(type, kNcclOps[k], 2).reduce(out.data(), a.data(), b.data(), kN, 0);
    int bad = 0;
    for (size_t i = 0; i < kN; ++i) {
      Raw rx, ry;
      rx.x = a[i];
      ry.x = b[i];
      const Raw r = ncclOp(op, H(rx), H(ry));
      const uint16_t want = r.x;
      if (!same(out[i], want, [&](uint32_t v) { return decode(uint16_t(v)); }) && ++bad < 8)
        ADD_FAILURE() << dataTypeName(type) << " " << redOpName(kNcclOps[k]) << "(0x" << std::hex
                      << a[i] << ", 0x" << b[i] << "): got 0x" << out[i] << ", CUDA 0x" << want;
    }
    EXPECT_EQ(bad, 0) << redOpName(kNcclOps[k]);
  }
}

TEST(NcclArith, HalfMatchesCudaHalfOps) { checkRandom16<__half, __half_raw>(ncclFloat16, halfOp, halfToFloat); }
TEST(NcclArith, Bfloat16MatchesCudaBf16Ops) {
  checkRandom16<__nv_bfloat16, __nv_bfloat16_raw>(ncclBfloat16, bf16Op, bfloat16ToFloat);
}

}  // namespace
}  // namespace braid
