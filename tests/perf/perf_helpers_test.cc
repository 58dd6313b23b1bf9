// White-box tests of the perf suite's host helpers: type encodings, the data pattern's
// exactness promise and the table-entry count rules (the command line: options_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "perf/common.h"
#include "perf/datatypes.h"
#include "perf/pattern.h"

namespace braid_perf {
namespace {

TEST(PerfTypes, KnownEncodings) {
  unsigned char b[8];
  storeValue(b, 0, ncclFloat16, 1.0);
  EXPECT_EQ(0x3c00, b[0] | b[1] << 8);
  storeValue(b, 0, ncclBfloat16, -2.0);
  EXPECT_EQ(0xc000, b[0] | b[1] << 8);
  storeValue(b, 0, ncclFloat8e4m3, 448.0);
  EXPECT_EQ(0x7e, b[0]);
  storeValue(b, 0, ncclFloat8e4m3, 1e6);  // saturates, e4m3 has no infinity
  EXPECT_EQ(0x7e, b[0]);
  storeValue(b, 0, ncclFloat8e5m2, 57344.0);
  EXPECT_EQ(0x7b, b[0]);
  storeValue(b, 0, ncclFloat8e5m2, 1e6);
  EXPECT_EQ(0x7c, b[0]);  // infinity
  EXPECT_EQ(0.015625 / 8, decodeMinifloat(0x01, 4, 3, false));  // smallest e4m3 subnormal
  EXPECT_TRUE(std::isnan(decodeMinifloat(0x7f, 4, 3, false)));
  EXPECT_TRUE(std::isinf(decodeMinifloat(0x7c00, 5, 10, true)));
}

struct Format {
  int expBits, manBits;
  bool ieee;
};

TEST(PerfTypes, EveryMinifloatCodeRoundTrips) {
  for (Format f : {Format{5, 10, true}, Format{8, 7, true}, Format{4, 3, false},
                   Format{5, 2, true}}) {
    const unsigned codes = 1u << (1 + f.expBits + f.manBits);
    for (unsigned c = 0; c < codes; ++c) {
      const double v = decodeMinifloat(c, f.expBits, f.manBits, f.ieee);
      if (std::isnan(v)) continue;
      ASSERT_EQ(c, encodeMinifloat(v, f.expBits, f.manBits, f.ieee))
          << "code " << c << " value " << v << " format e" << f.expBits << "m" << f.manBits;
    }
  }
}

TEST(PerfTypes, RoundsToNearestEven) {
  // half: 2049 lies halfway between 2048 and 2050 -> even mantissa (2048).
  EXPECT_EQ(2048.0, decodeMinifloat(encodeMinifloat(2049, 5, 10, true), 5, 10, true));
  EXPECT_EQ(2052.0, decodeMinifloat(encodeMinifloat(2051, 5, 10, true), 5, 10, true));
  // e5m2: 9 is halfway between 8 and 10 -> 8.
  EXPECT_EQ(8.0, decodeMinifloat(encodeMinifloat(9, 5, 2, true), 5, 2, true));
}

TEST(PerfTypes, CorruptionIsAlwaysWrong) {
  for (ncclDataType_t t : parseTypes("all")) {
    unsigned char b[8] = {};
    storeValue(b, 0, t, 3.0);
    corruptValue(b, 0, t);
    const double got = loadValue(b, 0, t);
    EXPECT_FALSE(std::fabs(got - 3.0) <= 1.0) << typeName(t);
  }
}

double roundTo(ncclDataType_t t, double v) {
  unsigned char b[8];
  storeValue(b, 0, t, v);
  return loadValue(b, 0, t);
}

double apply(PerfOp op, double a, double b) {
  switch (op) {
    case PerfOp::kProd: return a * b;
    case PerfOp::kMin: return std::min(a, b);
    case PerfOp::kMax: return std::max(a, b);
    default: return a + b;
  }
}

// The promise behind exact checking: reducing in the type's own precision, in any order
// (here forward and backward), gives exactly Pattern::reduced.
TEST(PerfPattern, ReductionsAreExactInEveryType) {
  const PerfOp ops[] = {PerfOp::kSum, PerfOp::kProd, PerfOp::kMin, PerfOp::kMax,
                        PerfOp::kPreMulSum, PerfOp::kAvg};
  for (ncclDataType_t t : parseTypes("all")) {
    for (PerfOp op : ops) {
      for (int n : {1, 2, 3, 5, 8, 13, 16, 33, 100}) {
        const Pattern p(op, t, n);
        // NCCL's avg on floats pre-multiplies by a rounded 1/n, then sums.
        const bool floatAvg = op == PerfOp::kAvg && isFloatType(t);
        const double scale = op == PerfOp::kPreMulSum ? Pattern::kPreMulScalar
                             : floatAvg              ? roundTo(t, 1.0 / n)
                                                     : 1.0;
        for (size_t j = 0; j < 64; ++j) {
          for (bool backward : {false, true}) {
            double acc = 0;
            for (int i = 0; i < n; ++i) {
              const int r = backward ? n - 1 - i : i;
              const double in = p.input(r, j);
              ASSERT_EQ(in, roundTo(t, in)) << "input not representable";
              ASSERT_GE(in, 0);
              const double v = roundTo(t, in * scale);
              acc = i == 0 ? v : roundTo(t, apply(op, acc, v));
            }
            if (floatAvg) {
              ASSERT_LE(std::fabs(acc - p.reduced(j)), p.tolerance(p.reduced(j)))
                  << typeName(t) << " n=" << n;
              continue;
            }
            if (op == PerfOp::kAvg) acc = std::floor(acc / n);
            ASSERT_EQ(acc, p.reduced(j)) << typeName(t) << " " << opName(op) << " n=" << n
                                         << " j=" << j;
          }
        }
      }
    }
  }
}

TEST(PerfPattern, RanksAndElementsDiffer) {
  const Pattern p(PerfOp::kNone, ncclFloat, 4);
  int sameRank = 0, sameElement = 0;
  for (size_t j = 0; j < 1000; ++j) {
    sameRank += p.input(0, j) == p.input(1, j);
    sameElement += p.input(0, j) == p.input(0, j + 1);
  }
  EXPECT_EQ(0, sameRank);
  EXPECT_LT(sameElement, 50);
}

TEST(PerfCounts, NcclTestsRules) {
  const Counts ar = countsSameSize(1024, 4, 4);
  EXPECT_EQ(256u, ar.count);
  EXPECT_EQ(256u, ar.paramCount);
  const Counts ag = countsGather(1024, 4, 3);  // 256 elements over 3 ranks -> 85 each
  EXPECT_EQ(85u, ag.paramCount);
  EXPECT_EQ(255u, ag.count);
  EXPECT_EQ(85u, ag.sendElems);
  EXPECT_EQ(255u, ag.recvElems);
  const Counts rs = countsScatter(1024, 4, 3);
  EXPECT_EQ(255u, rs.sendElems);
  EXPECT_EQ(85u, rs.recvElems);
  const Counts a2a = countsAlltoall(1024, 4, 3);
  EXPECT_EQ(255u, a2a.sendElems);
  EXPECT_EQ(255u, a2a.recvElems);
  EXPECT_DOUBLE_EQ(1.5, factorAllReduce(4));
  EXPECT_DOUBLE_EQ(0.75, factorRing(4));
  EXPECT_DOUBLE_EQ(1.0, factorOne(4));
}

}  // namespace
}  // namespace braid_perf
