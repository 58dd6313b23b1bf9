// The GPT model: embedding layer, transformer blocks (block.cc), head layer, and the
// stage builder.
#include "training/model/gpt.h"

#include <stdexcept>
#include <string>

#include "training/model/block.h"
#include "training/nn/cross_entropy.h"
#include "training/nn/embedding.h"
#include "training/nn/layernorm.h"
#include "training/nn/linear.h"
#include "training/nn/tp_ops.h"

namespace braid {
namespace train {
namespace {

void checkTokens(const Micro& m, int64_t context, const char* who) {
  if (m.B <= 0 || m.T <= 0)
    throw std::invalid_argument(std::string(who) + ": B and T must be positive");
  if (m.T > context)
    throw std::invalid_argument(std::string(who) + ": T " + std::to_string(m.T) +
                                " > context " + std::to_string(context));
}

/// Layer 0: y = wte[tokens] (vocab-parallel) + wpe[position].
template <class T>
class EmbeddingLayer : public Layer<T> {
 public:
  EmbeddingLayer(const GptConfig& c, ParamStore<T>& store, TpGroup<T>* tp)
      : c_(c),
        wte_(store, "wte", c.vocab, c.width, /*vocabParallel=*/true, tp, 0),
        wpe_(store, "wpe", c.context, c.width, 0) {
    this->params_ = {wte_.weight(), wpe_.weight()};
  }
  std::unique_ptr<Saved> forward(const Micro& m, const Tensor<T>&, Tensor<T>& y) override {
    checkTokens(m, c_.context, "EmbeddingLayer::forward");
    const Shape btc{m.B, m.T, c_.width};
    if (y.shape() != btc) y.reset(btc);
    wte_.forward(m.tokens, m.B * m.T, y.data());
    wpe_.forwardAdd(y.data(), m.B, m.T);
    return std::make_unique<Saved>();
  }
  void backward(const Micro& m, Saved&, const Tensor<T>& dy, Tensor<T>*) override {
    if (dy.numel() != m.B * m.T * c_.width)
      throw std::invalid_argument("EmbeddingLayer::backward: dy is " + shapeString(dy.shape()));
    wte_.backward(m.tokens, m.B * m.T, dy.data());
    wpe_.backward(dy.data(), m.B, m.T);
  }

 private:
  GptConfig c_;
  Embedding<T> wte_;
  PositionEmbedding<T> wpe_;
};

template <class T>
struct HeadSaved : Saved {
  Tensor<T> x, ln, mean, rstd;  ///< input, ln_f(x) and its statistics
  Tensor<T> probs;              ///< softmax, this rank's vocab slice [B*T, V/p]
};

LinearOptions headOptions() {
  LinearOptions o;
  o.bias = false;
  o.kind = LinearKind::kColumnParallel;  // vocab-parallel logits
  return o;
}

/// Layer L+1: mean cross-entropy of lm_head(ln_f(x)) against micro.targets.
template <class T>
class HeadLayer : public Layer<T> {
 public:
  HeadLayer(const GptConfig& c, ParamStore<T>& store, TpGroup<T>* tp)
      : c_(c),
        tp_(tp),
        lnf_(store, "ln_f", c.width, c.numLayers() - 1),
        head_(store, "lm_head", c.width, c.vocab, headOptions(), tp, c.numLayers() - 1) {
    this->params_ = lnf_.params();
    this->params_.push_back(head_.weight());
  }
  std::unique_ptr<Saved> forward(const Micro& m, const Tensor<T>& x, Tensor<T>& y) override {
    checkTokens(m, c_.context, "HeadLayer::forward");
    const int64_t n = m.B * m.T, C = c_.width, V = head_.outLocal();
    if (x.numel() != n * C)
      throw std::invalid_argument("HeadLayer::forward: x is " + shapeString(x.shape()));
    auto s = std::make_unique<HeadSaved<T>>();
    s->x = x;
    s->ln.reset(Shape{n, C});
    s->mean.reset(Shape{n});
    s->rstd.reset(Shape{n});
    lnf_.forward(x.data(), s->ln.data(), s->mean.data(), s->rstd.data(), n);
    s->probs.reset(Shape{n, V});
    head_.forward(s->ln.data(), s->probs.data(), n);  // logits, turned into probs in place
    Tensor<T> losses(Shape{n});
    const T loss = crossEntropyForward<T>(s->probs.data(), m.targets, n, V, vocabStart(), tp_,
                                          s->probs.data(), losses.data());
    if (y.shape() != Shape{1}) y.reset(Shape{1});
    y[0] = loss;
    return s;
  }
  void backward(const Micro& m, Saved& saved, const Tensor<T>& dy, Tensor<T>* dx) override {
    auto& s = dynamic_cast<HeadSaved<T>&>(saved);
    const int64_t n = m.B * m.T, C = c_.width, V = head_.outLocal();
    if (dy.numel() != 1)
      throw std::invalid_argument("HeadLayer::backward: dy must hold 1 element (loss weight)");
    Tensor<T> dlogits(Shape{n, V}), dln(Shape{n, C});
    crossEntropyBackward<T>(s.probs.data(), m.targets, n, V, vocabStart(), dy[0] / T(n),
                            dlogits.data());
    head_.backward(s.ln.data(), dlogits.data(), dln.data(), n);  // all-reduces dln
    Tensor<T> scratch;
    Tensor<T>& out = dx ? *dx : scratch;
    const Shape btc{m.B, m.T, C};
    if (out.shape() != btc) out.reset(btc);
    lnf_.backward(s.x.data(), s.mean.data(), s.rstd.data(), dln.data(), out.data(), n);
  }

