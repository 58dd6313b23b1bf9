// Host-side type handling of the perf suite (see datatypes.h).
#include "perf/datatypes.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace braid_perf {
namespace {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  bool isFloat;
  double epsilon;     // 2^-mantissa_bits for floats
  double exactLimit;  // every integer 0..exactLimit is exact (and never the 0xff.. sentinel)
};

constexpr TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, false, 0, 127},
    {ncclUint8, "uint8", 1, false, 0, 254},
    {ncclInt32, "int32", 4, false, 0, 2147483646.0},
    {ncclUint32, "uint32", 4, false, 0, 4294967294.0},
    {ncclInt64, "int64", 8, false, 0, 9007199254740992.0},
    {ncclUint64, "uint64", 8, false, 0, 9007199254740992.0},
    {ncclFloat16, "half", 2, true, 0x1p-10, 2048},
    {ncclFloat32, "float", 4, true, 0x1p-23, 16777216.0},
    {ncclFloat64, "double", 8, true, 0x1p-52, 9007199254740992.0},
    {ncclBfloat16, "bfloat16", 2, true, 0x1p-7, 256},
    {ncclFloat8e4m3, "f8e4m3", 1, true, 0x1p-3, 16},
    {ncclFloat8e5m2, "f8e5m2", 1, true, 0x1p-2, 8},
};

const TypeInfo& info(ncclDataType_t type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t;
  }
  return kTypes[7];  // unreachable for valid types; float
}

struct Alias {
  const char* name;
  ncclDataType_t type;
};
constexpr Alias kAliases[] = {
    {"char", ncclInt8},          {"int", ncclInt32},       {"fp16", ncclFloat16},
    {"float16", ncclFloat16},    {"float32", ncclFloat32}, {"fp32", ncclFloat32},
    {"float64", ncclFloat64},    {"fp64", ncclFloat64},    {"bf16", ncclBfloat16},
    {"e4m3", ncclFloat8e4m3},    {"e5m2", ncclFloat8e5m2}, {"fp8_e4m3", ncclFloat8e4m3},
    {"fp8_e5m2", ncclFloat8e5m2}};

template <typename T>
T* at(void* buf, size_t idx) {
  return static_cast<T*>(buf) + idx;
}
template <typename T>
T get(const void* buf, size_t idx) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(buf) + idx * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void put(void* buf, size_t idx, T v) {
  std::memcpy(static_cast<unsigned char*>(buf) + idx * sizeof(T), &v, sizeof(T));
}

}  // namespace

const char* typeName(ncclDataType_t type) { return info(type).name; }
size_t typeSize(ncclDataType_t type) { return info(type).size; }
bool isFloatType(ncclDataType_t type) { return info(type).isFloat; }
double typeEpsilon(ncclDataType_t type) { return info(type).epsilon; }
double exactIntegerLimit(ncclDataType_t type) { return info(type).exactLimit; }

std::vector<ncclDataType_t> parseTypes(const std::string& text) {
  std::vector<ncclDataType_t> out;
  if (text == "all") {
    for (const TypeInfo& t : kTypes) out.push_back(t.type);
    return out;
  }
  for (const TypeInfo& t : kTypes) {
    if (text == t.name) out.push_back(t.type);
  }
  for (const Alias& a : kAliases) {
    if (text == a.name) out.push_back(a.type);
  }
  return out;
}

const char* opName(PerfOp op) {
  switch (op) {
    case PerfOp::kSum:
      return "sum";
    case PerfOp::kProd:
      return "prod";
    case PerfOp::kMin:
      return "min";
    case PerfOp::kMax:
      return "max";
    case PerfOp::kAvg:
      return "avg";
    case PerfOp::kPreMulSum:
      return "premulsum";
    case PerfOp::kNone:
      return "none";
  }
  return "none";
}

std::vector<PerfOp> parseOps(const std::string& text) {
  const PerfOp all[] = {PerfOp::kSum, PerfOp::kProd, PerfOp::kMin,
                        PerfOp::kMax, PerfOp::kAvg,  PerfOp::kPreMulSum};
  std::vector<PerfOp> out;
  for (PerfOp op : all) {
    if (text == "all" || text == opName(op)) out.push_back(op);
  }
  return out;
}

