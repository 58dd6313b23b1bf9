// Element values for the algorithm tests, independent of the library's reducer: type
// facts, encode/decode of every NCCL type through double, input generators whose
// reductions are exact in every type, and the reference reduction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl.h"

namespace braid {
namespace algotest {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;
  double exactMax;  ///< every integer in [-exactMax, exactMax] is representable
  int mantBits;     ///< floats: stored mantissa bits (relative ulp = 2^-mantBits)
};

constexpr int kNumTypes = 12;
const TypeInfo& typeInfo(ncclDataType_t t);
const TypeInfo& typeAt(int i);  ///< 0 .. kNumTypes-1

/// The reductions tested: the five built-ins and PreMulSum (per-rank scalar).
enum class Op { kSum, kProd, kMax, kMin, kAvg, kPreMulSum, kNone };
constexpr int kNumOps = 6;
Op opAt(int i);
const char* opName(Op op);

/// Stores v (which must be representable, or is rounded to nearest even) at p.
void encode(const TypeInfo& t, double v, void* p);
double decode(const TypeInfo& t, const void* p);

/// Rank r's input element i for a collective of n ranks reducing with `op` (kNone: a
/// data-movement collective, where values only need to tell elements apart). For the
/// reducing ops, every partial result of any order is an exact integer of the type.
double inputValue(const TypeInfo& t, Op op, int n, int r, uint64_t i);
/// Rank r's PreMulSum scalar (exact in every type).
double preMulScalar(const TypeInfo& t, int r);

/// Accumulates a reference reduction in double (exact for inputValue's values).
class RefReduce {
 public:
  RefReduce(const TypeInfo& t, Op op, int n) : t_(t), op_(op), n_(n) {}
  void add(int rank, double v);
  /// The final value (Avg divided as the type does: integers truncate toward zero).
  double result() const;
  /// Tolerance when comparing the result (0: exact).
  double tolerance() const;

 private:
  const TypeInfo& t_;
  Op op_;
  int n_;
  double acc_ = 0;
  bool first_ = true;
};

}  // namespace algotest
}  // namespace braid
