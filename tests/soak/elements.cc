#include "tests/soak/elements.h"

#include "tests/multirank/data.h"

namespace soak {

size_t typeSize(ncclDataType_t t) { return mr::typeSize(t); }

const char* typeName(ncclDataType_t t) {
  static const char* const names[kNumTypes] = {"int8", "uint8", "int32", "uint32",
                                               "int64", "uint64", "float16", "float32",
                                               "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return int(t) >= 0 && int(t) < kNumTypes ? names[int(t)] : "?";
}

bool isFloatType(ncclDataType_t t) { return mr::isFloat(t); }

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

// The element codings (every type, minifloats included) are the multi-rank suite's.
void putElement(void* buf, ncclDataType_t t, size_t i, double v) { mr::store(t, buf, i, v); }

double getElement(const void* buf, ncclDataType_t t, size_t i) { return mr::load(t, buf, i); }

}  // namespace soak
