// Causal self-attention (heads split across TP ranks).
#include "training/nn/attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "training/nn/tp_ops.h"
#include "training/tensor/ops.h"

namespace braid {
namespace train {
namespace {

/// Validates the head layout before any parameter is registered.
int64_t checkedHeadSize(const std::string& prefix, int64_t width, int64_t heads, int tpSize) {
  if (heads <= 0 || width % heads != 0)
    throw std::invalid_argument(prefix + ": width " + std::to_string(width) +
                                " must be divisible by heads " + std::to_string(heads));
  if (heads % tpSize != 0)
    throw std::invalid_argument(prefix + ": heads " + std::to_string(heads) +
                                " must be divisible by the TP size " + std::to_string(tpSize));
  return width / heads;
}

LinearOptions qkvOptions() {
  LinearOptions o;
  o.kind = LinearKind::kColumnParallel;
  o.groups = 3;
  return o;
}
LinearOptions projOptions() {
  LinearOptions o;
  o.kind = LinearKind::kRowParallel;
  o.init = Init::kNormalProj;
  return o;
}

}  // namespace

template <class T>
void attentionCoreForward(const T* qkv, T* y, T* att, int64_t B, int64_t T_, int64_t H,
                          int64_t hs) {
  const int64_t C = H * hs, ld = 3 * C;
  const T scale = T(1.0 / std::sqrt(double(hs)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const T* q = qkv + b * T_ * ld + h * hs;
      const T* k = q + C;
      const T* v = q + 2 * C;
      T* a = att + (b * H + h) * T_ * T_;
      gemm<T>(false, true, T_, T_, hs, scale, q, ld, k, ld, T(0), a, T_);
      for (int64_t i = 0; i < T_; ++i) {  // causal softmax of row i over j <= i
        T* row = a + i * T_;
        T mx = row[0];
        for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const T inv = T(1) / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < T_; ++j) row[j] = T(0);
      }
      gemm<T>(false, false, T_, hs, T_, T(1), a, T_, v, ld, T(0), y + b * T_ * C + h * hs, C);
    }
}

template <class T>
void attentionCoreBackward(const T* qkv, const T* att, const T* dy, T* dqkv, int64_t B,
                           int64_t T_, int64_t H, int64_t hs) {
  const int64_t C = H * hs, ld = 3 * C;
  const T scale = T(1.0 / std::sqrt(double(hs)));
  std::vector<T> ds(size_t(T_ * T_));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const T* q = qkv + b * T_ * ld + h * hs;
      const T* k = q + C;
      const T* v = q + 2 * C;
      T* dq = dqkv + b * T_ * ld + h * hs;
      T* dk = dq + C;
      T* dv = dq + 2 * C;
      const T* a = att + (b * H + h) * T_ * T_;
      const T* dyh = dy + b * T_ * C + h * hs;
      // datt = dy v^T ; dv = att^T dy
      gemm<T>(false, true, T_, T_, hs, T(1), dyh, C, v, ld, T(0), ds.data(), T_);
      gemm<T>(true, false, T_, hs, T_, T(1), a, T_, dyh, C, T(0), dv, ld);
      // softmax backward per row: ds = att * (datt - sum_j att * datt)
      for (int64_t i = 0; i < T_; ++i) {
        T* d = ds.data() + i * T_;
        const T* p = a + i * T_;
        T dot = 0;
        for (int64_t j = 0; j <= i; ++j) dot += p[j] * d[j];
        for (int64_t j = 0; j <= i; ++j) d[j] = p[j] * (d[j] - dot);
        for (int64_t j = i + 1; j < T_; ++j) d[j] = T(0);
      }
      // scores = scale q k^T: dq = scale ds k ; dk = scale ds^T q
      gemm<T>(false, false, T_, hs, T_, scale, ds.data(), T_, k, ld, T(0), dq, ld);
      gemm<T>(true, false, T_, hs, T_, scale, ds.data(), T_, q, ld, T(0), dk, ld);
    }
}

template <class T>
CausalSelfAttention<T>::CausalSelfAttention(ParamStore<T>& store, const std::string& prefix,
                                            int64_t width, int64_t heads, TpGroup<T>* tp,
                                            int layer)
    : width_(width),
      headSize_(checkedHeadSize(prefix, width, heads, tpSize(tp))),
      localHeads_(heads / tpSize(tp)),
      qkv_(store, prefix + ".qkv", width, 3 * width, qkvOptions(), tp, layer),
      proj_(store, prefix + ".proj", width, width, projOptions(), tp, layer) {}

template <class T>
std::vector<Param<T>*> CausalSelfAttention<T>::params() const {
  std::vector<Param<T>*> v = qkv_.params();
  for (Param<T>* p : proj_.params()) v.push_back(p);
  return v;
}

template <class T>
void CausalSelfAttention<T>::forward(const T* x, T* out, int64_t B, int64_t T_,
                                     Cache& cache) const {
  const int64_t n = B * T_, Cl = localHeads_ * headSize_;
  cache.qkv.reset(Shape{B, T_, 3 * Cl});
  cache.att.reset(Shape{B, localHeads_, T_, T_});
  cache.y.reset(Shape{B, T_, Cl});
  qkv_.forward(x, cache.qkv.data(), n);
  attentionCoreForward<T>(cache.qkv.data(), cache.y.data(), cache.att.data(), B, T_,
                          localHeads_, headSize_);
  proj_.forward(cache.y.data(), out, n);
}

template <class T>
void CausalSelfAttention<T>::backward(const T* x, const Cache& cache, const T* dout, T* dx,
                                      int64_t B, int64_t T_) const {
  const int64_t n = B * T_, Cl = localHeads_ * headSize_;
  std::vector<T> dy(size_t(n * Cl)), dqkv(size_t(n * 3 * Cl));
  proj_.backward(cache.y.data(), dout, dy.data(), n);
  attentionCoreBackward<T>(cache.qkv.data(), cache.att.data(), dy.data(), dqkv.data(), B, T_,
                           localHeads_, headSize_);
  qkv_.backward(x, dqkv.data(), dx, n);
}

template void attentionCoreForward<float>(const float*, float*, float*, int64_t, int64_t,
                                          int64_t, int64_t);
template void attentionCoreForward<double>(const double*, double*, double*, int64_t, int64_t,
                                           int64_t, int64_t);
template void attentionCoreBackward<float>(const float*, const float*, const float*, float*,
                                           int64_t, int64_t, int64_t, int64_t);
template void attentionCoreBackward<double>(const double*, const double*, const double*,
                                            double*, int64_t, int64_t, int64_t, int64_t);
template class CausalSelfAttention<float>;
template class CausalSelfAttention<double>;

}  // namespace train
}  // namespace braid
