// LayerNorm over the last dimension: y = (x - mean) * rstd * weight + bias, with
// rstd = 1 / sqrt(var + eps) (biased variance, eps = 1e-5, as PyTorch). Replicated on
// TP ranks. The caller keeps mean and rstd from forward for backward.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "training/nn/param.h"

namespace braid {
namespace train {

/// LayerNorm with learned weight and bias over the last dimension.
template <class T>
class LayerNorm {
 public:
  /// Registers `name`.weight (ones) and `name`.bias (zeros), both without weight decay.
  LayerNorm(ParamStore<T>& store, const std::string& name, int64_t dim, int layer);
  /// y[n, dim] from x[n, dim]; writes mean[n] and rstd[n].
  void forward(const T* x, T* y, T* mean, T* rstd, int64_t n) const;
  /// Writes dx[n, dim] (overwritten) and accumulates the weight/bias gradients.
  void backward(const T* x, const T* mean, const T* rstd, const T* dy, T* dx, int64_t n) const;
  /// weight then bias.
  std::vector<Param<T>*> params() const { return {w_, b_}; }
  /// The variance epsilon.
  static constexpr double kEps = 1e-5;

 private:
  int64_t dim_;
  Param<T>* w_;
  Param<T>* b_;
};

}  // namespace train
}  // namespace braid
