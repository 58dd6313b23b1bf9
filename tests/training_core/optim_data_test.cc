// AdamW against hand-computed steps; the text dataset (vocabulary, encoding, split,
// deterministic sampling, data-parallel / microbatch slicing); the Markov corpus (its
// exact entropy rate against a long sample); the unigram baseline.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "training/data/markov.h"
#include "training/data/text_dataset.h"
#include "training/optim/adamw.h"

namespace braid {
namespace train {
namespace {

TEST(TrainAdamW, TwoHandComputedSteps) {
  AdamWConfig c;
  c.lr = 0.1;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.eps = 1e-8;
  c.weightDecay = 0.1;
  AdamW<double> opt(c, 3);
  // Element 0 decays; elements 1..2 (a second range at stateOffset 1) do not.
  double w[3] = {1.0, 2.0, -1.0};
  double g1[3] = {0.5, 0.25, 0.0};
  EXPECT_THROW(opt.update(0, w, g1, 1, true, 1.0), std::logic_error);  // before beginStep
  opt.beginStep();
  opt.update(0, w, g1, 1, true, 1.0);
  opt.update(1, w + 1, g1 + 1, 2, false, 2.0);  // gradScale doubles the gradient
  // Step 1: m = 0.1 g, v = 0.05 g^2, mhat = g, vhat = g^2 -> update = g/(|g| + eps).
  EXPECT_NEAR(w[0], 1.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.1 * 1.0), 1e-15);
  EXPECT_NEAR(w[1], 2.0 - 0.1 * (0.5 / (0.5 + 1e-8)), 1e-15);
  EXPECT_EQ(w[2], -1.0);  // zero gradient, no decay: unchanged
  const double w0 = w[0];
  double g2[1] = {-1.0};
  opt.beginStep();
  opt.update(0, w, g2, 1, true, 1.0);
  const double m = 0.9 * 0.05 + 0.1 * -1.0, v = 0.95 * 0.0125 + 0.05 * 1.0;
  const double mhat = m / (1 - 0.81), vhat = v / (1 - 0.9025);
  EXPECT_NEAR(w[0], w0 - 0.1 * (mhat / (std::sqrt(vhat) + 1e-8) + 0.1 * w0), 1e-15);
  EXPECT_EQ(opt.step(), 2);
  EXPECT_NEAR(opt.m()[0], m, 1e-15);
  EXPECT_NEAR(opt.v()[0], v, 1e-15);
  EXPECT_THROW(opt.update(2, w, g2, 2, true, 1.0), std::out_of_range);
}

TEST(TrainAdamW, ClipScaleAndSumSquares) {
  AdamWConfig c;
  c.clipNorm = 1.0;
  AdamW<float> opt(c, 0);
  EXPECT_EQ(opt.clipScale(0.5), 1.0f);
  EXPECT_NEAR(opt.clipScale(4.0), 0.25f, 1e-6);
  c.clipNorm = 0;
  EXPECT_EQ(AdamW<float>(c, 0).clipScale(100.0), 1.0f);
  const float g[3] = {3, 4, 0};
  EXPECT_EQ(sumSquares(g, 3), 25.0);
  EXPECT_EQ(sumSquares(g, 0), 0.0);
}

TEST(TrainData, VocabEncodeSplit) {
  const std::string text = "hello world, hello braid!\n";  // 26 chars
  TextDataset d = TextDataset::fromText(text, 0.1);
  EXPECT_EQ(d.vocab(), std::string("\n !,abdehilorw"));
  EXPECT_EQ(d.vocabSize(), 14);
  const std::vector<int32_t> ids = d.encode("held");
  EXPECT_EQ(d.decode(ids.data(), int64_t(ids.size())), "held");
  EXPECT_EQ(ids[0], 8);  // 'h' is the 9th character in sorted order
  EXPECT_THROW(d.encode("xyz"), std::invalid_argument);
  const int32_t bad = 14;
  EXPECT_THROW(d.decode(&bad, 1), std::out_of_range);
  // 90/10 split in order: 26 - floor(2.6) = 24 training tokens.
  EXPECT_EQ(d.tokens(Split::kTrain).size(), 24u);
  EXPECT_EQ(d.tokens(Split::kValidation).size(), 2u);
  EXPECT_EQ(d.decode(d.tokens(Split::kValidation).data(), 2), "!\n");
  EXPECT_THROW(d.batch(Split::kValidation, 1, 0, 1, 2), std::invalid_argument);  // too short
  EXPECT_THROW(TextDataset::fromFile("/nonexistent/braid.txt"), std::runtime_error);
}

TEST(TrainData, FileBatchesAreDeterministicAndSliced) {
  const std::string path = ::testing::TempDir() + "braid_core_text.txt";
  {
    std::ofstream out(path);
    for (int i = 0; i < 200; ++i) out << "the quick brown fox " << i << "\n";
  }
  TextDataset d = TextDataset::fromFile(path);
  std::remove(path.c_str());
  const int64_t B = 8, T = 12;
  Batch a = d.batch(Split::kTrain, 5, 3, B, T);
  Batch b = d.batch(Split::kTrain, 5, 3, B, T);
  Batch c = d.batch(Split::kTrain, 5, 4, B, T);
  Batch v = d.batch(Split::kValidation, 5, 3, B, T);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_NE(a.tokens, c.tokens);
  EXPECT_NE(a.tokens, v.tokens);
  // Targets are the next tokens: each row is a window of T+1 consecutive tokens.
  const std::vector<int32_t>& train = d.tokens(Split::kTrain);
  for (int64_t i = 0; i < B; ++i) {
    for (int64_t t = 0; t + 1 < T; ++t)
      EXPECT_EQ(a.targets[size_t(i * T + t)], a.tokens[size_t(i * T + t + 1)]);
    bool found = false;  // the window occurs in the training split
    for (size_t s = 0; s + size_t(T) < train.size() && !found; ++s)
      found = std::equal(a.tokens.begin() + i * T, a.tokens.begin() + (i + 1) * T,
                         train.begin() + std::ptrdiff_t(s)) &&
              train[s + size_t(T)] == a.targets[size_t(i * T + T - 1)];
    EXPECT_TRUE(found) << "row " << i;
  }
  // DP rank r of 2, microbatch m of 2: sequences [r*4 + m*2, +2).
  Micro m = sliceMicro(a, 1, 2, 1, 2);
  EXPECT_EQ(m.B, 2);
  EXPECT_EQ(m.T, T);
  EXPECT_EQ(m.tokens, a.tokens.data() + 6 * T);
  EXPECT_EQ(m.targets, a.targets.data() + 6 * T);
  EXPECT_EQ(sliceMicro(a, 0, 1, 0, 1).B, B);
  // Each rank's microbatches stay inside its DP share [r*B/d, (r+1)*B/d): d = 2, M = 4.
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 4; ++k) {
      Micro s = sliceMicro(a, r, 2, k, 4);
      EXPECT_EQ(s.B, 1);
      EXPECT_EQ(s.tokens, a.tokens.data() + (r * 4 + k) * T) << "rank " << r << " micro " << k;
    }
  // The slices of all ranks and microbatches tile the batch exactly once.
  std::vector<int> hits(size_t(B), 0);
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 2; ++k) {
      Micro s = sliceMicro(a, r, 4, k, 2);
      ++hits[size_t((s.tokens - a.tokens.data()) / T)];
    }
  EXPECT_EQ(hits, std::vector<int>(size_t(B), 1));
  EXPECT_THROW(sliceMicro(a, 0, 3, 0, 1), std::invalid_argument);
  EXPECT_THROW(sliceMicro(a, 2, 2, 0, 1), std::invalid_argument);
  EXPECT_EQ(paddedVocab(65, 4), 68);
  EXPECT_EQ(paddedVocab(64, 4), 64);
  EXPECT_EQ(paddedVocab(65, 1), 65);
}

