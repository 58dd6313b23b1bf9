// The GPT as a whole: configuration errors name the field, the parameter inventory and
// layer ownership, stages of a pipeline compose to the whole model, and a short
// single-process training run on the Markov corpus lowers the loss toward the source's
// entropy rate.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/training_core/helpers.h"
#include "training/data/markov.h"
#include "training/data/text_dataset.h"
#include "training/model/gpt.h"
#include "training/optim/adamw.h"

namespace braid {
namespace train {
namespace {

using testing_core::forwardBackward;

/// A TpGroup that only reports a size (the config checks run before any collective).
template <class T>
class FakeTp : public TpGroup<T> {
 public:
  explicit FakeTp(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  void allReduceSum(T*, size_t) override { ADD_FAILURE() << "no collective expected"; }
  void allReduceMax(T*, size_t) override { ADD_FAILURE() << "no collective expected"; }
  void allGather(const T*, T*, size_t) override { ADD_FAILURE() << "no collective expected"; }

 private:
  int size_;
};

GptConfig tiny() {
  GptConfig c;
  c.vocab = 12;
  c.context = 8;
  c.width = 16;
  c.layers = 2;
  c.heads = 4;
  return c;
}

void expectThrowNaming(const std::function<void()>& f, const std::string& field) {
  try {
    f();
    ADD_FAILURE() << "no exception for " << field;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(TrainGpt, BadConfigsNameTheField) {
  auto build = [](GptConfig c, TpGroup<float>* tp, int first = 0, int last = -1) {
    ParamStore<float> s;
    buildGptStage<float>(c, first, last < 0 ? c.numLayers() - 1 : last, s, tp);
  };
  GptConfig c = tiny();
  c.heads = 3;
  expectThrowNaming([&] { build(c, nullptr); }, "width");
  FakeTp<float> tp4(4), tp3(3);
  c = tiny();
  c.heads = 2;
  expectThrowNaming([&] { build(c, &tp4); }, "heads");
  expectThrowNaming([&] { build(tiny(), &tp3); }, "heads");  // heads 4 % 3
  c = tiny();
  c.vocab = 10;
  expectThrowNaming([&] { build(c, &tp4); }, "vocab");
  c = tiny();
  c.width = 0;
  expectThrowNaming([&] { build(c, nullptr); }, "width");
  expectThrowNaming([&] { build(tiny(), nullptr, 2, 1); }, "layer range");
  expectThrowNaming([&] { build(tiny(), nullptr, 0, 4); }, "layer range");
  // T > context is caught at forward time.
  ParamStore<float> s;
  GptStage<float> g = buildGptStage<float>(tiny(), 0, 3, s, nullptr);
  s.allocate(1, 2);
  std::vector<int32_t> tok(9, 1);
  Micro m{tok.data(), tok.data(), 1, 9};
  Tensor<float> x, y;
  expectThrowNaming([&] { g.layers[0]->forward(m, x, y); }, "context");
}

TEST(TrainGpt, ParamsLayersAndDescribe) {
  GptConfig c = tiny();
  EXPECT_EQ(c.describe(), "vocab=12 context=8 width=16 layers=2 heads=4");
  ParamStore<float> s;
  GptStage<float> g = buildGptStage<float>(c, 0, c.numLayers() - 1, s, nullptr);
  s.allocate(1, 2);
  const int64_t C = c.width, V = c.vocab;
  const int64_t perBlock = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) +
                           (4 * C * C + C);
  EXPECT_EQ(s.flatSize(), V * C + c.context * C + c.layers * perBlock + 2 * C + V * C);
  size_t total = 0;
  for (size_t l = 0; l < g.layers.size(); ++l) {
    for (Param<float>* p : g.layers[l]->params()) EXPECT_EQ(p->layer, int(l)) << p->name;
    total += g.layers[l]->params().size();
  }
  EXPECT_EQ(total, s.size());
  EXPECT_NE(s.find("blocks.1.attn.qkv.weight"), nullptr);
  EXPECT_EQ(s.find("blocks.1.attn.qkv.weight")->fullShape, (Shape{3, C, C}));
  EXPECT_FALSE(s.find("blocks.0.ln1.weight")->decay);
  EXPECT_TRUE(s.find("lm_head.weight")->decay);
}

/// Two pipeline stages (layers [0,1] and [2,3]) in two stores compute exactly what
/// one whole model computes: same parameters by name, loss and gradients.
TEST(TrainGpt, StagesComposeToTheWholeModel) {
  GptConfig c = tiny();
  std::vector<int32_t> tok(16), tgt(16);
  Rng rng(1);
  for (auto& t : tok) t = int32_t(rng.below(12));
  for (auto& t : tgt) t = int32_t(rng.below(12));
  Micro m{tok.data(), tgt.data(), 2, 8};
  ParamStore<double> whole, s0, s1;
  GptStage<double> g = buildGptStage<double>(c, 0, 3, whole, nullptr);
  GptStage<double> a = buildGptStage<double>(c, 0, 1, s0, nullptr);
  GptStage<double> b = buildGptStage<double>(c, 2, 3, s1, nullptr);
  whole.allocate(4, 2);
  s0.allocate(4, 2);
  s1.allocate(4, 2);
  EXPECT_EQ(s0.size() + s1.size(), whole.size());
  const double loss = forwardBackward(g, m);
  Tensor<double> h0, h1, out;
  auto sa = a.layers[0]->forward(m, Tensor<double>(), h0);
  auto sb = a.layers[1]->forward(m, h0, h1);
  auto sc = b.layers[0]->forward(m, h1, h0);
  auto sd = b.layers[1]->forward(m, h0, out);
  EXPECT_EQ(out[0], loss);
  Tensor<double> dy(Shape{1}), dx;
  dy[0] = 1;
  b.layers[1]->backward(m, *sd, dy, &dx);
  b.layers[0]->backward(m, *sc, dx, &dy);
  a.layers[1]->backward(m, *sb, dy, &dx);
  a.layers[0]->backward(m, *sa, dx, nullptr);
  for (ParamStore<double>* part : {&s0, &s1})
    for (size_t i = 0; i < part->size(); ++i) {
      Param<double>& p = (*part)[i];
      Param<double>* q = whole.find(p.name);
      ASSERT_NE(q, nullptr);
      for (int64_t k = 0; k < p.numel(); ++k) {
        ASSERT_EQ(p.w[k], q->w[k]) << p.name;
        ASSERT_EQ(p.g[k], q->g[k]) << p.name;
      }
    }
}

TEST(TrainGpt, ShortTrainingOnMarkovCorpusLowersTheLoss) {
  const MarkovSource src = MarkovSource::random(11, 8, 1, 2.5);
  const TextDataset data = TextDataset::fromText(src.generate(12, 20000));
  GptConfig c;
  c.vocab = data.vocabSize();
  c.context = 16;
  c.width = 32;
  c.layers = 1;
  c.heads = 2;
  ParamStore<float> store;
  GptStage<float> gpt = buildGptStage<float>(c, 0, c.numLayers() - 1, store, nullptr);
  store.allocate(7, int(c.layers));
  AdamWConfig oc;
  oc.lr = 1e-2;
  oc.weightDecay = 0.0;
  AdamW<float> opt(oc, store.flatSize());
  std::vector<double> losses;
  const int steps = 60;
  for (int step = 0; step < steps; ++step) {
    Batch b = data.batch(Split::kTrain, 99, step, 8, 16);
    store.zeroGrads();
    losses.push_back(forwardBackward(gpt, b.micro()));
    ASSERT_TRUE(std::isfinite(losses.back()));
    const double norm = std::sqrt(sumSquares(store.flatGrads(), store.flatSize()));
    opt.beginStep();
    opt.update(0, store.flatValues(), store.flatGrads(), store.flatSize(), true,
               opt.clipScale(norm));
  }
  auto mean = [&](int from, int to) {
    double s = 0;
    for (int i = from; i < to; ++i) s += losses[size_t(i)];
    return s / (to - from);
  };
  const double h = src.entropyRate();
  const double first = mean(0, 5), last = mean(steps - 10, steps);
  EXPECT_NEAR(losses[0], std::log(double(c.vocab)), 0.1);  // starts near uniform
  EXPECT_LT(last, first - 0.4) << "entropy rate " << h;
  EXPECT_GT(last, h - 0.1);  // no model beats the source (up to batch noise)
  // Validation loss (forward only) is also below the unigram baseline.
  Batch v = data.batch(Split::kValidation, 99, 0, 16, 16);
  Tensor<float> a, o;
  for (auto& layer : gpt.layers) {
    layer->forward(v.micro(), a, o);
    std::swap(a, o);
  }
  const auto& tr = data.tokens(Split::kTrain);
  const double unigram = unigramEntropy(tr.data(), int64_t(tr.size()), data.vocabSize());
  EXPECT_LT(a[0], unigram - 0.1) << "h=" << h << " unigram=" << unigram;
  std::printf("markov: entropy rate %.4f, unigram %.4f, loss %.4f -> %.4f, validation %.4f\n",
              h, unigram, first, last, double(a[0]));
}

}  // namespace
}  // namespace train
}  // namespace braid
