// Moving between a parameter's FULL tensor and one TP rank's part of it (the slice
// [rank*part, (rank+1)*part) along TpSplit::dim, part = fullShape[dim] / size). Used by
// ParamStore's initialisation and by whoever gathers or scatters TP shards
// (checkpoints, tests).
#pragma once
#include <cstdint>

#include "training/nn/param.h"

namespace braid {
namespace train {

/// Copies rank split.rank's part of `full` (fullShape) into `part` (numel/size
/// elements). A replicated split (dim < 0) copies everything.
template <class T, class U>
void tpSliceOf(const Shape& fullShape, const TpSplit& split, const U* full, T* part) {
  if (split.dim < 0) {
    const int64_t n = numelOf(fullShape);
    for (int64_t i = 0; i < n; ++i) part[i] = T(full[i]);
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < split.dim; ++d) outer *= fullShape[size_t(d)];
  for (size_t d = size_t(split.dim) + 1; d < fullShape.size(); ++d) inner *= fullShape[d];
  const int64_t dimFull = fullShape[size_t(split.dim)], chunk = dimFull / split.size;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < chunk; ++j) {
      const U* src = full + (o * dimFull + split.rank * chunk + j) * inner;
      T* dst = part + (o * chunk + j) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = T(src[i]);
    }
}

/// The inverse: writes `part` (rank split.rank's) into its place in `full`.
template <class T, class U>
void tpScatterInto(const Shape& fullShape, const TpSplit& split, const U* part, T* full) {
  if (split.dim < 0) {
    const int64_t n = numelOf(fullShape);
    for (int64_t i = 0; i < n; ++i) full[i] = T(part[i]);
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < split.dim; ++d) outer *= fullShape[size_t(d)];
  for (size_t d = size_t(split.dim) + 1; d < fullShape.size(); ++d) inner *= fullShape[d];
  const int64_t dimFull = fullShape[size_t(split.dim)], chunk = dimFull / split.size;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < chunk; ++j) {
      const U* src = part + (o * chunk + j) * inner;
      T* dst = full + (o * dimFull + split.rank * chunk + j) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = T(src[i]);
    }
}

}  // namespace train
}  // namespace braid
