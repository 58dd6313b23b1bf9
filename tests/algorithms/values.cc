#include "tests/algorithms/values.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace braid {
namespace algotest {
namespace {

const TypeInfo kTypes[kNumTypes] = {
    {ncclInt8, "int8", 1, false, true, 127, 0},
    {ncclUint8, "uint8", 1, false, false, 255, 0},
    {ncclInt32, "int32", 4, false, true, 2147483647.0, 0},
    {ncclUint32, "uint32", 4, false, false, 4294967295.0, 0},
    {ncclInt64, "int64", 8, false, true, 9007199254740992.0, 0},
    {ncclUint64, "uint64", 8, false, false, 9007199254740992.0, 0},
    {ncclFloat16, "fp16", 2, true, true, 2048, 10},
    {ncclFloat32, "fp32", 4, true, true, 16777216.0, 23},
    {ncclFloat64, "fp64", 8, true, true, 9007199254740992.0, 52},
    {ncclBfloat16, "bf16", 2, true, true, 256, 7},
    {ncclFloat8e4m3, "fp8e4m3", 1, true, true, 16, 3},
    {ncclFloat8e5m2, "fp8e5m2", 1, true, true, 8, 2},
};

struct MiniFormat {
  int expBits, mantBits, bias;
  bool fnNan;  // e4m3fn: no infinities, all-ones is NaN
};

MiniFormat miniFormat(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return {5, 10, 15, false};
    case ncclBfloat16: return {8, 7, 127, false};
    case ncclFloat8e4m3: return {4, 3, 7, true};
    case ncclFloat8e5m2: return {5, 2, 15, false};
    default: throw std::logic_error("not a narrow float");
  }
}

/// Round to nearest, ties to even.
double rne(double x) { return std::nearbyint(x); }

uint32_t encodeMini(const MiniFormat& f, double v) {
  const uint32_t sign = std::signbit(v) ? 1u : 0u;
  const uint32_t signBit = sign << (f.expBits + f.mantBits);
  double a = std::fabs(v);
  if (std::isnan(v)) return ((1u << (f.expBits + f.mantBits)) - 1);
  if (a == 0) return signBit;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;    // a = 1.x * 2^exp
  int biased = exp + f.bias;
  uint32_t mant;
  if (biased <= 0) {  // subnormal
    mant = uint32_t(rne(std::ldexp(a, f.mantBits + f.bias - 1)));
    if (mant >> f.mantBits) return signBit | (1u << f.mantBits);  // rounded up to normal
    return signBit | mant;
  }
  mant = uint32_t(rne(std::ldexp(a, f.mantBits - exp))) - (1u << f.mantBits);
  if (mant >> f.mantBits) {
    mant = 0;
    ++biased;
  }
  if (biased >= (1 << f.expBits) - (f.fnNan ? 0 : 1))
    throw std::logic_error("value out of the test's range");
  return signBit | (uint32_t(biased) << f.mantBits) | mant;
}

double decodeMini(const MiniFormat& f, uint32_t bits) {
  const bool neg = (bits >> (f.expBits + f.mantBits)) & 1u;
  const uint32_t expField = (bits >> f.mantBits) & ((1u << f.expBits) - 1);
  const uint32_t mant = bits & ((1u << f.mantBits) - 1);
  const uint32_t expMax = (1u << f.expBits) - 1;
  double v;
  if (f.fnNan && expField == expMax && mant == (1u << f.mantBits) - 1) {
    v = NAN;
  } else if (!f.fnNan && expField == expMax) {
    v = mant ? NAN : INFINITY;
  } else if (expField == 0) {
    v = std::ldexp(double(mant), 1 - f.bias - f.mantBits);
  } else {
    v = std::ldexp(double(mant | (1u << f.mantBits)), int(expField) - f.bias - f.mantBits);
  }
  return neg ? -v : v;
}

template <class T>
void put(T v, void* p) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
T get(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

const TypeInfo& typeInfo(ncclDataType_t t) {
  for (const TypeInfo& i : kTypes)
    if (i.type == t) return i;
  throw std::logic_error("unknown type");
}
const TypeInfo& typeAt(int i) { return kTypes[i]; }

Op opAt(int i) {
  static const Op ops[kNumOps] = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kAvg,
                                  Op::kPreMulSum};
  return ops[i];
}

const char* opName(Op op) {
  switch (op) {
    case Op::kSum: return "sum";
    case Op::kProd: return "prod";
    case Op::kMax: return "max";
    case Op::kMin: return "min";
    case Op::kAvg: return "avg";
    case Op::kPreMulSum: return "premulsum";
    case Op::kNone: break;
  }
  return "none";
}

void encode(const TypeInfo& t, double v, void* p) {
  switch (t.type) {
    case ncclInt8: put<int8_t>(int8_t(v), p); break;
    case ncclUint8: put<uint8_t>(uint8_t(v), p); break;
    case ncclInt32: put<int32_t>(int32_t(v), p); break;
    case ncclUint32: put<uint32_t>(uint32_t(v), p); break;
    case ncclInt64: put<int64_t>(int64_t(v), p); break;
    case ncclUint64: put<uint64_t>(uint64_t(v), p); break;
    case ncclFloat32: put<float>(float(v), p); break;
    case ncclFloat64: put<double>(v, p); break;
    case ncclFloat16:
    case ncclBfloat16: put<uint16_t>(uint16_t(encodeMini(miniFormat(t.type), v)), p); break;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: put<uint8_t>(uint8_t(encodeMini(miniFormat(t.type), v)), p); break;
    default: throw std::logic_error("unknown type");
  }
}

double decode(const TypeInfo& t, const void* p) {
  switch (t.type) {
    case ncclInt8: return get<int8_t>(p);
    case ncclUint8: return get<uint8_t>(p);
    case ncclInt32: return get<int32_t>(p);
    case ncclUint32: return get<uint32_t>(p);
    case ncclInt64: return double(get<int64_t>(p));
    case ncclUint64: return double(get<uint64_t>(p));
    case ncclFloat32: return get<float>(p);
    case ncclFloat64: return get<double>(p);
    case ncclFloat16:
    case ncclBfloat16: return decodeMini(miniFormat(t.type), get<uint16_t>(p));
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return decodeMini(miniFormat(t.type), get<uint8_t>(p));
    default: throw std::logic_error("unknown type");
  }
}

double preMulScalar(const TypeInfo& t, int r) {
  static const double signedScalars[3] = {1, 2, -1};
  return t.isSigned ? signedScalars[r % 3] : double(1 + r % 2);
}

double inputValue(const TypeInfo& t, Op op, int n, int r, uint64_t i) {
  const double budget = std::min(t.exactMax, 1e6);
  const uint64_t ur = uint64_t(r);
  switch (op) {
    case Op::kSum:
    case Op::kAvg:
    case Op::kPreMulSum: {
      // |value| <= 3, at most k ranks nonzero per element, so that k * 3 * |scalar|
      // stays within the exact range whatever the order of the partial sums.
      const double scale = op == Op::kPreMulSum ? 2 : 1;
      const int k = std::max(1, int(budget / (3 * scale)));
      const uint64_t stride = uint64_t((n + k - 1) / k);
      if ((ur + i) % stride != 0) return 0;
      return t.isSigned ? double(int((ur * 7 + i * 13) % 7) - 3) : double((ur * 7 + i * 13) % 4);
    }
    case Op::kProd: {
      // +-1 everywhere, 2 on at most log2(budget) ranks per element.
      const int twos = std::max(1, int(std::floor(std::log2(budget))));
      const uint64_t stride = uint64_t((n + twos - 1) / twos);
      if ((ur + i) % stride == 0) return 2;
      return t.isSigned && (ur + i * 3) % 3 == 0 ? -1 : 1;
    }
    case Op::kMax:
    case Op::kMin: {
      const uint64_t m = uint64_t(std::min(budget, 100.0));
      return t.isSigned ? double(int64_t((ur * 31 + i * 17) % (2 * m + 1)) - int64_t(m))
                        : double((ur * 31 + i * 17) % (m + 1));
    }
    case Op::kNone: {
      const uint64_t m = uint64_t(std::min(budget, 1000.0));
      return t.isSigned ? double(int64_t((ur * 37 + i * 11 + 5) % (2 * m + 1)) - int64_t(m))
                        : double((ur * 37 + i * 11 + 5) % (m + 1));
    }
  }
  return 0;
}

void RefReduce::add(int rank, double v) {
  if (op_ == Op::kPreMulSum) v *= preMulScalar(t_, rank);
  if (first_) {
    acc_ = v;
    first_ = false;
    return;
  }
  switch (op_) {
    case Op::kSum:
    case Op::kAvg:
    case Op::kPreMulSum: acc_ += v; break;
    case Op::kProd: acc_ *= v; break;
    case Op::kMax: acc_ = std::max(acc_, v); break;
    case Op::kMin: acc_ = std::min(acc_, v); break;
    case Op::kNone: acc_ = v; break;
  }
}

double RefReduce::result() const {
  if (op_ != Op::kAvg) return acc_;
  if (!t_.isFloat) return std::trunc(acc_ / n_);
  return acc_ / n_;
}

double RefReduce::tolerance() const {
  if (op_ != Op::kAvg || !t_.isFloat) return 0;
  return std::fabs(result()) * std::ldexp(1.0, -t_.mantBits);
}

}  // namespace algotest
}  // namespace braid
