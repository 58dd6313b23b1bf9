// The CUDA executor's element functors (src/device/reduce_ops.h) and piece loops
// (src/device/interp.h) against the host Reducer: every type x op x pre/post flag on
// random bits (NaN, infinities, subnormals, saturation included), bit for bit; and the
// block-parallel loops (head / 16-byte vectors / tail, split over 1, 5 or 64 "threads")
// with misaligned starts and odd lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/device/interp.h"
#include "src/device/reduce_ops.h"
#include "src/reduce/float_types.h"
#include "src/reduce/reducer.h"

namespace braid {
namespace {

using devinterp::PieceShared;
using devinterp::Vec16;

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,
                                 ncclInt64,   ncclUint64,  ncclFloat16,  ncclFloat32,
                                 ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
enum class TOp { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
const TOp kOps[] = {TOp::kSum, TOp::kProd, TOp::kMax, TOp::kMin, TOp::kAvg, TOp::kPreMulSum};
const char* opName(TOp op) {
  static const char* n[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return n[int(op)];
}

/// A block of `n` threads run one after the other (the piece loops have no barriers),
/// so the GPU's split of the work over threads is checked on the host.
struct TestBlock {
  static constexpr int kUnroll = 3;
  int t = 0, n = 1;
  PieceShared s{};
  int tid() const { return t; }
  int nthreads() const { return n; }
  void sync() {}
  PieceShared& sh() { return s; }
  template <class T>
  static T ld(const T* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <class T>
  static void st(T* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }
  static Vec16 ld16(const void* p) {
    Vec16 v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void st16(void* p, const Vec16& v) { std::memcpy(p, &v, sizeof v); }
};

bool isNaN(ncclDataType_t t, const unsigned char* p) {
  switch (t) {
    case ncclFloat16: { uint16_t h; std::memcpy(&h, p, 2); return std::isnan(halfToFloat(h)); }
    case ncclBfloat16: { uint16_t h; std::memcpy(&h, p, 2); return std::isnan(bfloat16ToFloat(h)); }
    case ncclFloat8e4m3: return std::isnan(fp8e4m3ToFloat(*p));
    case ncclFloat8e5m2: return std::isnan(fp8e5m2ToFloat(*p));
    case ncclFloat32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case ncclFloat64: { double d; std::memcpy(&d, p, 8); return std::isnan(d); }
    default: return false;
  }
}

/// Random bits, with the type's special values sprinkled in.
std::vector<unsigned char> randomElems(ncclDataType_t t, size_t n, uint64_t seed) {
  const size_t ts = dataTypeSize(t);
  std::vector<unsigned char> v(n * ts);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  // Specials: zeros of both signs, infinities, max finite, NaN, subnormals.
  std::vector<std::vector<unsigned char>> specials;
  auto add = [&](uint64_t bits) {
    std::vector<unsigned char> e(ts);
    std::memcpy(e.data(), &bits, ts);
    specials.push_back(e);
  };
  switch (t) {
    case ncclFloat16: for (uint64_t b : {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7bff, 0x7e00, 0x0001, 0x83ff}) add(b); break;
    case ncclBfloat16: for (uint64_t b : {0x0000, 0x8000, 0x7f80, 0xff80, 0x7f7f, 0x7fc0, 0x0001}) add(b); break;
    case ncclFloat8e4m3: for (uint64_t b : {0x00, 0x80, 0x7e, 0xfe, 0x7f, 0x01, 0x87}) add(b); break;
    case ncclFloat8e5m2: for (uint64_t b : {0x00, 0x80, 0x7c, 0xfc, 0x7b, 0x7e, 0x01}) add(b); break;
    case ncclFloat32: for (uint64_t b : {0x0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x7fc00000u, 0x1u}) add(b); break;
    case ncclFloat64: for (uint64_t b : {0x0ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0x7fefffffffffffffull, 0x7ff8000000000000ull, 0x1ull}) add(b); break;
    default: for (uint64_t b : {0x0ull, ~0ull, 0x7fffffffffffffffull, 0x8000000000000000ull, 1ull}) add(b); break;
  }
  for (size_t i = 0; i + 1 < n && i < 200; i += 3) {
    const auto& e = specials[(i / 3 + seed) % specials.size()];
    std::memcpy(v.data() + ((i * 7919) % n) * ts, e.data(), ts);
  }
  return v;
}

/// Everything one (type, op) needs on both sides.
struct OpCase {
  ncclDataType_t type;
  TOp op;
  int nranks;
  uint64_t scalarBits;
  Reducer host() const {
    if (op == TOp::kPreMulSum) return Reducer::preMulSum(type, &scalarBits, nranks);
    const ncclRedOp_t o = op == TOp::kSum ? ncclSum : op == TOp::kProd ? ncclProd
                          : op == TOp::kMax ? ncclMax : op == TOp::kMin ? ncclMin : ncclAvg;
    return Reducer(type, o, nranks);
  }
};

/// Calls f.template operator()<Tr, R>() for the case's traits and reduction family.
template <class F>
void withOp(const OpCase& c, F&& f);

template <int T, class F>
void withRed(const OpCase& c, F&& f) {
  using Tr = devred::DevTraits<T>;
  switch (c.op) {
    case TOp::kProd: f.template run<Tr, DevRed::kProd>(); break;
    case TOp::kMax: f.template run<Tr, DevRed::kMax>(); break;
    case TOp::kMin: f.template run<Tr, DevRed::kMin>(); break;
    default: f.template run<Tr, DevRed::kSum>(); break;
  }
}

template <class F>
void withOp(const OpCase& c, F&& f) {
  switch (c.type) {
    case ncclInt8: withRed<ncclInt8>(c, f); break;
    case ncclUint8: withRed<ncclUint8>(c, f); break;
    case ncclInt32: withRed<ncclInt32>(c, f); break;
    case ncclUint32: withRed<ncclUint32>(c, f); break;
    case ncclInt64: withRed<ncclInt64>(c, f); break;
    case ncclUint64: withRed<ncclUint64>(c, f); break;
    case ncclFloat16: withRed<ncclFloat16>(c, f); break;
    case ncclFloat32: withRed<ncclFloat32>(c, f); break;
    case ncclFloat64: withRed<ncclFloat64>(c, f); break;
    case ncclBfloat16: withRed<ncclBfloat16>(c, f); break;
    case ncclFloat8e4m3: withRed<ncclFloat8e4m3>(c, f); break;
    case ncclFloat8e5m2: withRed<ncclFloat8e5m2>(c, f); break;
    default: FAIL() << "bad type";
  }
}

/// The device functor for the case and flags.
template <class Tr, DevRed R>
devred::DevOp<Tr, R> devOp(const OpCase& c, uint8_t flags) {
  typename Tr::Storage s;
  std::memcpy(&s, &c.scalarBits, sizeof s);
  return devred::DevOp<Tr, R>(c.op == TOp::kPreMulSum, s, c.op == TOp::kAvg, c.nranks, flags);
}

/// Compares n elements; two NaNs are equal where both operands were NaN (which one
/// propagates is the compiler's choice, on the host as on the GPU).
void expectSame(const OpCase& c, const std::string& what, const unsigned char* got,
                const unsigned char* want, const unsigned char* in, const unsigned char* local,
                size_t n) {
  const size_t ts = dataTypeSize(c.type);
  int bad = 0;
  for (size_t i = 0; i < n && bad < 3; ++i) {
    if (std::memcmp(got + i * ts, want + i * ts, ts) == 0) continue;
    if (isNaN(c.type, got + i * ts) && isNaN(c.type, want + i * ts) && in && isNaN(c.type, in + i * ts) &&
        local && isNaN(c.type, local + i * ts))
      continue;
    uint64_t g = 0, w = 0, a = 0, b = 0;
    std::memcpy(&g, got + i * ts, ts);
    std::memcpy(&w, want + i * ts, ts);
    if (in) std::memcpy(&a, in + i * ts, ts);
    if (local) std::memcpy(&b, local + i * ts, ts);
    ADD_FAILURE() << dataTypeName(c.type) << " " << opName(c.op) << " nranks=" << c.nranks << " "
                  << what << " element " << i << ": in=0x" << std::hex << a << " local=0x" << b
                  << " scalar=0x" << c.scalarBits << ": device 0x" << g << ", host 0x" << w;
    ++bad;
  }
}

/// Applies the device functor element by element.
struct ElemRun {
  const OpCase& c;
  uint8_t flags;
  const std::vector<unsigned char>& in;
  const std::vector<unsigned char>& local;
  std::vector<unsigned char>& got;
  std::vector<unsigned char>& gotCopy;
  size_t n;
  template <class Tr, DevRed R>
  void run() {
    using S = typename Tr::Storage;
    const auto op = devOp<Tr, R>(c, flags);
    for (size_t i = 0; i < n; ++i) {
      S a, b;
      std::memcpy(&a, in.data() + i * sizeof(S), sizeof(S));
      std::memcpy(&b, local.data() + i * sizeof(S), sizeof(S));
      const S r = op.reduce(a, b), rc = op.copy(a);
      std::memcpy(got.data() + i * sizeof(S), &r, sizeof(S));
      std::memcpy(gotCopy.data() + i * sizeof(S), &rc, sizeof(S));
    }
  }
};

TEST(DevReduceOps, EveryTypeOpAndFlagBitExact) {
  constexpr size_t kN = 3001;
  for (ncclDataType_t t : kTypes) {
    const size_t ts = dataTypeSize(t);
    const auto in = randomElems(t, kN, 1 + t);
    const auto local = randomElems(t, kN, 100 + t);
    for (TOp op : kOps) {
      for (int nranks : {3, 4}) {
        OpCase c{t, op, nranks, 0};
        // A finite scalar (an element of the random data that is not NaN).
        for (size_t i = 0; i < kN; ++i) {
          if (isNaN(t, local.data() + i * ts)) continue;
          std::memcpy(&c.scalarBits, local.data() + ((i * 31 + nranks) % kN) * ts, ts);
          if (!isNaN(t, reinterpret_cast<const unsigned char*>(&c.scalarBits))) break;
        }
        const Reducer host = c.host();
        for (uint8_t flags : {uint8_t(0), uint8_t(kPreOp), uint8_t(kPostOp), uint8_t(kPreOp | kPostOp)}) {
          std::vector<unsigned char> want(kN * ts), got(kN * ts), wantCopy(kN * ts), gotCopy(kN * ts);
          host.reduce(want.data(), in.data(), local.data(), kN, flags);
          host.copy(wantCopy.data(), in.data(), kN, flags);
          ElemRun run{c, flags, in, local, got, gotCopy, kN};
          withOp(c, run);
          const std::string f = " flags=" + std::to_string(flags);
          expectSame(c, "reduce" + f, got.data(), want.data(), in.data(), local.data(), kN);
          expectSame(c, "copy" + f, gotCopy.data(), wantCopy.data(), nullptr, nullptr, kN);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST(DevReduceOps, NarrowFloatSaturationAndSpecials) {
  // fp8 sums beyond the range saturate; e5m2 infinities become max finite; NaN -> 0x7F.
  using E4 = devred::DevTraits<ncclFloat8e4m3>;
  using E5 = devred::DevTraits<ncclFloat8e5m2>;
  const devred::DevOp<E4, DevRed::kSum> sum4(false, 0, false, 1, 0);
  const devred::DevOp<E5, DevRed::kSum> sum5(false, 0, false, 1, 0);
  EXPECT_EQ(sum4.reduce(0x7e, 0x7e), 0x7e);  // 448 + 448 -> 448
  EXPECT_EQ(sum4.reduce(0xfe, 0xfe), 0xfe);  // -448 - 448 -> -448
  EXPECT_EQ(sum4.reduce(0x7f, 0x00), 0x7f);  // NaN
  EXPECT_EQ(sum5.reduce(0x7c, 0x00), 0x7b);  // inf -> 57344
  EXPECT_EQ(sum5.reduce(0x7b, 0x7b), 0x7b);
  using H = devred::DevTraits<ncclFloat16>;
  const devred::DevOp<H, DevRed::kMax> max16(false, 0, false, 1, 0);
  const devred::DevOp<H, DevRed::kMin> min16(false, 0, false, 1, 0);
  EXPECT_EQ(max16.reduce(0x8000, 0x0000), 0x0000);  // max(-0, +0) = +0
  EXPECT_EQ(min16.reduce(0x0000, 0x8000), 0x8000);  // min(+0, -0) = -0
  EXPECT_EQ(max16.reduce(0x7e00, 0x3c00), 0x3c00);  // NaN ignored
  EXPECT_EQ(max16.reduce(0x3c00, 0x7e00), 0x3c00);
  const devred::DevOp<H, DevRed::kSum> sum16(false, 0, false, 1, 0);
  EXPECT_EQ(sum16.reduce(0x7bff, 0x7bff), 0x7c00);  // 65504 + 65504 -> inf
  // Integer Avg truncates toward zero; sums wrap.
  using I8 = devred::DevTraits<ncclInt8>;
  const devred::DevOp<I8, DevRed::kSum> avg8(false, 0, true, 3, kPostOp);
  EXPECT_EQ(avg8.reduce(int8_t(-7), int8_t(0)), int8_t(-2));
  EXPECT_EQ(avg8.reduce(int8_t(100), int8_t(100)), int8_t(-18));  // 200 wraps to -56, / 3
}

// ---- the block-parallel piece loops -------------------------------------------------------

/// Runs runPiece for every thread of a TestBlock of `nt` threads.
struct PieceRun {
  const OpCase& c;
  uint8_t flags;
  int nt;
  char* dst;
  char* slot;
  const char* in;
  const char* local;
  uint64_t bytes;
  bool reduce;
  template <class Tr, DevRed R>
  void run() {
    const auto op = devOp<Tr, R>(c, flags);
    TestBlock b;
    b.n = nt;
    for (int t = 0; t < nt; ++t) {
      b.t = t;
      devinterp::runPiece(b, op, dst, slot, in, local, bytes, reduce);
    }
  }
};

TEST(DevPieces, MisalignedOddLengthsManyThreads) {
  const ncclDataType_t types[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64, ncclFloat8e5m2,
                                  ncclUint64};
  constexpr size_t kMax = 1200;
  for (ncclDataType_t t : types) {
    const size_t ts = dataTypeSize(t);
    const auto in = randomElems(t, kMax + 64, 7 + t);
    const auto local = randomElems(t, kMax + 64, 70 + t);
    int k = 0;
    for (TOp op : {TOp::kSum, TOp::kPreMulSum, TOp::kAvg, TOp::kMax}) {
      OpCase c{t, op, 3, 0};
      std::memcpy(&c.scalarBits, in.data() + 5 * ts, ts);  // a random element as the scalar
      if (isNaN(t, in.data() + 5 * ts)) c.scalarBits = 1;  // (bits of a tiny value)
      const Reducer host = c.host();
      for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(17), size_t(100), size_t(kMax)}) {
        for (int nt : {1, 5, 64}) {
          for (bool reduce : {true, false}) {
            for (uint8_t flags : {uint8_t(0), uint8_t(kPreOp | kPostOp)}) {
              // Element offsets of in / local / dst / slot: co-aligned or not.
              const size_t oi = (k * 3) % 9, ol = reduce ? (k % 2 ? oi : (k * 5) % 7) : 0;
              const size_t od = k % 3 ? oi : (k * 7) % 11, os = k % 4 ? od : (k * 2) % 5;
              ++k;
              std::vector<unsigned char> want(kMax * ts + 64), dst(kMax * ts + 256, 0xEE),
                  slot(kMax * ts + 256, 0xDD);
              const unsigned char* pin = in.data() + oi * ts;
              const unsigned char* plo = local.data() + ol * ts;
              if (reduce) host.reduce(want.data(), pin, plo, n, flags);
              else host.copy(want.data(), pin, n, flags);
              PieceRun run{c, flags, nt,
                           reinterpret_cast<char*>(dst.data() + od * ts),
                           reinterpret_cast<char*>(slot.data() + os * ts),
                           reinterpret_cast<const char*>(pin),
                           reinterpret_cast<const char*>(plo), n * ts, reduce};
              withOp(c, run);
              const std::string what = std::string(reduce ? "reduce" : "copy") + " n=" +
                                       std::to_string(n) + " threads=" + std::to_string(nt) +
                                       " offsets=" + std::to_string(oi) + "," + std::to_string(ol) +
                                       "," + std::to_string(od) + "," + std::to_string(os);
              expectSame(c, what + " dst", dst.data() + od * ts, want.data(), pin, reduce ? plo : nullptr, n);
              expectSame(c, what + " slot", slot.data() + os * ts, want.data(), pin, reduce ? plo : nullptr, n);
              // Nothing outside the piece was written.
              for (size_t i = 0; i < od * ts; ++i) ASSERT_EQ(dst[i], 0xEE) << what;
              for (size_t i = (od + n) * ts; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << what;
              for (size_t i = (os + n) * ts; i < slot.size(); ++i) ASSERT_EQ(slot[i], 0xDD) << what;
              if (HasFailure()) return;
            }
          }
        }
      }
    }
  }
}

TEST(DevPieces, ByteCopiesAtEveryAlignment) {
  std::vector<unsigned char> src(700);
  std::mt19937 rng(5);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  const OpCase c{ncclUint8, TOp::kSum, 1, 0};
  for (size_t oi = 0; oi < 20; oi += 3) {
    for (size_t od : {oi, oi + 16, oi + 4, oi + 1, oi + 2}) {
      for (size_t n : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(33), size_t(600)}) {
        for (int nt : {1, 7}) {
          std::vector<unsigned char> d1(700, 0xEE), d2(700, 0xEE);
          TestBlock b;
          b.n = nt;
          for (int t = 0; t < nt; ++t) {
            b.t = t;
            devinterp::copyBytes(b, reinterpret_cast<char*>(d1.data() + od),
                                 reinterpret_cast<char*>(d2.data() + (od ^ 16) % 64),
                                 reinterpret_cast<const char*>(src.data() + oi), n);
          }
          ASSERT_EQ(0, std::memcmp(d1.data() + od, src.data() + oi, n)) << oi << " " << od << " " << n;
          ASSERT_EQ(0, std::memcmp(d2.data() + (od ^ 16) % 64, src.data() + oi, n));
          for (size_t i = od + n; i < d1.size(); ++i) ASSERT_EQ(d1[i], 0xEE);
          for (size_t i = 0; i < od; ++i) ASSERT_EQ(d1[i], 0xEE);
        }
      }
    }
  }
  (void)c;
}

}  // namespace
}  // namespace braid
