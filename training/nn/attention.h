// Causal multi-head self-attention: qkv = x Wqkv^T + b (fused, column-parallel by
// heads), per head softmax(q k^T / sqrt(hs) + causal mask) v, then the output
// projection (row-parallel, all-reduced, bias once). Under tensor parallelism rank r
// runs heads [r*H/p, (r+1)*H/p). The core (attentionCoreForward/Backward) works on the
// rank's local heads only and needs no communication.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "training/nn/linear.h"
#include "training/nn/param.h"
#include "training/nn/tp_group.h"
#include "training/tensor/tensor.h"

namespace braid {
namespace train {

/// The attention core for H heads of size hs over B sequences of length T.
/// qkv: [B, T, 3, H*hs] (q | k | v per token, head h at h*hs); y: [B, T, H*hs]
/// (overwritten); att: [B, H, T, T] the softmax probabilities (zero above the diagonal).
template <class T>
void attentionCoreForward(const T* qkv, T* y, T* att, int64_t B, int64_t T_, int64_t H,
                          int64_t hs);

/// Backward of the core: dqkv [B, T, 3, H*hs] is overwritten from dy [B, T, H*hs].
template <class T>
void attentionCoreBackward(const T* qkv, const T* att, const T* dy, T* dqkv, int64_t B,
                           int64_t T_, int64_t H, int64_t hs);

/// The attention sub-layer of a block: fused QKV (column-parallel), core, projection
/// (row-parallel).
template <class T>
class CausalSelfAttention {
 public:
  /// Activations of one forward, needed by backward.
  struct Cache {
    Tensor<T> qkv;  ///< [B, T, 3 * localWidth]
    Tensor<T> att;  ///< [B, localHeads, T, T]
    Tensor<T> y;    ///< [B, T, localWidth], the heads' output before the projection
  };
  /// Registers `prefix`.qkv.{weight,bias} (full [3, C, C] / [3, C], split dim 1) and
  /// `prefix`.proj.{weight,bias} (full [C, C] split dim 1 / [C] replicated; weight init
  /// kNormalProj). Throws std::invalid_argument naming the field when C % heads or
  /// heads % tpSize is not 0.
  CausalSelfAttention(ParamStore<T>& store, const std::string& prefix, int64_t width,
                      int64_t heads, TpGroup<T>* tp, int layer);
  /// out[B, T, C] (full, replicated over TP) from x[B, T, C].
  void forward(const T* x, T* out, int64_t B, int64_t T_, Cache& cache) const;
  /// Writes dx[B, T, C] (all-reduced over TP) from dout[B, T, C]; accumulates grads.
  void backward(const T* x, const Cache& cache, const T* dout, T* dx, int64_t B,
                int64_t T_) const;
  /// qkv weight and bias, then proj weight and bias.
  std::vector<Param<T>*> params() const;
  /// Heads this rank runs (heads / TP size).
  int64_t localHeads() const { return localHeads_; }

 private:
  int64_t width_, headSize_, localHeads_;
  Linear<T> qkv_, proj_;
};

}  // namespace train
}  // namespace braid
