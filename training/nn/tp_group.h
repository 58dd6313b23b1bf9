// TpGroup: the collectives tensor-parallel modules need, as an interface, so that the
// modules (training/nn/) do not depend on how ranks talk. training/dist/ implements it
// over an ncclComm (ncclFloat32 / ncclFloat64 by T); a null TpGroup* means "no tensor
// parallelism" and every module then computes the whole layer.
// All calls are blocking and collective over the TP group, in the same order on every
// TP rank.
#pragma once
#include <cstddef>

namespace braid {
namespace train {

template <class T>
class TpGroup {
 public:
  virtual ~TpGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// In place: buf = sum over TP ranks of buf.
  virtual void allReduceSum(T* buf, size_t n) = 0;
  /// In place: buf = element-wise max over TP ranks.
  virtual void allReduceMax(T* buf, size_t n) = 0;
  /// out[r*n .. (r+1)*n) = rank r's in[0..n).
  virtual void allGather(const T* in, T* out, size_t n) = 0;
};

}  // namespace train
}  // namespace braid