unsigned encodeMinifloat(double v, int expBits, int manBits, bool ieee) {
  const unsigned expMask = (1u << expBits) - 1;
  const unsigned manMask = (1u << manBits) - 1;
  const unsigned sign = std::signbit(v) ? 1u << (expBits + manBits) : 0u;
  const int bias = (1 << (expBits - 1)) - 1;
  if (std::isnan(v)) return sign | (expMask << manBits) | (ieee ? 1u << (manBits - 1) : manMask);
  v = std::fabs(v);
  if (v == 0) return sign;
  const unsigned maxFinite =
      ieee ? ((expMask - 1) << manBits) | manMask : (expMask << manBits) | (manMask - 1);
  const unsigned overflow = ieee ? expMask << manBits : maxFinite;
  if (std::isinf(v)) return sign | overflow;
  int e = 0;
  std::frexp(v, &e);
  int exp = e - 1;  // v = 1.xxx * 2^exp
  if (exp < 1 - bias) {
    // Subnormal: units of 2^(1-bias-manBits). Rounding up to 2^manBits yields the
    // smallest normal number's code, which is exactly right.
    const double q = std::nearbyint(std::ldexp(v, bias - 1 + manBits));
    return sign | static_cast<unsigned>(q);
  }
  double q = std::nearbyint(std::ldexp(v, manBits - exp));  // in [2^m, 2^(m+1)]
  if (q >= std::ldexp(1.0, manBits + 1)) {
    q = std::ldexp(1.0, manBits);
    ++exp;
  }
  const long biased = static_cast<long>(exp) + bias;
  const unsigned code =
      (static_cast<unsigned>(biased) << manBits) | (static_cast<unsigned>(q) & manMask);
  if (biased > static_cast<long>(expMask) || code > maxFinite) return sign | overflow;
  return sign | code;
}

double decodeMinifloat(unsigned code, int expBits, int manBits, bool ieee) {
  const unsigned expMask = (1u << expBits) - 1;
  const unsigned manMask = (1u << manBits) - 1;
  const bool negative = (code >> (expBits + manBits)) & 1u;
  const unsigned e = (code >> manBits) & expMask;
  const unsigned m = code & manMask;
  const int bias = (1 << (expBits - 1)) - 1;
  double v;
  if (ieee && e == expMask) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!ieee && e == expMask && m == manMask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - manBits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << manBits)), static_cast<int>(e) - bias - manBits);
  }
  return negative ? -v : v;
}

void storeValue(void* buf, size_t idx, ncclDataType_t type, double v) {
  switch (type) {
    case ncclInt8:
      put<int8_t>(buf, idx, static_cast<int8_t>(std::llround(v)));
      break;
    case ncclUint8:
      put<uint8_t>(buf, idx, static_cast<uint8_t>(std::llround(v)));
      break;
    case ncclInt32:
      put<int32_t>(buf, idx, static_cast<int32_t>(std::llround(v)));
      break;
    case ncclUint32:
      put<uint32_t>(buf, idx, static_cast<uint32_t>(std::llround(v)));
      break;
    case ncclInt64:
      put<int64_t>(buf, idx, static_cast<int64_t>(std::llround(v)));
      break;
    case ncclUint64:
      put<uint64_t>(buf, idx, static_cast<uint64_t>(std::llround(v)));
      break;
    case ncclFloat16:
      put<uint16_t>(buf, idx, static_cast<uint16_t>(encodeMinifloat(v, 5, 10, true)));
      break;
    case ncclFloat32:
      put<float>(buf, idx, static_cast<float>(v));
      break;
    case ncclFloat64:
      put<double>(buf, idx, v);
      break;
    case ncclBfloat16:
      put<uint16_t>(buf, idx, static_cast<uint16_t>(encodeMinifloat(v, 8, 7, true)));
      break;
    case ncclFloat8e4m3:
      put<uint8_t>(buf, idx, static_cast<uint8_t>(encodeMinifloat(v, 4, 3, false)));
      break;
    case ncclFloat8e5m2:
      put<uint8_t>(buf, idx, static_cast<uint8_t>(encodeMinifloat(v, 5, 2, true)));
      break;
    default:
      break;
  }
}

double loadValue(const void* buf, size_t idx, ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return get<int8_t>(buf, idx);
    case ncclUint8:
      return get<uint8_t>(buf, idx);
    case ncclInt32:
      return get<int32_t>(buf, idx);
    case ncclUint32:
      return get<uint32_t>(buf, idx);
    case ncclInt64:
      return static_cast<double>(get<int64_t>(buf, idx));
    case ncclUint64:
      return static_cast<double>(get<uint64_t>(buf, idx));
    case ncclFloat16:
      return decodeMinifloat(get<uint16_t>(buf, idx), 5, 10, true);
    case ncclFloat32:
      return get<float>(buf, idx);
    case ncclFloat64:
      return get<double>(buf, idx);
    case ncclBfloat16:
      return decodeMinifloat(get<uint16_t>(buf, idx), 8, 7, true);
    case ncclFloat8e4m3:
      return decodeMinifloat(get<uint8_t>(buf, idx), 4, 3, false);
    case ncclFloat8e5m2:
      return decodeMinifloat(get<uint8_t>(buf, idx), 5, 2, true);
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

void corruptValue(void* buf, size_t idx, ncclDataType_t type) {
  if (isFloatType(type)) {
    storeValue(buf, idx, type, std::numeric_limits<double>::quiet_NaN());
  } else {
    *at<unsigned char>(buf, idx * typeSize(type)) ^= 0x5a;
  }
}

}  // namespace braid_perf