TEST(TrainData, UnigramEntropy) {
  const int32_t uniform[4] = {0, 1, 2, 3};
  EXPECT_NEAR(unigramEntropy(uniform, 4, 4), std::log(4.0), 1e-12);
  const int32_t constant[3] = {2, 2, 2};
  EXPECT_EQ(unigramEntropy(constant, 3, 4), 0.0);
  const int32_t skew[4] = {0, 0, 0, 1};
  EXPECT_NEAR(unigramEntropy(skew, 4, 2), -(0.75 * std::log(0.75) + 0.25 * std::log(0.25)), 1e-12);
}

TEST(TrainMarkov, EntropyRateMatchesALongSample) {
  MarkovSource src = MarkovSource::random(3, 12, 2, 2.0);
  EXPECT_EQ(src.numContexts(), 144);
  for (int64_t c = 0; c < src.numContexts(); ++c) {
    double s = 0;
    for (int j = 0; j < src.alphabet(); ++j) s += src.prob(c, j);
    ASSERT_NEAR(s, 1.0, 1e-12);
  }
  const std::vector<double> pi = src.stationary();
  double total = 0;
  for (double p : pi) total += p;
  EXPECT_NEAR(total, 1.0, 1e-12);
  const double h = src.entropyRate();
  EXPECT_GT(h, 0.3);
  EXPECT_LT(h, std::log(12.0));
  const std::string text = src.generate(9, 300000);
  EXPECT_EQ(text, src.generate(9, 300000));  // deterministic
  EXPECT_NE(text.substr(0, 100), src.generate(10, 100));
  // The true model's loss on a long sample converges to the entropy rate.
  EXPECT_NEAR(src.crossEntropy(text), h, 0.01);
  // Plug-in conditional entropy of the sample from counts (bias ~ cells / 2N).
  std::map<std::string, std::map<char, int64_t>> counts;
  for (size_t i = 2; i < text.size(); ++i) ++counts[text.substr(i - 2, 2)][text[i]];
  double hEmp = 0;
  const double n = double(text.size() - 2);
  for (auto& ctx : counts) {
    int64_t ctxTotal = 0;
    for (auto& kv : ctx.second) ctxTotal += kv.second;
    for (auto& kv : ctx.second)
      hEmp -= double(kv.second) / n * std::log(double(kv.second) / double(ctxTotal));
  }
  EXPECT_NEAR(hEmp, h, 0.02);
  // The unigram entropy of the sample is well above the entropy rate.
  TextDataset d = TextDataset::fromText(text);
  const auto& tr = d.tokens(Split::kTrain);
  EXPECT_GT(unigramEntropy(tr.data(), int64_t(tr.size()), d.vocabSize()), h + 0.2);
  EXPECT_THROW(MarkovSource::random(1, 1, 2), std::invalid_argument);
  EXPECT_THROW(MarkovSource::random(1, 8, 5), std::invalid_argument);
  EXPECT_THROW(src.crossEntropy("#"), std::invalid_argument);
}

}  // namespace
}  // namespace train
}  // namespace braid
