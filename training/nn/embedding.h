// Embedding lookups: the token embedding (optionally vocab-parallel) and the learned
// position embedding (always replicated). Stateless over their Params.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "training/nn/param.h"
#include "training/nn/tp_group.h"

namespace braid {
namespace train {

/// Token embedding, table of full shape [vocab, dim]. Vocab-parallel (with a TpGroup of
/// size p): rank r holds rows [r*vocab/p, (r+1)*vocab/p); tokens outside that range
/// give zero rows, and the partial outputs are all-reduced (sum) over the group.
template <class T>
class Embedding {
 public:
  /// Registers `name`.weight (N(0, 0.02^2), decayed). Throws std::invalid_argument when
  /// vocab is not divisible by the TP size.
  Embedding(ParamStore<T>& store, const std::string& name, int64_t vocab, int64_t dim,
            bool vocabParallel, TpGroup<T>* tp, int layer);
  /// y[n, dim] = table[tokens[i]] (overwritten). Throws std::out_of_range for a token
  /// outside [0, vocab).
  void forward(const int32_t* tokens, int64_t n, T* y) const;
  /// Accumulates dy[n, dim] into the gradient rows of this rank's tokens.
  void backward(const int32_t* tokens, int64_t n, const T* dy) const;
  /// First vocabulary id of this rank's rows (0 without TP).
  int64_t vocabStart() const { return start_; }
  /// Number of rows this rank holds.
  int64_t vocabLocal() const { return local_; }
  /// The table Param (this rank's rows).
  Param<T>* weight() const { return w_; }

 private:
  TpGroup<T>* tp_;
  int64_t vocab_, dim_, start_ = 0, local_;
  Param<T>* w_;
};

/// Learned position embedding of full shape [context, dim], replicated on TP ranks.
template <class T>
class PositionEmbedding {
 public:
  /// Registers `name`.weight (N(0, 0.02^2), decayed).
  PositionEmbedding(ParamStore<T>& store, const std::string& name, int64_t context,
                    int64_t dim, int layer);
  /// y[b, t, :] += table[t] for B sequences of length T (T <= context, else throws
  /// std::invalid_argument).
  void forwardAdd(T* y, int64_t B, int64_t T_) const;
  /// Accumulates the gradient: table.g[t] += sum over b of dy[b, t, :].
  void backward(const T* dy, int64_t B, int64_t T_) const;
  /// The table Param.
  Param<T>* weight() const { return w_; }

 private:
  int64_t context_, dim_;
  Param<T>* w_;
};

}  // namespace train
}  // namespace braid
