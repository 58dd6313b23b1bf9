// The two conjugate operators of Megatron tensor parallelism, over a TpGroup (null: no
// tensor parallelism, both are no-ops).
//   f: identity in forward, all-reduce (sum) in backward — at the INPUT of a
//      column-parallel layer: each rank's partial input gradient is summed.
//   g: all-reduce (sum) in forward, identity in backward — at the OUTPUT of a
//      row-parallel layer: each rank's partial product is summed.
#pragma once
#include <cstdint>

#include "training/nn/tp_group.h"

namespace braid {
namespace train {

/// f's backward: dx = sum over TP ranks of dx (in place, n elements).
template <class T>
inline void tpCopyBackward(TpGroup<T>* tp, T* dx, int64_t n) {
  if (tp && tp->size() > 1) tp->allReduceSum(dx, size_t(n));
}

/// g's forward: y = sum over TP ranks of y (in place, n elements).
template <class T>
inline void tpReduceForward(TpGroup<T>* tp, T* y, int64_t n) {
  if (tp && tp->size() > 1) tp->allReduceSum(y, size_t(n));
}

/// Rank and size of a possibly-null TpGroup.
template <class T>
inline int tpRank(const TpGroup<T>* tp) {
  return tp ? tp->rank() : 0;
}
template <class T>
inline int tpSize(const TpGroup<T>* tp) {
  return tp ? tp->size() : 1;
}

}  // namespace train
}  // namespace braid
