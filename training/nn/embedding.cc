// Token (vocab-parallel) and position embeddings.
#include "training/nn/embedding.h"

#include <algorithm>
#include <stdexcept>

#include "training/nn/tp_ops.h"
#include "training/tensor/ops.h"

namespace braid {
namespace train {

template <class T>
Embedding<T>::Embedding(ParamStore<T>& store, const std::string& name, int64_t vocab,
                        int64_t dim, bool vocabParallel, TpGroup<T>* tp, int layer)
    : tp_(vocabParallel ? tp : nullptr), vocab_(vocab), dim_(dim), local_(vocab) {
  const int p = tpSize(tp_);
  TpSplit split;
  if (p > 1) {
    if (vocab % p != 0)
      throw std::invalid_argument(name + ": vocab " + std::to_string(vocab) +
                                  " not divisible by TP size " + std::to_string(p));
    local_ = vocab / p;
    start_ = local_ * tpRank(tp_);
    split = TpSplit{0, tpRank(tp_), p};
  }
  w_ = store.add(name + ".weight", Shape{vocab, dim}, split, Init::kNormal002, true, layer);
}

template <class T>
void Embedding<T>::forward(const int32_t* tokens, int64_t n, T* y) const {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t tok = tokens[i];
    if (tok < 0 || tok >= vocab_)
      throw std::out_of_range("Embedding: token " + std::to_string(tok) + " outside vocab " +
                              std::to_string(vocab_));
    T* row = y + i * dim_;
    const int64_t local = tok - start_;
    if (local >= 0 && local < local_)
      std::copy(w_->w + local * dim_, w_->w + (local + 1) * dim_, row);
    else
      std::fill(row, row + dim_, T(0));
  }
  tpReduceForward(tp_, y, n * dim_);
}

template <class T>
void Embedding<T>::backward(const int32_t* tokens, int64_t n, const T* dy) const {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t local = int64_t(tokens[i]) - start_;
    if (local >= 0 && local < local_) addInPlace<T>(w_->g + local * dim_, dy + i * dim_, dim_);
  }
}

template <class T>
PositionEmbedding<T>::PositionEmbedding(ParamStore<T>& store, const std::string& name,
                                        int64_t context, int64_t dim, int layer)
    : context_(context), dim_(dim) {
  w_ = store.add(name + ".weight", Shape{context, dim}, TpSplit{}, Init::kNormal002, true,
                 layer);
}

template <class T>
void PositionEmbedding<T>::forwardAdd(T* y, int64_t B, int64_t T_) const {
  if (T_ > context_)
    throw std::invalid_argument("PositionEmbedding: T " + std::to_string(T_) +
                                " > context " + std::to_string(context_));
  for (int64_t b = 0; b < B; ++b) addInPlace<T>(y + b * T_ * dim_, w_->w, T_ * dim_);
}

template <class T>
void PositionEmbedding<T>::backward(const T* dy, int64_t B, int64_t T_) const {
  for (int64_t b = 0; b < B; ++b) addInPlace<T>(w_->g, dy + b * T_ * dim_, T_ * dim_);
}

template class Embedding<float>;
template class Embedding<double>;
template class PositionEmbedding<float>;
template class PositionEmbedding<double>;

}  // namespace train
}  // namespace braid
