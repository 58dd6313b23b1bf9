// AdamW (decoupled weight decay) over flat ranges of parameters, and gradient clipping
// by global norm. The optimizer does not know about sharding: whoever owns a range of
// parameters (the whole model, or a ZeRO shard) calls update() for it with a stable
// `stateOffset` that locates the range's moments in the optimizer's state.
#pragma once
#include <cstdint>
#include <vector>

namespace braid {
namespace train {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weightDecay = 0.1;  ///< applied to ranges updated with decay = true
  double clipNorm = 1.0;     ///< global gradient-norm clip; <= 0 disables
};

template <class T>
class AdamW {
 public:
  /// stateSize: number of parameter elements this rank updates (its moments).
  AdamW(AdamWConfig config, int64_t stateSize);
  /// Starts an optimizer step (increments the bias-correction step count).
  void beginStep();
  /// w -= lr * (mhat / (sqrt(vhat) + eps) + wd * w) for n elements, with g first
  /// multiplied by gradScale (the clipping factor). The range's moments live at
  /// [stateOffset, stateOffset + n) of this optimizer's state.
  void update(int64_t stateOffset, T* w, const T* g, int64_t n, bool decay, T gradScale);
  /// min(1, clipNorm / (norm + 1e-6)) for a global gradient norm; 1 when disabled.
  T clipScale(double globalNorm) const;
  int64_t step() const { return t_; }
  const AdamWConfig& config() const { return cfg_; }
  /// The moments, for checkpoints: m then v, each stateSize long.
  std::vector<T>& m() { return m_; }
  std::vector<T>& v() { return v_; }
  const std::vector<T>& m() const { return m_; }
  const std::vector<T>& v() const { return v_; }
  void setStep(int64_t t) { t_ = t; }

 private:
  AdamWConfig cfg_;
  int64_t t_ = 0;
  std::vector<T> m_, v_;
};

/// Sum of squares of n elements, accumulated in double.
template <class T>
double sumSquares(const T* g, int64_t n);

}  // namespace train
}  // namespace braid
