#include "tests/soak/elements.h"

#include <cmath>
#include <cstring>

namespace soak {
namespace {

/// A small IEEE-like float format: sign, `ebits` exponent bits, `mbits` mantissa bits.
struct MiniFloat {
  int ebits, mbits, bias;
  bool ieeeInf;  ///< all-ones exponent means inf/NaN (false: e4m3, NaN only at S.1111.111)
};
constexpr MiniFloat kHalf{5, 10, 15, true};
constexpr MiniFloat kBf16{8, 7, 127, true};
constexpr MiniFloat kE4m3{4, 3, 7, false};
constexpr MiniFloat kE5m2{5, 2, 15, true};

/// Encodes a non-negative integer value that the format holds exactly.
uint32_t encodeMini(const MiniFloat& f, double v) {
  if (v == 0) return 0;
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  const int exp = e - 1 + f.bias;
  const double frac = (m * 2 - 1) * double(1u << f.mbits);
  return (uint32_t(exp) << f.mbits) | uint32_t(std::lround(frac));
}

double decodeMini(const MiniFloat& f, uint32_t bits) {
  const uint32_t mmask = (1u << f.mbits) - 1, emax = (1u << f.ebits) - 1;
  const bool neg = (bits >> (f.ebits + f.mbits)) & 1u;
  const uint32_t exp = (bits >> f.mbits) & emax, mant = bits & mmask;
  double v;
  if (f.ieeeInf && exp == emax)
    v = mant ? std::nan("") : INFINITY;
  else if (!f.ieeeInf && exp == emax && mant == mmask)
    v = std::nan("");
  else if (exp == 0)
    v = std::ldexp(double(mant), 1 - f.bias - f.mbits);
  else
    v = std::ldexp(1.0 + double(mant) / double(1u << f.mbits), int(exp) - f.bias);
  return neg ? -v : v;
}

template <typename T>
void putAs(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}
template <typename T>
T getAs(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

const char* typeName(ncclDataType_t t) {
  static const char* const names[kNumTypes] = {"int8", "uint8", "int32", "uint32",
                                               "int64", "uint64", "float16", "float32",
                                               "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return int(t) >= 0 && int(t) < kNumTypes ? names[int(t)] : "?";
}

bool isFloatType(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

double exactRange(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return 127;
    case ncclUint8: return 255;
    case ncclFloat16: return 2048;
    case ncclBfloat16: return 256;
    case ncclFloat8e4m3: return 16;
    case ncclFloat8e5m2: return 8;
    default: return 1e6;
  }
}

void putElement(void* buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclInt8: putAs<int8_t>(buf, i, int8_t(v)); break;
    case ncclUint8: putAs<uint8_t>(buf, i, uint8_t(v)); break;
    case ncclInt32: putAs<int32_t>(buf, i, int32_t(v)); break;
    case ncclUint32: putAs<uint32_t>(buf, i, uint32_t(v)); break;
    case ncclInt64: putAs<int64_t>(buf, i, int64_t(v)); break;
    case ncclUint64: putAs<uint64_t>(buf, i, uint64_t(v)); break;
    case ncclFloat32: putAs<float>(buf, i, float(v)); break;
    case ncclFloat64: putAs<double>(buf, i, v); break;
    case ncclFloat16: putAs<uint16_t>(buf, i, uint16_t(encodeMini(kHalf, v))); break;
    case ncclBfloat16: putAs<uint16_t>(buf, i, uint16_t(encodeMini(kBf16, v))); break;
    case ncclFloat8e4m3: putAs<uint8_t>(buf, i, uint8_t(encodeMini(kE4m3, v))); break;
    case ncclFloat8e5m2: putAs<uint8_t>(buf, i, uint8_t(encodeMini(kE5m2, v))); break;
    default: break;
  }
}

double getElement(const void* buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclInt8: return getAs<int8_t>(buf, i);
    case ncclUint8: return getAs<uint8_t>(buf, i);
    case ncclInt32: return getAs<int32_t>(buf, i);
    case ncclUint32: return getAs<uint32_t>(buf, i);
    case ncclInt64: return double(getAs<int64_t>(buf, i));
    case ncclUint64: return double(getAs<uint64_t>(buf, i));
    case ncclFloat32: return getAs<float>(buf, i);
    case ncclFloat64: return getAs<double>(buf, i);
    case ncclFloat16: return decodeMini(kHalf, getAs<uint16_t>(buf, i));
    case ncclBfloat16: return decodeMini(kBf16, getAs<uint16_t>(buf, i));
    case ncclFloat8e4m3: return decodeMini(kE4m3, getAs<uint8_t>(buf, i));
    case ncclFloat8e5m2: return decodeMini(kE5m2, getAs<uint8_t>(buf, i));
    default: return std::nan("");
  }
}

}  // namespace soak
