// The GPT-style character model: Embedding (token + position) -> `layers` transformer
// blocks (pre-norm: x + attn(ln1(x)), x + mlp(ln2(x)), causal self-attention, GELU MLP
// of width 4C) -> final LayerNorm -> LM head (untied, no bias) -> cross-entropy.
//
// Layer indices: 0 = embedding, 1..layers = blocks, layers+1 = head; numLayers() =
// layers + 2. A pipeline stage builds only its contiguous range [first, last].
// With a TpGroup, Megatron tensor parallelism: attention heads and the MLP hidden
// width are split across TP ranks (column-parallel in, row-parallel out), the token
// embedding and the LM head are vocab-parallel, the loss is a vocab-parallel
// cross-entropy; norms and position embeddings are replicated.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "training/model/layer.h"
#include "training/nn/param.h"
#include "training/nn/tp_group.h"

namespace braid {
namespace train {

struct GptConfig {
  int64_t vocab = 65;   ///< must be divisible by the TP size
  int64_t context = 64; ///< maximum sequence length T
  int64_t width = 64;   ///< C; must be divisible by heads
  int64_t layers = 2;
  int64_t heads = 4;    ///< must be divisible by the TP size
  int numLayers() const { return int(layers) + 2; }
  std::string describe() const;
};

/// One pipeline stage of a GPT: layers [first, last] (inclusive) of the whole model,
/// their parameters registered in `store` (not yet allocated: call store.allocate()).
template <class T>
struct GptStage {
  GptConfig config;
  int first = 0, last = 0;
  std::vector<std::unique_ptr<Layer<T>>> layers;  ///< layers[i] is model layer first+i
};

/// Builds layers [first, last] of the model described by `config` into `store`.
/// tp may be nullptr (no tensor parallelism). Throws std::invalid_argument on a bad
/// config (naming the field).
template <class T>
GptStage<T> buildGptStage(const GptConfig& config, int first, int last, ParamStore<T>& store,
                          TpGroup<T>* tp);

}  // namespace train
}  // namespace braid
