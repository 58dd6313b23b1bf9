// Element access for every NCCL data type, by double value: the soak writes small
// integers (exact in every type, fp8 included) and reads results back for checking.
#pragma once
#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace soak {

constexpr int kNumTypes = 12;

/// Bytes of one element of `t`.
size_t typeSize(ncclDataType_t t);
const char* typeName(ncclDataType_t t);
bool isFloatType(ncclDataType_t t);

/// Largest integer m such that every integer 0..m is exact in `t` (capped at 1e6).
double exactRange(ncclDataType_t t);

/// Stores integer-valued `v` (0 <= v <= exactRange(t)) as element i of buf.
void putElement(void* buf, ncclDataType_t t, size_t i, double v);
/// Reads element i of buf (any finite value of the type; NaN for NaN encodings).
double getElement(const void* buf, ncclDataType_t t, size_t i);

}  // namespace soak
