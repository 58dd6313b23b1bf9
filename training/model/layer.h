// Layer: one pipeline unit of a model (the token/position embedding, one transformer
// block, or the final norm + LM head + loss). A model is a sequence of Layers; a
// pipeline stage runs a contiguous range of them.
//
// Layers keep no per-call state: forward() returns the activations backward() needs,
// so several microbatches can be in flight at once (1F1B). Parameter gradients are
// ACCUMULATED (+=) by backward(); the caller zeroes them (ParamStore::zeroGrads) once
// per optimizer step.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "training/nn/param.h"
#include "training/tensor/tensor.h"

namespace braid {
namespace train {

/// One microbatch of token ids: B sequences of T tokens; targets are the next tokens.
struct Micro {
  const int32_t* tokens = nullptr;   ///< [B*T]
  const int32_t* targets = nullptr;  ///< [B*T]
  int64_t B = 0, T = 0;
};

/// What a layer saved in forward for its backward (layer-specific subclass).
struct Saved {
  virtual ~Saved() = default;
};

template <class T>
class Layer {
 public:
  virtual ~Layer() = default;
  /// The params this layer registered (indices into the ParamStore, in order).
  const std::vector<Param<T>*>& params() const { return params_; }

  /// x: the activation from the previous layer [B, T, C] (ignored by the embedding,
  /// which reads micro.tokens). y: resized and written with this layer's output —
  /// [B, T, C], or for the head a 1-element tensor holding the mean loss over the
  /// microbatch's B*T tokens.
  virtual std::unique_ptr<Saved> forward(const Micro& micro, const Tensor<T>& x,
                                         Tensor<T>& y) = 0;
  /// dy: gradient of the objective w.r.t. y (for the head: a 1-element tensor, the
  /// weight of this microbatch's mean loss in the objective, e.g. 1/numMicrobatches).
  /// dx: resized and written with the gradient w.r.t. x, unless dx is nullptr (the
  /// embedding has no input gradient). Accumulates parameter gradients.
  virtual void backward(const Micro& micro, Saved& saved, const Tensor<T>& dy,
                        Tensor<T>* dx) = 0;

 protected:
  std::vector<Param<T>*> params_;
};

}  // namespace train
}  // namespace braid
