// Cross-entropy, plain and vocab-parallel.
#include "training/nn/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "training/nn/tp_ops.h"

namespace braid {
namespace train {

template <class T>
T crossEntropyForward(const T* logits, const int32_t* targets, int64_t n, int64_t vocabLocal,
                      int64_t vocabStart, TpGroup<T>* tp, T* probs, T* losses) {
  const int64_t vocab = vocabLocal * tpSize(tp);
  const size_t rows = static_cast<size_t>(n);
  std::vector<T> mx(rows), sum(rows), tgt(rows);
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0 || targets[i] >= vocab)
      throw std::out_of_range("crossEntropy: target " + std::to_string(targets[i]) +
                              " outside vocab " + std::to_string(vocab));
    const T* row = logits + i * vocabLocal;
    T m = row[0];
    for (int64_t j = 1; j < vocabLocal; ++j) m = std::max(m, row[j]);
    mx[size_t(i)] = m;
  }
  if (tp && tp->size() > 1) tp->allReduceMax(mx.data(), size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * vocabLocal;
    T* p = probs + i * vocabLocal;
    const T m = mx[size_t(i)];
    const int64_t local = int64_t(targets[i]) - vocabStart;
    tgt[size_t(i)] = (local >= 0 && local < vocabLocal) ? row[local] - m : T(0);
    T s = 0;
    for (int64_t j = 0; j < vocabLocal; ++j) {
      p[j] = std::exp(row[j] - m);
      s += p[j];
    }
    sum[size_t(i)] = s;
  }
  if (tp && tp->size() > 1) {
    tp->allReduceSum(sum.data(), size_t(n));
    tp->allReduceSum(tgt.data(), size_t(n));
  }
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T s = sum[size_t(i)];
    losses[i] = std::log(s) - tgt[size_t(i)];
    total += double(losses[i]);
    const T inv = T(1) / s;
    T* p = probs + i * vocabLocal;
    for (int64_t j = 0; j < vocabLocal; ++j) p[j] *= inv;
  }
  return n > 0 ? T(total / double(n)) : T(0);
}

template <class T>
void crossEntropyBackward(const T* probs, const int32_t* targets, int64_t n, int64_t vocabLocal,
                          int64_t vocabStart, T rowWeight, T* dlogits) {
  for (int64_t i = 0; i < n; ++i) {
    const T* p = probs + i * vocabLocal;
    T* d = dlogits + i * vocabLocal;
    for (int64_t j = 0; j < vocabLocal; ++j) d[j] = rowWeight * p[j];
    const int64_t local = int64_t(targets[i]) - vocabStart;
    if (local >= 0 && local < vocabLocal) d[local] -= rowWeight;
  }
}

template float crossEntropyForward<float>(const float*, const int32_t*, int64_t, int64_t,
                                          int64_t, TpGroup<float>*, float*, float*);
template double crossEntropyForward<double>(const double*, const int32_t*, int64_t, int64_t,
                                            int64_t, TpGroup<double>*, double*, double*);
template void crossEntropyBackward<float>(const float*, const int32_t*, int64_t, int64_t,
                                          int64_t, float, float*);
template void crossEntropyBackward<double>(const double*, const int32_t*, int64_t, int64_t,
                                           int64_t, double, double*);

}  // namespace train
}  // namespace braid
