// AdamW with bias correction and decoupled weight decay; gradient-norm helpers.
#include "training/optim/adamw.h"

#include <cmath>
#include <stdexcept>

namespace braid {
namespace train {

template <class T>
AdamW<T>::AdamW(AdamWConfig config, int64_t stateSize)
    : cfg_(config), m_(size_t(stateSize), T(0)), v_(size_t(stateSize), T(0)) {
  if (stateSize < 0) throw std::invalid_argument("AdamW: negative stateSize");
}

template <class T>
void AdamW<T>::beginStep() {
  ++t_;
}

template <class T>
void AdamW<T>::update(int64_t stateOffset, T* w, const T* g, int64_t n, bool decay,
                      T gradScale) {
  if (t_ < 1) throw std::logic_error("AdamW::update before beginStep");
  if (stateOffset < 0 || n < 0 || stateOffset + n > int64_t(m_.size()))
    throw std::out_of_range("AdamW::update: range [" + std::to_string(stateOffset) + ", " +
                            std::to_string(stateOffset + n) + ") outside state of " +
                            std::to_string(m_.size()));
  const double b1 = cfg_.beta1, b2 = cfg_.beta2;
  const double c1 = 1.0 - std::pow(b1, double(t_));
  const double c2 = 1.0 - std::pow(b2, double(t_));
  const double lr = cfg_.lr, eps = cfg_.eps, wd = decay ? cfg_.weightDecay : 0.0;
  T* m = m_.data() + stateOffset;
  T* v = v_.data() + stateOffset;
  for (int64_t i = 0; i < n; ++i) {
    const double gi = double(g[i]) * double(gradScale);
    const double mi = b1 * double(m[i]) + (1.0 - b1) * gi;
    const double vi = b2 * double(v[i]) + (1.0 - b2) * gi * gi;
    m[i] = T(mi);
    v[i] = T(vi);
    const double mhat = mi / c1, vhat = vi / c2;
    const double wi = double(w[i]);
    w[i] = T(wi - lr * (mhat / (std::sqrt(vhat) + eps) + wd * wi));
  }
}

template <class T>
T AdamW<T>::clipScale(double globalNorm) const {
  if (cfg_.clipNorm <= 0) return T(1);
  const double s = cfg_.clipNorm / (globalNorm + 1e-6);
  return T(s < 1.0 ? s : 1.0);  // also 1 for a NaN norm: the caller sees the norm itself
}

template <class T>
double sumSquares(const T* g, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(g[i]) * double(g[i]);
  return s;
}

template class AdamW<float>;
template class AdamW<double>;
template double sumSquares<float>(const float*, int64_t);
template double sumSquares<double>(const double*, int64_t);

}  // namespace train
}  // namespace braid
