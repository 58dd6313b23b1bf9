// NcclTpGroup: the TpGroup (training/nn/tp_group.h) of a tensor-parallel group, over an
// NCCL communicator through the public API only. Every call is blocking: it is issued on
// the null stream with host buffers, which Braid completes before returning (a CUDA
// build would synchronise the stream here). Errors throw std::runtime_error with
// ncclGetErrorString and ncclGetLastError.
#pragma once
#include <cstddef>

#include "nccl.h"
#include "training/nn/tp_group.h"

namespace braid {
namespace train {

/// TpGroup over an ncclComm_t (float: ncclFloat32, double: ncclFloat64).
template <class T>
class NcclTpGroup : public TpGroup<T> {
 public:
  /// Wraps `comm` (not owned: the caller destroys it after this object). Reads rank and
  /// size from the communicator; throws std::runtime_error when they cannot be read.
  explicit NcclTpGroup(ncclComm_t comm);
  /// This rank in the TP group (ncclCommUserRank).
  int rank() const override { return rank_; }
  /// The TP group size (ncclCommCount).
  int size() const override { return size_; }
  /// In place sum over the group (ncclAllReduce, ncclSum).
  void allReduceSum(T* buf, size_t n) override;
  /// In place element-wise max over the group (ncclAllReduce, ncclMax).
  void allReduceMax(T* buf, size_t n) override;
  /// out[r*n, (r+1)*n) = rank r's in[0, n) (ncclAllGather).
  void allGather(const T* in, T* out, size_t n) override;
  /// The wrapped communicator.
  ncclComm_t comm() const { return comm_; }

 private:
  void check(ncclResult_t r, const char* what) const;
  ncclComm_t comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace train
}  // namespace braid