 private:
  int64_t vocabStart() const { return head_.outLocal() * tpRank(tp_); }
  GptConfig c_;
  TpGroup<T>* tp_;
  LayerNorm<T> lnf_;
  Linear<T> head_;
};

void requirePositive(int64_t v, const char* field) {
  if (v <= 0)
    throw std::invalid_argument(std::string("GptConfig.") + field + " must be positive (got " +
                                std::to_string(v) + ")");
}

}  // namespace

std::string GptConfig::describe() const {
  return "vocab=" + std::to_string(vocab) + " context=" + std::to_string(context) +
         " width=" + std::to_string(width) + " layers=" + std::to_string(layers) +
         " heads=" + std::to_string(heads);
}

template <class T>
GptStage<T> buildGptStage(const GptConfig& config, int first, int last, ParamStore<T>& store,
                          TpGroup<T>* tp) {
  requirePositive(config.vocab, "vocab");
  requirePositive(config.context, "context");
  requirePositive(config.width, "width");
  requirePositive(config.heads, "heads");
  if (config.layers < 0)
    throw std::invalid_argument("GptConfig.layers must be >= 0");
  if (config.width % config.heads != 0)
    throw std::invalid_argument("GptConfig.width " + std::to_string(config.width) +
                                " must be divisible by heads " + std::to_string(config.heads));
  const int p = tpSize(tp);
  if (config.heads % p != 0)
    throw std::invalid_argument("GptConfig.heads " + std::to_string(config.heads) +
                                " must be divisible by the TP size " + std::to_string(p));
  if (config.vocab % p != 0)
    throw std::invalid_argument("GptConfig.vocab " + std::to_string(config.vocab) +
                                " must be divisible by the TP size " + std::to_string(p));
  if (first < 0 || last < first || last >= config.numLayers())
    throw std::invalid_argument("buildGptStage: layer range [" + std::to_string(first) + ", " +
                                std::to_string(last) + "] outside [0, " +
                                std::to_string(config.numLayers() - 1) + "]");
  GptStage<T> stage;
  stage.config = config;
  stage.first = first;
  stage.last = last;
  for (int l = first; l <= last; ++l) {
    if (l == 0)
      stage.layers.push_back(std::make_unique<EmbeddingLayer<T>>(config, store, tp));
    else if (l == config.numLayers() - 1)
      stage.layers.push_back(std::make_unique<HeadLayer<T>>(config, store, tp));
    else
      stage.layers.push_back(std::make_unique<BlockLayer<T>>(config, l - 1, store, tp));
  }
  return stage;
}

template GptStage<float> buildGptStage<float>(const GptConfig&, int, int, ParamStore<float>&,
                                              TpGroup<float>*);
template GptStage<double> buildGptStage<double>(const GptConfig&, int, int,
                                                ParamStore<double>&, TpGroup<double>*);

}  // namespace train
}  // namespace braid
