// Finite-difference gradient checks (float64) of every module's hand-written backward
// and of a whole tiny GPT: central differences against the analytic gradients of a
// scalar objective, relative error < 1e-6 on sampled elements of every tensor.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/training_core/helpers.h"
#include "training/model/gpt.h"
#include "training/nn/attention.h"
#include "training/nn/cross_entropy.h"
#include "training/nn/embedding.h"
#include "training/nn/gelu.h"
#include "training/nn/layernorm.h"
#include "training/nn/linear.h"
#include "training/tensor/ops.h"

namespace braid {
namespace train {
namespace {

using testing_core::fillNormal;
using testing_core::gradCheck;

/// sum(y * r): its gradient w.r.t. y is r.
double dot(const std::vector<double>& y, const std::vector<double>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

/// Checks every parameter of `store` against `analytic` (a copy of the flat gradients).
void checkParams(ParamStore<double>& store, const std::function<double()>& f,
                 const std::vector<double>& analytic, int samples = 24) {
  for (size_t i = 0; i < store.size(); ++i) {
    Param<double>& p = store[i];
    gradCheck(f, p.w, analytic.data() + p.offset, p.numel(), p.name, samples);
  }
}

TEST(TrainGradCheck, LinearWithBias) {
  const int64_t n = 5, in = 4, out = 3;
  ParamStore<double> store;
  Linear<double> lin(store, "lin", in, out, LinearOptions{}, nullptr, 0);
  store.allocate(1, 1);
  fillNormal(store.flatValues(), store.flatSize(), 2, 0.5);
  std::vector<double> x(size_t(n * in)), r(size_t(n * out)), y(size_t(n * out));
  fillNormal(x.data(), n * in, 3);
  fillNormal(r.data(), n * out, 4);
  auto f = [&] {
    lin.forward(x.data(), y.data(), n);
    return dot(y, r);
  };
  f();
  std::vector<double> dx(x.size());
  lin.backward(x.data(), r.data(), dx.data(), n);
  std::vector<double> g(store.flatGrads(), store.flatGrads() + store.flatSize());
  checkParams(store, f, g);
  gradCheck(f, x.data(), dx.data(), n * in, "x");
}

TEST(TrainGradCheck, LinearGroupedNoBias) {
  const int64_t n = 4, in = 3, out = 6;
  ParamStore<double> store;
  LinearOptions o;
  o.bias = false;
  o.groups = 3;
  Linear<double> lin(store, "qkv", in, out, o, nullptr, 0);
  store.allocate(1, 1);
  EXPECT_EQ(lin.bias(), nullptr);
  EXPECT_EQ(store[0].fullShape, (Shape{3, 2, 3}));
  fillNormal(store.flatValues(), store.flatSize(), 2, 0.5);
  std::vector<double> x(size_t(n * in)), r(size_t(n * out)), y(size_t(n * out));
  fillNormal(x.data(), n * in, 3);
  fillNormal(r.data(), n * out, 4);
  auto f = [&] {
    lin.forward(x.data(), y.data(), n);
    return dot(y, r);
  };
  std::vector<double> dx(x.size());
  lin.backward(x.data(), r.data(), dx.data(), n);
  std::vector<double> g(store.flatGrads(), store.flatGrads() + store.flatSize());
  checkParams(store, f, g);
  gradCheck(f, x.data(), dx.data(), n * in, "x");
}

TEST(TrainGradCheck, EmbeddingAndPosition) {
  const int64_t B = 2, T = 3, V = 5, C = 4, n = B * T;
  ParamStore<double> store;
  Embedding<double> wte(store, "wte", V, C, false, nullptr, 0);
  PositionEmbedding<double> wpe(store, "wpe", 4, C, 0);
  store.allocate(7, 1);
  const std::vector<int32_t> tokens{0, 3, 3, 4, 1, 3};
  std::vector<double> y(size_t(n * C)), r(y.size());
  fillNormal(r.data(), n * C, 5);
  auto f = [&] {
    wte.forward(tokens.data(), n, y.data());
    wpe.forwardAdd(y.data(), B, T);
    return dot(y, r);
  };
  f();
  wte.backward(tokens.data(), n, r.data());
  wpe.backward(r.data(), B, T);
  std::vector<double> g(store.flatGrads(), store.flatGrads() + store.flatSize());
  checkParams(store, f, g, 100);
  // Row 2 of wte is never looked up: zero gradient.
  for (int64_t j = 0; j < C; ++j) EXPECT_EQ(store[0].g[2 * C + j], 0.0);
  const std::vector<int32_t> bad{0, 5};
  EXPECT_THROW(wte.forward(bad.data(), 2, y.data()), std::out_of_range);
  EXPECT_THROW(wpe.forwardAdd(y.data(), 1, 5), std::invalid_argument);
}

TEST(TrainGradCheck, LayerNorm) {
  const int64_t n = 4, C = 6;
  ParamStore<double> store;
  LayerNorm<double> ln(store, "ln", C, 0);
  store.allocate(1, 1);
  fillNormal(store.flatValues(), store.flatSize(), 9, 0.7);
  std::vector<double> x(size_t(n * C)), y(x.size()), r(x.size()), mean(static_cast<size_t>(n)),
      rstd(static_cast<size_t>(n));
  fillNormal(x.data(), n * C, 10, 2.0);
  for (int64_t i = 0; i < n * C; ++i) x[size_t(i)] += double(i % 3);  // non-zero means
  fillNormal(r.data(), n * C, 11);
  auto f = [&] {
    ln.forward(x.data(), y.data(), mean.data(), rstd.data(), n);
    return dot(y, r);
  };
  f();
  std::vector<double> dx(x.size());
  ln.backward(x.data(), mean.data(), rstd.data(), r.data(), dx.data(), n);
  std::vector<double> g(store.flatGrads(), store.flatGrads() + store.flatSize());
  checkParams(store, f, g);
  gradCheck(f, x.data(), dx.data(), n * C, "x", 48);
}

TEST(TrainGradCheck, Gelu) {
  const int64_t n = 40;
  std::vector<double> x(static_cast<size_t>(n)), y(x.size()), r(x.size()), dx(x.size());
  fillNormal(x.data(), n, 12, 2.0);
  fillNormal(r.data(), n, 13);
  auto f = [&] {
    geluForward(x.data(), y.data(), n);
    return dot(y, r);
  };
  geluBackward(x.data(), r.data(), dx.data(), n);
  gradCheck(f, x.data(), dx.data(), n, "x", 40);
  // GPT-2's values: gelu(1) = 0.841192, gelu(-1) = -0.158808.
  double v[2] = {1.0, -1.0}, o[2];
  geluForward(v, o, 2);
  EXPECT_NEAR(o[0], 0.8411919906, 1e-9);
  EXPECT_NEAR(o[1], -0.1588080094, 1e-9);
  // The float path (tanh through expf) agrees with double, saturation included.
  std::vector<float> xf(201), yf(201), df(201), ones(201, 1.0f);
  std::vector<double> xd(201), yd(201), dd(201), onesd(201, 1.0);
  for (int i = 0; i <= 200; ++i) xd[size_t(i)] = xf[size_t(i)] = float(-12.0 + 0.12 * i);
  geluForward(xf.data(), yf.data(), 201);
  geluForward(xd.data(), yd.data(), 201);
  geluBackward(xf.data(), ones.data(), df.data(), 201);
  geluBackward(xd.data(), onesd.data(), dd.data(), 201);
  for (size_t i = 0; i < 201; ++i) {
    EXPECT_NEAR(yf[i], yd[i], 2e-6 * (1 + std::fabs(yd[i]))) << xd[i];
    EXPECT_NEAR(df[i], dd[i], 2e-6) << xd[i];
  }
}

TEST(TrainGradCheck, CausalSelfAttention) {
  const int64_t B = 2, T = 4, C = 8, H = 2;
  ParamStore<double> store;
  CausalSelfAttention<double> attn(store, "attn", C, H, nullptr, 0);
  store.allocate(3, 1);
  fillNormal(store.flatValues(), store.flatSize(), 14, 0.4);
  std::vector<double> x(size_t(B * T * C)), y(x.size()), r(x.size()), dx(x.size());
  fillNormal(x.data(), B * T * C, 15);
  fillNormal(r.data(), B * T * C, 16);
  CausalSelfAttention<double>::Cache cache;
  auto f = [&] {
    CausalSelfAttention<double>::Cache c;
    attn.forward(x.data(), y.data(), B, T, c);
    return dot(y, r);
  };
  attn.forward(x.data(), y.data(), B, T, cache);
  attn.backward(x.data(), cache, r.data(), dx.data(), B, T);
  std::vector<double> g(store.flatGrads(), store.flatGrads() + store.flatSize());
  checkParams(store, f, g);
  gradCheck(f, x.data(), dx.data(), B * T * C, "x", 64);
  // Causality: the output at t = 0 does not depend on x at t = 1.
  std::vector<double> y0 = y;
  x[size_t(C)] += 1.0;
  f();
  for (int64_t j = 0; j < C; ++j) EXPECT_EQ(y[size_t(j)], y0[size_t(j)]);
  EXPECT_NE(y[size_t(C)], y0[size_t(C)]);
}

TEST(TrainGradCheck, CrossEntropy) {
  const int64_t n = 6, V = 7;
  std::vector<double> logits(size_t(n * V)), probs(logits.size()), losses(static_cast<size_t>(n)),
      dlogits(logits.size());
  fillNormal(logits.data(), n * V, 17, 2.0);
  const std::vector<int32_t> targets{0, 6, 3, 3, 2, 5};
  const double w = 0.7;
  auto f = [&] {
    return w * crossEntropyForward<double>(logits.data(), targets.data(), n, V, 0, nullptr,
                                           probs.data(), losses.data());
  };
  f();
  // Each row's loss is -log softmax(target).
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(losses[size_t(i)], -std::log(probs[size_t(i * V + targets[size_t(i)])]), 1e-12);
  crossEntropyBackward<double>(probs.data(), targets.data(), n, V, 0, w / double(n),
                               dlogits.data());
  gradCheck(f, logits.data(), dlogits.data(), n * V, "logits", 42);
  const std::vector<int32_t> bad{7};
  EXPECT_THROW(crossEntropyForward<double>(logits.data(), bad.data(), 1, V, 0, nullptr,
                                           probs.data(), losses.data()),
               std::out_of_range);
}

/// The whole tiny GPT, every parameter (sampled) and all layers chained.
TEST(TrainGradCheck, WholeTinyGpt) {
  GptConfig c;
  c.vocab = 10;
  c.context = 6;
  c.width = 8;
  c.layers = 2;
  c.heads = 2;
  ParamStore<double> store;
  GptStage<double> gpt = buildGptStage<double>(c, 0, c.numLayers() - 1, store, nullptr);
  ASSERT_EQ(int(gpt.layers.size()), c.numLayers());
  store.allocate(42, int(c.layers));
  // Perturb every value so that no parameter sits at a special point (unit norms, zero
  // biases) and the loss surface is generic.
  std::vector<double> noise(size_t(store.flatSize()));
  fillNormal(noise.data(), store.flatSize(), 43, 0.3);
  addInPlace(store.flatValues(), noise.data(), store.flatSize());
  const int64_t B = 2, T = 5;
  std::vector<int32_t> tokens(size_t(B * T)), targets(size_t(B * T));
  Rng rng(44);
  for (auto& t : tokens) t = int32_t(rng.below(uint64_t(c.vocab)));
  for (auto& t : targets) t = int32_t(rng.below(uint64_t(c.vocab)));
  Micro m{tokens.data(), targets.data(), B, T};
  const double weight = 0.8;

  auto f = [&] {
    Tensor<double> a, b;
    for (auto& layer : gpt.layers) {
      layer->forward(m, a, b);
      std::swap(a, b);
    }
    return weight * a[0];
  };
  // Analytic: forward keeping the Saved, backward in reverse.
  std::vector<std::unique_ptr<Saved>> saved;
  std::vector<Tensor<double>> acts(gpt.layers.size() + 1);
  for (size_t l = 0; l < gpt.layers.size(); ++l)
    saved.push_back(gpt.layers[l]->forward(m, acts[l], acts[l + 1]));
  EXPECT_EQ(acts.back().numel(), 1);
  EXPECT_GT(acts.back()[0], 0.0);
  store.zeroGrads();
  Tensor<double> dy(Shape{1}), dx;
  dy[0] = weight;
  for (size_t l = gpt.layers.size(); l-- > 0;) {
    gpt.layers[l]->backward(m, *saved[l], dy, l > 0 ? &dx : nullptr);
    std::swap(dy, dx);
  }
  std::vector<double> g(store.flatGrads(), store.flatGrads() + store.flatSize());
  size_t checked = 0;
  for (size_t i = 0; i < store.size(); ++i) {
    Param<double>& p = store[i];
    gradCheck(f, p.w, g.data() + p.offset, p.numel(), p.name, 8);
    ++checked;
  }
  EXPECT_EQ(checked, 2 + 12 * size_t(c.layers) + 3);
}

}  // namespace
}  // namespace train
}  // namespace braid
