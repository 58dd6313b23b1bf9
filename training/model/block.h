// BlockLayer: one pre-norm transformer block of the GPT (training/model/gpt.h):
//   x2 = x + attn(ln1(x));  y = x2 + proj(gelu(fc(ln2(x2))))
// with fc column-parallel (hidden 4C split over TP) and proj row-parallel; attention
// heads split over TP. LayerNorms are replicated; residuals are added here.
#pragma once
#include <memory>

#include "training/model/gpt.h"
#include "training/model/layer.h"
#include "training/nn/attention.h"
#include "training/nn/layernorm.h"
#include "training/nn/linear.h"

namespace braid {
namespace train {

template <class T>
class BlockLayer : public Layer<T> {
 public:
  /// Registers "blocks.<index>.*" for transformer block `index` (model layer index+1).
  BlockLayer(const GptConfig& config, int index, ParamStore<T>& store, TpGroup<T>* tp);
  /// y[B, T, C] from x[B, T, C]; the returned Saved holds every activation backward needs.
  std::unique_ptr<Saved> forward(const Micro& micro, const Tensor<T>& x, Tensor<T>& y) override;
  /// dx[B, T, C] from dy[B, T, C]; accumulates the block's parameter gradients.
  void backward(const Micro& micro, Saved& saved, const Tensor<T>& dy, Tensor<T>* dx) override;

 private:
  int64_t width_;
  LayerNorm<T> ln1_;
  CausalSelfAttention<T> attn_;
  LayerNorm<T> ln2_;
  Linear<T> fc_, proj_;
};

}  // namespace train
}  // namespace braid
