// Data types and reduction operators of the perf suite: names, sizes, and host-side
// encoding/decoding of every ncclDataType_t (including half, bfloat16 and the two fp8
// formats) so that expected results can be computed and compared on the host.
#ifndef BRAID_PERF_DATATYPES_H_
#define BRAID_PERF_DATATYPES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "nccl.h"

namespace braid_perf {

/// The nccl-tests name of a type ("float", "half", "bfloat16", "f8e4m3", ...).
const char* typeName(ncclDataType_t type);
/// Bytes per element of a type.
size_t typeSize(ncclDataType_t type);
/// True for the floating-point types.
bool isFloatType(ncclDataType_t type);
/// Relative precision (unit roundoff * 2) of a floating type; 0 for integers.
double typeEpsilon(ncclDataType_t type);
/// Largest L such that every integer 0..L is exactly representable in the type (capped).
double exactIntegerLimit(ncclDataType_t type);
/// Parse "-d" values: a type name, or "all" for every type. Empty result: bad name.
std::vector<ncclDataType_t> parseTypes(const std::string& text);

/// Reduction operators the suite knows: the built-ins plus premulsum (a created op).
enum class PerfOp { kSum, kProd, kMin, kMax, kAvg, kPreMulSum, kNone };
/// The nccl-tests name of an operator ("sum", ..., "premulsum", "none").
const char* opName(PerfOp op);
/// Parse "-o" values: a name or "all" (every op except none). Empty: bad name.
std::vector<PerfOp> parseOps(const std::string& text);

/// Write value v (already representable, or rounded to nearest even) at element idx.
void storeValue(void* buf, size_t idx, ncclDataType_t type, double v);
/// Read element idx as a double.
double loadValue(const void* buf, size_t idx, ncclDataType_t type);
/// Make element idx certainly wrong (NaN for floats, bits flipped for integers).
void corruptValue(void* buf, size_t idx, ncclDataType_t type);

/// Encode v into a binary float with `expBits` exponent and `manBits` mantissa bits,
/// rounding to nearest even. `ieee` formats have infinities; otherwise (fp8 e4m3) the
/// all-ones code is NaN and overflow saturates to the largest finite value.
unsigned encodeMinifloat(double v, int expBits, int manBits, bool ieee);
/// Decode a code produced by encodeMinifloat (same format parameters).
double decodeMinifloat(unsigned code, int expBits, int manBits, bool ieee);

}  // namespace braid_perf

#endif  // BRAID_PERF_DATATYPES_H_
