// Reducer: every (type, op, flags) of reduce / reduce2 / copy on random data against a
// scalar reference, plus aliasing, lengths around the kernel's block size, misaligned
// pointers and hand-picked numerics (wrap-around, saturation, NaN and signed zeros).
// Everything runs at each instruction-set level of the kernels (portable, AVX2,
// AVX-512); a level this CPU (or build) lacks is skipped with a message.
//
// The reference computes like the documented model: integers modulo 2^bits; floats in
// double, rounded to the element type after every operation (for fp16/bf16/fp8 and
// fp32 a double result rounded to float equals the float result, since double has more
// than 2p+2 bits), so every comparison is exact (NaN compares equal to any NaN).
#include "src/reduce/reducer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/plan.h"
#include "src/reduce/float_types.h"
#include "src/reduce/kernel_table.h"

namespace braid {
namespace reduce_detail {
// Readable parameters in gtest's messages.
void PrintTo(KernelLevel level, std::ostream* os) { *os << kernelLevelName(level); }
}  // namespace reduce_detail
namespace {

constexpr int kPreMulSum = ncclNumOps;  // test-local id for the PreMulSum op

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,
                                 ncclInt64,   ncclUint64,  ncclFloat16,  ncclFloat32,
                                 ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
bool isSigned(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

// ---- scalar reference -----------------------------------------------------------------

double readF(ncclDataType_t t, const uint8_t* p) {
  uint16_t h;
  float f;
  double d;
  switch (t) {
    case ncclFloat16: std::memcpy(&h, p, 2); return halfToFloat(h);
    case ncclBfloat16: std::memcpy(&h, p, 2); return bfloat16ToFloat(h);
    case ncclFloat8e4m3: return fp8e4m3ToFloat(*p);
    case ncclFloat8e5m2: return fp8e5m2ToFloat(*p);
    case ncclFloat32: std::memcpy(&f, p, 4); return f;
    default: std::memcpy(&d, p, 8); return d;
  }
}
void writeF(ncclDataType_t t, double v, uint8_t* p) {
  const float f = static_cast<float>(v);
  uint16_t h;
  switch (t) {
    case ncclFloat16: h = floatToHalf(f); std::memcpy(p, &h, 2); break;
    case ncclBfloat16: h = floatToBfloat16(f); std::memcpy(p, &h, 2); break;
    case ncclFloat8e4m3: *p = floatToFp8e4m3(f); break;
    case ncclFloat8e5m2: *p = floatToFp8e5m2(f); break;
    case ncclFloat32: std::memcpy(p, &f, 4); break;
    default: std::memcpy(p, &v, 8); break;
  }
}
double roundF(ncclDataType_t t, double v) {
  uint8_t b[8];
  writeF(t, v, b);
  return readF(t, b);
}
double refMax(double x, double y) {
  if (std::isnan(x)) return y;
  if (std::isnan(y)) return x;
  if (x == y) return (std::signbit(x) && std::signbit(y)) ? x : std::fabs(x) == 0 ? 0.0 : x;
  return x > y ? x : y;
}
double refMin(double x, double y) {
  if (std::isnan(x)) return y;
  if (std::isnan(y)) return x;
  if (x == y) return (std::signbit(x) || std::signbit(y)) ? (x == 0 ? -0.0 : x) : x;
  return x < y ? x : y;
}

uint64_t readRaw(size_t size, const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little endian
  return v;
}
int64_t signExtend(uint64_t v, size_t size) {
  if (size == 8) return static_cast<int64_t>(v);
  const int shift = 64 - int(size) * 8;
  return static_cast<int64_t>(v << shift) >> shift;
}

struct RefOp {
  ncclDataType_t type;
  int op;  // ncclSum..ncclAvg or kPreMulSum
  int nranks;
  const uint8_t* scalar;

  /// out = post(x OP pre(y)) with (x, y) = (in, local); hasY false: out = post(pre(x)).
  void apply(const uint8_t* in, const uint8_t* local, uint8_t flags, uint8_t* out) const {
    const size_t size = dataTypeSize(type);
    const bool pre = op == kPreMulSum && (flags & kPreOp);
    const bool post = op == ncclAvg && (flags & kPostOp);
    if (local == nullptr && !pre && !post) {  // a plain copy moves bits (e5m2 inf included)
      std::memcpy(out, in, size);
      return;
    }
    if (isFloat(type)) {
      double y = readF(type, local != nullptr ? local : in);
      if (pre) y = roundF(type, y * readF(type, scalar));
      double r = y;
      if (local != nullptr) {
        const double x = readF(type, in);
        switch (op) {
          case ncclProd: r = x * y; break;
          case ncclMax: r = refMax(x, y); break;
          case ncclMin: r = refMin(x, y); break;
          default: r = x + y; break;
        }
      }
      // round what was computed (an operand loaded from memory is used as is: an e5m2
      // infinity divided by nranks stays infinite until the final store saturates it)
      if (post) r = (local != nullptr ? roundF(type, r) : r) / nranks;
      writeF(type, r, out);
      return;
    }
    const uint64_t mask = size == 8 ? ~0ull : (1ull << (size * 8)) - 1;
    uint64_t y = readRaw(size, local != nullptr ? local : in);
    if (pre) y = (y * readRaw(size, scalar)) & mask;
    uint64_t r = y;
    if (local != nullptr) {
      const uint64_t x = readRaw(size, in);
      const bool xGreater = isSigned(type) ? signExtend(x, size) > signExtend(y, size) : x > y;
      switch (op) {
        case ncclProd: r = (x * y) & mask; break;
        case ncclMax: r = xGreater ? x : y; break;
        case ncclMin: r = xGreater ? y : x; break;
        default: r = (x + y) & mask; break;
      }
    }
    if (post) {
      r = isSigned(type) ? static_cast<uint64_t>(signExtend(r, size) / nranks) & mask
                         : r / static_cast<uint64_t>(nranks);
    }
    std::memcpy(out, &r, size);
  }
};

Reducer makeReducer(ncclDataType_t type, int op, const void* scalar, int nranks) {
  return op == kPreMulSum ? Reducer::preMulSum(type, scalar, nranks)
                          : Reducer(type, static_cast<ncclRedOp_t>(op), nranks);
}

// ---- random data ------------------------------------------------------------------------

void fillRandom(ncclDataType_t t, uint8_t* p, size_t n, std::mt19937_64& rng) {
  const size_t size = dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* e = p + i * size;
    const uint64_t bits = rng();
    const int kind = int(rng() % 10);
    if ((t == ncclFloat32 || t == ncclFloat64) && kind < 7) {
      // mostly moderate values, so sums round in interesting ways
      std::uniform_real_distribution<double> u(-4, 4);
      const double v = std::ldexp(u(rng), int(rng() % 40) - 20);
      writeF(t, v, e);
    } else if (t == ncclInt64 || t == ncclUint64 || t == ncclInt32 || t == ncclUint32) {
      // some small values, so products and averages are not all noise
      const uint64_t v = kind < 3 ? (bits % 200) - 100 : bits;
      std::memcpy(e, &v, size);
    } else {
      std::memcpy(e, &bits, size);  // every pattern: NaN, inf, subnormals
    }
  }
}

bool sameElement(ncclDataType_t t, const uint8_t* a, const uint8_t* b) {
  if (isFloat(t) && std::isnan(readF(t, a)) && std::isnan(readF(t, b))) return true;
  return std::memcmp(a, b, dataTypeSize(t)) == 0;
}

::testing::AssertionResult sameBuffers(ncclDataType_t t, const uint8_t* got, const uint8_t* want,
                                      const uint8_t* in, const uint8_t* local, size_t n) {
  const size_t size = dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    if (!sameElement(t, got + i * size, want + i * size)) {
      auto hex = [size](const uint8_t* p) {
        return p == nullptr ? std::string("-") : std::to_string(readRaw(size, p));
      };
      return ::testing::AssertionFailure()
             << "element " << i << " of " << n << ": got raw " << hex(got + i * size)
             << ", want " << hex(want + i * size) << " (in " << hex(in + i * size)
             << ", local " << (local ? hex(local + i * size) : std::string("-")) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- kernel levels -----------------------------------------------------------------------

using reduce_detail::KernelLevel;
const KernelLevel kLevels[] = {KernelLevel::kPortable, KernelLevel::kAvx2, KernelLevel::kAvx512};

std::string levelName(KernelLevel l) { return reduce_detail::kernelLevelName(l); }

// ---- parameterised over (level, type, op) ----------------------------------------------

class ReducerOps
    : public ::testing::TestWithParam<std::tuple<KernelLevel, ncclDataType_t, int>> {
 protected:
  void SetUp() override {
    if (!reduce_detail::setKernelLevel(level()))
      GTEST_SKIP() << "kernel level " << levelName(level())
                   << " is not available on this CPU / build";
  }
  void TearDown() override { reduce_detail::resetKernelLevel(); }
  KernelLevel level() const { return std::get<0>(GetParam()); }
  ncclDataType_t type() const { return std::get<1>(GetParam()); }
  int op() const { return std::get<2>(GetParam()); }
  size_t size() const { return dataTypeSize(type()); }
  /// A buffer of n elements starting `offset` bytes into a fresh allocation.
  struct Buf {
    std::vector<uint8_t> storage;
    uint8_t* p;
    Buf(size_t bytes, size_t offset) : storage(bytes + offset + 64, 0xcd), p(storage.data() + offset) {}
  };
  std::mt19937_64 rng{std::hash<std::string>()(
      ::testing::UnitTest::GetInstance()->current_test_info()->name())};
};

const size_t kLengths[] = {0, 1, 7, 1000, 4099};
const int kRanks[] = {1, 3, 4, 300};

enum class Alias { kNone, kDstIsIn, kDstIsLocal };

TEST_P(ReducerOps, ReduceAndReduce2MatchReference) {
  const size_t es = size();
  for (size_t n : kLengths)
    for (size_t offset : {size_t(0), size_t(1), es}) {
      if (offset != 0 && n < 1000) continue;
      for (int flags = 0; flags < 4; ++flags)
        for (Alias alias : {Alias::kNone, Alias::kDstIsIn, Alias::kDstIsLocal})
          for (bool two : {false, true}) {
            const int nranks = kRanks[rng() % 4];
            Buf in(n * es, offset), local(n * es, offset), dst(n * es, offset),
                dst2(n * es, offset), want(n * es, 0);
            uint8_t scalar[8] = {};
            fillRandom(type(), scalar, 1, rng);
            fillRandom(type(), in.p, n, rng);
            fillRandom(type(), local.p, n, rng);
            const RefOp ref{type(), op(), nranks, scalar};
            for (size_t i = 0; i < n; ++i)
              ref.apply(in.p + i * es, local.p + i * es, uint8_t(flags), want.p + i * es);
            const std::vector<uint8_t> inCopy(in.p, in.p + n * es), localCopy(local.p, local.p + n * es);
            uint8_t* d = alias == Alias::kDstIsIn ? in.p : alias == Alias::kDstIsLocal ? local.p : dst.p;
            const Reducer r = makeReducer(type(), op(), scalar, nranks);
            if (two)
              r.reduce2(d, dst2.p, in.p, local.p, n, uint8_t(flags));
            else
              r.reduce(d, in.p, local.p, n, uint8_t(flags));
            SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset << " flags=" << flags
                                              << " alias=" << int(alias) << " reduce2=" << two
                                              << " nranks=" << nranks);
            ASSERT_TRUE(sameBuffers(type(), d, want.p, inCopy.data(), localCopy.data(), n));
            if (two) {
              ASSERT_TRUE(sameBuffers(type(), dst2.p, want.p, inCopy.data(), localCopy.data(), n));
            }
            // nothing written past the end
            const uint8_t* end = (two ? dst2.p : d) + n * es;
            if (alias == Alias::kNone || two) {
              ASSERT_EQ(end[0], 0xcd);
            }
            if (alias == Alias::kNone) {
              ASSERT_EQ(dst.p[n * es], 0xcd);
            }
          }
    }
}

TEST_P(ReducerOps, CopyMatchesReference) {
  const size_t es = size();
  for (size_t n : kLengths)
    for (size_t offset : {size_t(0), size_t(1)}) {
      if (offset != 0 && n < 1000) continue;
      for (int flags = 0; flags < 4; ++flags)
        for (bool inPlace : {false, true}) {
          const int nranks = kRanks[rng() % 4];
          Buf src(n * es, offset), dst(n * es, offset), want(n * es, 0);
          uint8_t scalar[8] = {};
          fillRandom(type(), scalar, 1, rng);
          fillRandom(type(), src.p, n, rng);
          const RefOp ref{type(), op(), nranks, scalar};
          for (size_t i = 0; i < n; ++i) ref.apply(src.p + i * es, nullptr, uint8_t(flags), want.p + i * es);
          const std::vector<uint8_t> srcCopy(src.p, src.p + n * es);
          uint8_t* d = inPlace ? src.p : dst.p;
          makeReducer(type(), op(), scalar, nranks).copy(d, src.p, n, uint8_t(flags));
          SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset << " flags=" << flags
                                            << " inPlace=" << inPlace << " nranks=" << nranks);
          ASSERT_TRUE(sameBuffers(type(), d, want.p, srcCopy.data(), nullptr, n));
          if (!inPlace) {
            ASSERT_EQ(dst.p[n * es], 0xcd);
          }
        }
    }
}

TEST_P(ReducerOps, ReducerDescribesItself) {
  uint8_t scalar[8] = {1};
  const Reducer r = makeReducer(type(), op(), scalar, 4);
  EXPECT_EQ(r.type(), type());
  EXPECT_EQ(r.typeSize(), size());
  EXPECT_EQ(r.hasPre(), op() == kPreMulSum);
  EXPECT_EQ(r.hasPost(), op() == ncclAvg);
  const Reducer::Kind want = op() == ncclProd  ? Reducer::Kind::kProd
                             : op() == ncclMax ? Reducer::Kind::kMax
                             : op() == ncclMin ? Reducer::Kind::kMin
                                               : Reducer::Kind::kSum;
  EXPECT_EQ(r.kind(), want);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAllOps, ReducerOps,
    ::testing::Combine(::testing::ValuesIn(kLevels), ::testing::ValuesIn(kTypes),
                       ::testing::Values(int(ncclSum), int(ncclProd), int(ncclMax), int(ncclMin),
                                         int(ncclAvg), kPreMulSum)),
    [](const ::testing::TestParamInfo<std::tuple<KernelLevel, ncclDataType_t, int>>& i) {
      const int op = std::get<2>(i.param);
      return levelName(std::get<0>(i.param)) + "_" + dataTypeName(std::get<1>(i.param)) + "_" +
             (op == kPreMulSum ? "premulsum" : redOpName(static_cast<ncclRedOp_t>(op)));
    });

// ---- hand-picked cases ------------------------------------------------------------------

template <class T>
std::vector<T> reduceOf(const Reducer& r, std::vector<T> a, std::vector<T> b, uint8_t flags = 0) {
  std::vector<T> out(a.size());
  r.reduce(out.data(), a.data(), b.data(), a.size(), flags);
  return out;
}

class ReducerNumerics : public ::testing::TestWithParam<KernelLevel> {
 protected:
  void SetUp() override {
    if (!reduce_detail::setKernelLevel(GetParam()))
      GTEST_SKIP() << "kernel level " << levelName(GetParam())
                   << " is not available on this CPU / build";
  }
  void TearDown() override { reduce_detail::resetKernelLevel(); }
};

TEST_P(ReducerNumerics, IntegersWrapAndAvgTruncatesTowardZero) {
  EXPECT_EQ(reduceOf<int8_t>(Reducer(ncclInt8, ncclSum, 2), {127, -128}, {1, -1}),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(reduceOf<uint8_t>(Reducer(ncclUint8, ncclProd, 2), {16, 255}, {16, 255}),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(reduceOf<int64_t>(Reducer(ncclInt64, ncclSum, 2), {INT64_MAX}, {1}),
            (std::vector<int64_t>{INT64_MIN}));
  EXPECT_EQ(reduceOf<int32_t>(Reducer(ncclInt32, ncclAvg, 2), {-7, 7, -8}, {0, 0, 1}, kPostOp),
            (std::vector<int32_t>{-3, 3, -3}));
  EXPECT_EQ(reduceOf<int32_t>(Reducer(ncclInt32, ncclAvg, 2), {-7}, {0}, 0),
            (std::vector<int32_t>{-7}));  // no kPostOp: plain sum
  EXPECT_EQ(reduceOf<int8_t>(Reducer(ncclInt8, ncclAvg, 200), {-128}, {0}, kPostOp),
            (std::vector<int8_t>{0}));  // nranks wider than the type
  EXPECT_EQ(reduceOf<uint32_t>(Reducer(ncclUint32, ncclMax, 2), {0xffffffffu}, {1}),
            (std::vector<uint32_t>{0xffffffffu}));
  EXPECT_EQ(reduceOf<int32_t>(Reducer(ncclInt32, ncclMax, 2), {-1}, {1}), (std::vector<int32_t>{1}));
  const int8_t s = -3;
  EXPECT_EQ(reduceOf<int8_t>(Reducer::preMulSum(ncclInt8, &s, 2), {1}, {50}, kPreOp),
            (std::vector<int8_t>{int8_t(1 - 150 + 256)}));  // 50*-3 wraps in int8
}

TEST_P(ReducerNumerics, FloatMaxMinIgnoreNaNAndOrderZeros) {
  const float nan = NAN;
  const Reducer mx(ncclFloat32, ncclMax, 2), mn(ncclFloat32, ncclMin, 2);
  const auto a = reduceOf<float>(mx, {nan, 1.0f, nan, 0.0f, -0.0f}, {2.0f, nan, nan, -0.0f, 0.0f});
  EXPECT_EQ(a[0], 2.0f);
  EXPECT_EQ(a[1], 1.0f);
  EXPECT_TRUE(std::isnan(a[2]));
  EXPECT_FALSE(std::signbit(a[3]));
  EXPECT_FALSE(std::signbit(a[4]));
  const auto b = reduceOf<float>(mn, {nan, 0.0f, -0.0f}, {-5.0f, -0.0f, 0.0f});
  EXPECT_EQ(b[0], -5.0f);
  EXPECT_TRUE(std::signbit(b[1]));
  EXPECT_TRUE(std::signbit(b[2]));
  const auto c = reduceOf<double>(Reducer(ncclFloat64, ncclMax, 2), {nan, -1.0}, {-3.0, nan});
  EXPECT_EQ(c, (std::vector<double>{-3.0, -1.0}));
}

TEST_P(ReducerNumerics, Fp8SaturatesLikeNccl) {
  // e4m3: 448 + 448 -> 448 (SATFINITE), never NaN.
  EXPECT_EQ(reduceOf<uint8_t>(Reducer(ncclFloat8e4m3, ncclSum, 2), {0x7e, 0xfe}, {0x7e, 0xfe}),
            (std::vector<uint8_t>{0x7e, 0xfe}));
  // e5m2: inf + 1 -> max finite; max * 2 -> max finite.
  EXPECT_EQ(reduceOf<uint8_t>(Reducer(ncclFloat8e5m2, ncclSum, 2), {0x7c}, {0x3c}),
            (std::vector<uint8_t>{0x7b}));
  EXPECT_EQ(reduceOf<uint8_t>(Reducer(ncclFloat8e5m2, ncclProd, 2), {0x7b}, {0x40}),
            (std::vector<uint8_t>{0x7b}));
  // NaN stays NaN.
  EXPECT_EQ(reduceOf<uint8_t>(Reducer(ncclFloat8e4m3, ncclSum, 2), {0x7f}, {0x38}),
            (std::vector<uint8_t>{0x7f}));
}

TEST_P(ReducerNumerics, HalfRoundsEveryStep) {
  // 2048 + 1 is a tie in fp16 (spacing 2 above 2048): rounds to even (2048).
  const uint16_t h2048 = floatToHalf(2048.0f), h1 = floatToHalf(1.0f), h3 = floatToHalf(3.0f);
  EXPECT_EQ(reduceOf<uint16_t>(Reducer(ncclFloat16, ncclSum, 2), {h2048}, {h1})[0], h2048);
  // Avg: (2048 + 3) = 2051 -> 2052 in fp16, then / 2 = 1026.
  EXPECT_EQ(reduceOf<uint16_t>(Reducer(ncclFloat16, ncclAvg, 2), {h2048}, {h3}, kPostOp)[0],
            floatToHalf(1026.0f));
  // fp16 overflow is inf and stays inf through Avg's division.
  const uint16_t hmax = 0x7bff;
  EXPECT_EQ(reduceOf<uint16_t>(Reducer(ncclFloat16, ncclAvg, 2), {hmax}, {hmax}, kPostOp)[0], 0x7c00);
}

INSTANTIATE_TEST_SUITE_P(Levels, ReducerNumerics, ::testing::ValuesIn(kLevels),
                         [](const ::testing::TestParamInfo<KernelLevel>& i) {
                           return levelName(i.param);
                         });

TEST(ReducerCopy, PlainCopyIsMemcpyAndInPlaceIsNoop) {
  std::vector<float> a{1, 2, 3}, b(3, 0);
  const Reducer r(ncclFloat32, ncclAvg, 4);
  r.copy(b.data(), a.data(), 3, 0);
  EXPECT_EQ(a, b);
  r.copy(a.data(), a.data(), 3, 0);
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  r.copy(b.data(), a.data(), 3, kPostOp);
  EXPECT_EQ(b, (std::vector<float>{0.25f, 0.5f, 0.75f}));
  r.copy(b.data(), a.data(), 3, kPreOp);  // Avg has no pre step
  EXPECT_EQ(a, b);
  const float s = 2;
  Reducer::preMulSum(ncclFloat32, &s, 4).copy(b.data(), a.data(), 3, kPreOp | kPostOp);
  EXPECT_EQ(b, (std::vector<float>{2, 4, 6}));  // PreMulSum has no post step
}

TEST(ReducerMisc, InvalidTypeOrOpActsAsFloatSum) {
  const Reducer r(static_cast<ncclDataType_t>(99), static_cast<ncclRedOp_t>(77), 2);
  EXPECT_EQ(r.type(), ncclFloat32);
  EXPECT_EQ(r.kind(), Reducer::Kind::kSum);
  EXPECT_FALSE(r.hasPost());
  EXPECT_EQ(reduceOf<float>(r, {1.5f}, {2.0f}), (std::vector<float>{3.5f}));
  const Reducer d;
  EXPECT_EQ(d.type(), ncclFloat32);
  EXPECT_EQ(reduceOf<float>(d, {1.5f}, {2.0f}), (std::vector<float>{3.5f}));
}

TEST(ReducerMisc, NamesAndSizes) {
  const char* names[] = {"int8",  "uint8",  "int32",    "uint32", "int64",  "uint64",
                         "half",  "float",  "double",   "bfloat16", "f8e4m3", "f8e5m2"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < ncclNumTypes; ++t) {
    EXPECT_STREQ(dataTypeName(static_cast<ncclDataType_t>(t)), names[t]);
    EXPECT_EQ(dataTypeSize(static_cast<ncclDataType_t>(t)), sizes[t]);
  }
  EXPECT_EQ(dataTypeSize(static_cast<ncclDataType_t>(ncclNumTypes)), 0u);
  EXPECT_STREQ(redOpName(ncclSum), "sum");
  EXPECT_STREQ(redOpName(ncclProd), "prod");
  EXPECT_STREQ(redOpName(ncclMax), "max");
  EXPECT_STREQ(redOpName(ncclMin), "min");
  EXPECT_STREQ(redOpName(ncclAvg), "avg");
  EXPECT_STREQ(redOpName(static_cast<ncclRedOp_t>(ncclNumOps + 3)), "premulsum");
}

// Every level's table against the portable one, calling the tables directly (all 4x2x2
// slots, including those the Reducer never picks).
TEST(ReducerKernels, EveryLevelAgreesWithPortableBitForBit) {
  using reduce_detail::KernelTable;
  const KernelTable& portable = reduce_detail::portableKernels();
  int compared = 0;
  for (KernelLevel level : {KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    const KernelTable* other = reduce_detail::kernelsFor(level);
    if (other == nullptr) continue;
    ++compared;
    std::mt19937_64 rng(99);
    const size_t n = 3001;  // several blocks and a tail for every element size
    for (int t = 0; t < ncclNumTypes; ++t) {
      const ncclDataType_t type = static_cast<ncclDataType_t>(t);
      const size_t bytes = n * dataTypeSize(type);
      std::vector<uint8_t> in(bytes), local(bytes), a(bytes), b(bytes), b2(bytes);
      uint8_t scalar[8] = {};
      fillRandom(type, scalar, 1, rng);
      fillRandom(type, in.data(), n, rng);
      fillRandom(type, local.data(), n, rng);
      for (int kind = 0; kind < 4; ++kind)
        for (int pre = 0; pre < 2; ++pre)
          for (int post = 0; post < 2; ++post) {
            portable.reduce[t][kind][pre][post](a.data(), nullptr, in.data(), local.data(), n,
                                                scalar, 3);
            other->reduce[t][kind][pre][post](b.data(), b2.data(), in.data(), local.data(), n,
                                              scalar, 3);
            // NaN payloads may differ (the compiler may commute an add): compare NaN-aware
            EXPECT_TRUE(sameBuffers(type, a.data(), b.data(), in.data(), local.data(), n))
                << levelName(level) << " " << dataTypeName(type) << " kind " << kind << " pre "
                << pre << " post " << post;
            EXPECT_EQ(b, b2) << "reduce2's two destinations differ";
            if (pre + post == 0) continue;
            portable.copy[t][pre][post](a.data(), in.data(), n, scalar, 3);
            other->copy[t][pre][post](b.data(), in.data(), n, scalar, 3);
            EXPECT_TRUE(sameBuffers(type, a.data(), b.data(), in.data(), nullptr, n))
                << levelName(level) << " copy " << dataTypeName(type) << " pre " << pre
                << " post " << post;
          }
    }
  }
  if (compared == 0) GTEST_SKIP() << "only the portable kernels are available on this CPU / build";
}

TEST(ReducerKernels, LevelsParseNameAndSwitch) {
  KernelLevel l = KernelLevel::kPortable;
  EXPECT_TRUE(reduce_detail::parseKernelLevel("AVX512", &l));
  EXPECT_EQ(l, KernelLevel::kAvx512);
  EXPECT_TRUE(reduce_detail::parseKernelLevel("avx2", &l));
  EXPECT_EQ(l, KernelLevel::kAvx2);
  EXPECT_TRUE(reduce_detail::parseKernelLevel("portable", &l));
  EXPECT_EQ(l, KernelLevel::kPortable);
  EXPECT_FALSE(reduce_detail::parseKernelLevel("auto", &l));
  EXPECT_FALSE(reduce_detail::parseKernelLevel("sse9", &l));
  EXPECT_FALSE(reduce_detail::parseKernelLevel(nullptr, &l));

  EXPECT_TRUE(reduce_detail::kernelLevelAvailable(KernelLevel::kPortable));
  const KernelLevel best = reduce_detail::bestKernelLevel();
  EXPECT_TRUE(reduce_detail::kernelLevelAvailable(best));
  for (KernelLevel level : kLevels) {
    const bool available = reduce_detail::kernelLevelAvailable(level);
    EXPECT_EQ(reduce_detail::setKernelLevel(level), available) << levelName(level);
    if (available) {
      EXPECT_EQ(reduce_detail::kernelLevel(), level);
      EXPECT_EQ(&reduce_detail::currentKernels(), reduce_detail::kernelsFor(level));
      EXPECT_LE(static_cast<int>(level), static_cast<int>(best));
    } else {
      EXPECT_EQ(reduce_detail::kernelsFor(level), nullptr);
    }
  }
  reduce_detail::resetKernelLevel();
}

TEST(ReducerKernels, BraidSimdChoosesTheLevel) {
  struct EnvGuard {
    ~EnvGuard() {
      unsetenv("BRAID_SIMD");
      reduce_detail::resetKernelLevel();
    }
  } guard;
  setenv("BRAID_SIMD", "portable", 1);
  reduce_detail::resetKernelLevel();
  EXPECT_EQ(reduce_detail::kernelLevel(), KernelLevel::kPortable);
  EXPECT_EQ(reduceOf<float>(Reducer(ncclFloat32, ncclSum, 2), {1.5f}, {2.0f}),
            (std::vector<float>{3.5f}));
  setenv("BRAID_SIMD", "auto", 1);
  reduce_detail::resetKernelLevel();
  EXPECT_EQ(reduce_detail::kernelLevel(), reduce_detail::bestKernelLevel());
  setenv("BRAID_SIMD", "nonsense", 1);  // warns, uses the best level
  reduce_detail::resetKernelLevel();
  EXPECT_EQ(reduce_detail::kernelLevel(), reduce_detail::bestKernelLevel());
  for (KernelLevel level : kLevels) {
    setenv("BRAID_SIMD", levelName(level).c_str(), 1);
    reduce_detail::resetKernelLevel();
    EXPECT_EQ(reduce_detail::kernelLevel(), reduce_detail::kernelLevelAvailable(level)
                                                 ? level
                                                 : reduce_detail::bestKernelLevel())
        << levelName(level);
  }
}

}  // namespace
}  // namespace braid
