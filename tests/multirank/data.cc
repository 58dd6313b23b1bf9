#include "tests/multirank/data.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace mr {
namespace {

/// A binary floating-point format with `e` exponent bits and `m` mantissa bits.
struct MiniFloat {
  int e, m, bias;
};
constexpr MiniFloat kHalf{5, 10, 15};
constexpr MiniFloat kBf16{8, 7, 127};
constexpr MiniFloat kE4m3{4, 3, 7};
constexpr MiniFloat kE5m2{5, 2, 15};

/// Encodes an exactly representable finite value (the suites only use such values).
uint32_t encodeMini(const MiniFloat& f, double v) {
  uint32_t sign = std::signbit(v) ? 1u : 0u;
  double a = std::fabs(v);
  uint32_t bits = 0;
  if (a != 0) {
    int ex = 0;
    double frac = std::frexp(a, &ex);  // a = frac * 2^ex, frac in [0.5, 1)
    int field = ex - 1 + f.bias;
    double mant;
    if (field <= 0) {  // subnormal
      mant = std::ldexp(a, f.bias - 1 + f.m);
      field = 0;
    } else {
      mant = (frac * 2 - 1) * std::ldexp(1.0, f.m);
    }
    if (mant != std::floor(mant) || field >= (1 << f.e))
      throw std::runtime_error("test value " + std::to_string(v) + " is not exact in the type");
    bits = (uint32_t(field) << f.m) | uint32_t(mant);
  }
  return (sign << (f.e + f.m)) | bits;
}

double decodeMini(const MiniFloat& f, uint32_t bits) {
  uint32_t sign = (bits >> (f.e + f.m)) & 1u;
  uint32_t field = (bits >> f.m) & ((1u << f.e) - 1);
  uint32_t mant = bits & ((1u << f.m) - 1);
  double v;
  if (field == 0) v = std::ldexp(double(mant), 1 - f.bias - f.m);
  else v = std::ldexp(1.0 + std::ldexp(double(mant), -f.m), int(field) - f.bias);
  return sign ? -v : v;
}

template <class T>
void put(void* buf, size_t i, T v) {
  memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T get(const void* buf, size_t i) {
  T v;
  memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "fp16";
    case ncclFloat32: return "fp32";
    case ncclFloat64: return "fp64";
    case ncclBfloat16: return "bf16";
    case ncclFloat8e4m3: return "fp8e4m3";
    case ncclFloat8e5m2: return "fp8e5m2";
    default: return "invalid";
  }
}

bool isUnsigned(ncclDataType_t t) {
  return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> types = {
      ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,     ncclInt64,     ncclUint64,
      ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return types;
}

void store(ncclDataType_t t, void* buf, size_t i, double v) {
  switch (t) {
    case ncclInt8: put<int8_t>(buf, i, int8_t(int64_t(v))); break;
    case ncclUint8: put<uint8_t>(buf, i, uint8_t(int64_t(v))); break;
    case ncclInt32: put<int32_t>(buf, i, int32_t(int64_t(v))); break;
    case ncclUint32: put<uint32_t>(buf, i, uint32_t(int64_t(v))); break;
    case ncclInt64: put<int64_t>(buf, i, int64_t(v)); break;
    case ncclUint64: put<uint64_t>(buf, i, uint64_t(int64_t(v))); break;
    case ncclFloat32: put<float>(buf, i, float(v)); break;
    case ncclFloat64: put<double>(buf, i, v); break;
    case ncclFloat16: put<uint16_t>(buf, i, uint16_t(encodeMini(kHalf, v))); break;
    case ncclBfloat16: put<uint16_t>(buf, i, uint16_t(encodeMini(kBf16, v))); break;
    case ncclFloat8e4m3: put<uint8_t>(buf, i, uint8_t(encodeMini(kE4m3, v))); break;
    case ncclFloat8e5m2: put<uint8_t>(buf, i, uint8_t(encodeMini(kE5m2, v))); break;
    default: break;
  }
}

double load(ncclDataType_t t, const void* buf, size_t i) {
  switch (t) {
    case ncclInt8: return get<int8_t>(buf, i);
    case ncclUint8: return get<uint8_t>(buf, i);
    case ncclInt32: return get<int32_t>(buf, i);
    case ncclUint32: return get<uint32_t>(buf, i);
    case ncclInt64: return double(get<int64_t>(buf, i));
    case ncclUint64: return double(get<uint64_t>(buf, i));
    case ncclFloat32: return get<float>(buf, i);
    case ncclFloat64: return get<double>(buf, i);
    case ncclFloat16: return decodeMini(kHalf, get<uint16_t>(buf, i));
    case ncclBfloat16: return decodeMini(kBf16, get<uint16_t>(buf, i));
    case ncclFloat8e4m3: return decodeMini(kE4m3, get<uint8_t>(buf, i));
    case ncclFloat8e5m2: return decodeMini(kE5m2, get<uint8_t>(buf, i));
    default: return 0;
  }
}

TypedBuffer::TypedBuffer(ncclDataType_t t, size_t count)
    : type_(t), count_(count), bytes_(2 * kGuard + count * typeSize(t), kPattern) {}

void TypedBuffer::fill(double v) {
  for (size_t i = 0; i < count_; ++i) set(i, v);
}

::testing::AssertionResult TypedBuffer::guardsIntact() const {
  const size_t dataBytes = count_ * typeSize(type_);
  for (size_t i = 0; i < kGuard; ++i) {
    if (bytes_[i] != kPattern)
      return ::testing::AssertionFailure() << "byte " << (kGuard - i) << " before the buffer "
                                           << "was overwritten";
    if (bytes_[kGuard + dataBytes + i] != kPattern)
      return ::testing::AssertionFailure() << "byte " << i << " after the end of the "
                                           << count_ << "-element buffer was overwritten";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mr
