// The transformer block: forward with explicit saved activations, hand-written backward.
#include "training/model/block.h"

#include <stdexcept>
#include <string>

#include "training/nn/gelu.h"
#include "training/nn/tp_ops.h"
#include "training/tensor/ops.h"

namespace braid {
namespace train {
namespace {

template <class T>
struct BlockSaved : Saved {
  Tensor<T> x;                     ///< block input [B, T, C]
  Tensor<T> ln1, ln1Mean, ln1Rstd; ///< ln1(x) and its statistics
  typename CausalSelfAttention<T>::Cache attn;
  Tensor<T> x2;                    ///< x + attn(ln1(x))
  Tensor<T> ln2, ln2Mean, ln2Rstd;
  Tensor<T> fc;                    ///< fc(ln2(x2)) before GELU [B, T, 4C/p]
  Tensor<T> act;                   ///< gelu(fc)
};

LinearOptions mlpOptions(LinearKind kind, Init init) {
  LinearOptions o;
  o.kind = kind;
  o.init = init;
  return o;
}

std::string blockName(int index, const char* part) {
  return "blocks." + std::to_string(index) + "." + part;
}

}  // namespace

template <class T>
BlockLayer<T>::BlockLayer(const GptConfig& c, int index, ParamStore<T>& store, TpGroup<T>* tp)
    : width_(c.width),
      ln1_(store, blockName(index, "ln1"), c.width, index + 1),
      attn_(store, blockName(index, "attn"), c.width, c.heads, tp, index + 1),
      ln2_(store, blockName(index, "ln2"), c.width, index + 1),
      fc_(store, blockName(index, "mlp.fc"), c.width, 4 * c.width,
          mlpOptions(LinearKind::kColumnParallel, Init::kNormal002), tp, index + 1),
      proj_(store, blockName(index, "mlp.proj"), 4 * c.width, c.width,
            mlpOptions(LinearKind::kRowParallel, Init::kNormalProj), tp, index + 1) {
  for (Param<T>* p : ln1_.params()) this->params_.push_back(p);
  for (Param<T>* p : attn_.params()) this->params_.push_back(p);
  for (Param<T>* p : ln2_.params()) this->params_.push_back(p);
  for (Param<T>* p : fc_.params()) this->params_.push_back(p);
  for (Param<T>* p : proj_.params()) this->params_.push_back(p);
}

template <class T>
std::unique_ptr<Saved> BlockLayer<T>::forward(const Micro& m, const Tensor<T>& x, Tensor<T>& y) {
  const int64_t B = m.B, Tn = m.T, C = width_, n = B * Tn, H = fc_.outLocal();
  if (x.numel() != n * C)
    throw std::invalid_argument("BlockLayer::forward: x is " + shapeString(x.shape()) +
                                ", expected [B, T, C] = [" + std::to_string(B) + ", " +
                                std::to_string(Tn) + ", " + std::to_string(C) + "]");
  auto s = std::make_unique<BlockSaved<T>>();
  const Shape btc{B, Tn, C};
  s->x = x;
  s->x.reshape(btc);
  s->ln1.reset(btc);
  s->ln1Mean.reset(Shape{n});
  s->ln1Rstd.reset(Shape{n});
  ln1_.forward(x.data(), s->ln1.data(), s->ln1Mean.data(), s->ln1Rstd.data(), n);
  s->x2.reset(btc);
  attn_.forward(s->ln1.data(), s->x2.data(), B, Tn, s->attn);
  addInPlace<T>(s->x2.data(), x.data(), n * C);
  s->ln2.reset(btc);
  s->ln2Mean.reset(Shape{n});
  s->ln2Rstd.reset(Shape{n});
  ln2_.forward(s->x2.data(), s->ln2.data(), s->ln2Mean.data(), s->ln2Rstd.data(), n);
  s->fc.reset(Shape{B, Tn, H});
  s->act.reset(Shape{B, Tn, H});
  fc_.forward(s->ln2.data(), s->fc.data(), n);
  geluForward<T>(s->fc.data(), s->act.data(), n * H);
  if (y.shape() != btc) y.reset(btc);
  proj_.forward(s->act.data(), y.data(), n);
  addInPlace<T>(y.data(), s->x2.data(), n * C);
  return s;
}

template <class T>
void BlockLayer<T>::backward(const Micro& m, Saved& saved, const Tensor<T>& dy, Tensor<T>* dx) {
  auto& s = dynamic_cast<BlockSaved<T>&>(saved);
  const int64_t B = m.B, Tn = m.T, C = width_, n = B * Tn, H = fc_.outLocal();
  if (dy.numel() != n * C)
    throw std::invalid_argument("BlockLayer::backward: dy is " + shapeString(dy.shape()));
  // MLP branch: y = x2 + proj(gelu(fc(ln2(x2)))).
  Tensor<T> dact(Shape{n, H}), dln(Shape{n, C});
  proj_.backward(s.act.data(), dy.data(), dact.data(), n);
  geluBackward<T>(s.fc.data(), dact.data(), dact.data(), n * H);
  fc_.backward(s.ln2.data(), dact.data(), dln.data(), n);
  Tensor<T> dx2(Shape{B, Tn, C});
  ln2_.backward(s.x2.data(), s.ln2Mean.data(), s.ln2Rstd.data(), dln.data(), dx2.data(), n);
  addInPlace<T>(dx2.data(), dy.data(), n * C);
  // Attention branch: x2 = x + attn(ln1(x)).
  attn_.backward(s.ln1.data(), s.attn, dx2.data(), dln.data(), B, Tn);
  const Shape btc{B, Tn, C};
  Tensor<T> scratch;
  Tensor<T>& out = dx ? *dx : scratch;  // ln1's weight gradients are needed either way
  if (out.shape() != btc) out.reset(btc);
  ln1_.backward(s.x.data(), s.ln1Mean.data(), s.ln1Rstd.data(), dln.data(), out.data(), n);
  addInPlace<T>(out.data(), dx2.data(), n * C);
}

template class BlockLayer<float>;
template class BlockLayer<double>;

}  // namespace train
}  // namespace braid
