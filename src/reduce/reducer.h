// Reducer: the element-wise kernels the host executor applies (all 12 NCCL types,
// sum/prod/max/min/avg/PreMulSum). One object per op call; cheap to copy.
//
//   reduce(dst, in, local, n, flags): dst[i] = post( in[i] OP pre(local[i]) )
//   copy(dst, src, n, flags):         dst[i] = post( pre(src[i]) )
// pre applies the PreMulSum scalar (only with kPreOp; identity for other ops);
// post applies Avg's division by nranks (only with kPostOp; identity otherwise).
// Narrow floats (fp16, bf16, fp8 e4m3/e5m2) are computed in float and rounded back
// to nearest-even on every store, as NCCL does.
#pragma once
#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace braid {

class Reducer {
 public:
  enum class Kind : uint8_t { kSum, kProd, kMax, kMin };

  Reducer() = default;
  /// op: a built-in ncclRedOp_t (ncclSum..ncclAvg); for PreMulSum use withScalar().
  Reducer(ncclDataType_t type, ncclRedOp_t op, int nranks);
  /// A PreMulSum reducer: sum, with each rank's own input first multiplied by
  /// `scalar` (pointing at one element of `type`, read now).
  static Reducer preMulSum(ncclDataType_t type, const void* scalar, int nranks);

  size_t typeSize() const { return typeSize_; }
  ncclDataType_t type() const { return type_; }
  Kind kind() const { return kind_; }
  bool hasPre() const { return hasPre_; }
  bool hasPost() const { return hasPost_; }

  /// flags: braid::kPreOp / braid::kPostOp (algorithms/plan.h). n in elements.
  /// dst may alias in or local exactly (not partially).
  void reduce(void* dst, const void* in, const void* local, size_t n, uint8_t flags) const;
  /// As reduce, also storing the result to dst2 (fused forward of a final value).
  void reduce2(void* dst, void* dst2, const void* in, const void* local, size_t n,
               uint8_t flags) const;
  void copy(void* dst, const void* src, size_t n, uint8_t flags) const;

 private:
  ncclDataType_t type_ = ncclFloat32;
  Kind kind_ = Kind::kSum;
  size_t typeSize_ = 4;
  bool hasPre_ = false;
  bool hasPost_ = false;
  int nranks_ = 1;
  alignas(8) unsigned char scalar_[8] = {};  ///< PreMulSum scalar, as one element of type_
};

/// Bytes per element of a valid NCCL datatype, 0 for an invalid one.
size_t dataTypeSize(ncclDataType_t t);
const char* dataTypeName(ncclDataType_t t);
/// "sum", "prod", "max", "min", "avg", "premulsum"
const char* redOpName(ncclRedOp_t op);

}  // namespace braid
