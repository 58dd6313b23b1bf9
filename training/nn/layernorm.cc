// LayerNorm forward and backward.
#include "training/nn/layernorm.h"

#include <cmath>

namespace braid {
namespace train {

template <class T>
LayerNorm<T>::LayerNorm(ParamStore<T>& store, const std::string& name, int64_t dim, int layer)
    : dim_(dim) {
  w_ = store.add(name + ".weight", Shape{dim}, TpSplit{}, Init::kOnes, false, layer);
  b_ = store.add(name + ".bias", Shape{dim}, TpSplit{}, Init::kZeros, false, layer);
}

template <class T>
void LayerNorm<T>::forward(const T* x, T* y, T* mean, T* rstd, int64_t n) const {
  const T* w = w_->w;
  const T* b = b_->w;
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * dim_;
    double m = 0;
    for (int64_t j = 0; j < dim_; ++j) m += xi[j];
    m /= double(dim_);
    double v = 0;
    for (int64_t j = 0; j < dim_; ++j) v += (xi[j] - m) * (xi[j] - m);
    v /= double(dim_);
    const double r = 1.0 / std::sqrt(v + kEps);
    T* yi = y + i * dim_;
    for (int64_t j = 0; j < dim_; ++j) yi[j] = T((xi[j] - m) * r) * w[j] + b[j];
    mean[i] = T(m);
    rstd[i] = T(r);
  }
}

template <class T>
void LayerNorm<T>::backward(const T* x, const T* mean, const T* rstd, const T* dy, T* dx,
                            int64_t n) const {
  const T* w = w_->w;
  T* dw = w_->g;
  T* db = b_->g;
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * dim_;
    const T* dyi = dy + i * dim_;
    const T m = mean[i], r = rstd[i];
    // dnorm = dy * w; dx = r * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
    double sumD = 0, sumDN = 0;
    for (int64_t j = 0; j < dim_; ++j) {
      const T norm = (xi[j] - m) * r;
      const T dn = dyi[j] * w[j];
      sumD += dn;
      sumDN += dn * norm;
      dw[j] += dyi[j] * norm;
      db[j] += dyi[j];
    }
    const T meanD = T(sumD / double(dim_)), meanDN = T(sumDN / double(dim_));
    T* dxi = dx + i * dim_;
    for (int64_t j = 0; j < dim_; ++j) {
      const T norm = (xi[j] - m) * r;
      dxi[j] = r * (dyi[j] * w[j] - meanD - norm * meanDN);
    }
  }
}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace train
}  // namespace braid
