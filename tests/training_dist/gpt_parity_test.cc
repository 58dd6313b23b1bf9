// Parity on the real model: the GPT (training/model/gpt.h) trained with DDP and
// ZeRO-1/2/3 on 2 and 4 DP ranks (threads) matches one process on the same global batch
// for 20 steps: losses within 1e-5 relative, parameters equal at the end. Also DDP's
// overlap on the GPT, measured from timestamps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <mutex>

#include "tests/training_dist/strategies.h"
#include "tests/training_dist/toy.h"
#include "training/model/gpt.h"

namespace braid {
namespace train {
namespace {

/// The GPT in the toy harness's model shape (cfg, store, layers).
template <class T>
struct GptModel {
  toy::Config cfg;
  ParamStore<T> store;
  std::vector<std::unique_ptr<Layer<T>>> layers;
  static GptConfig gpt(const toy::Config& c) {
    GptConfig g;
    g.vocab = c.vocab;
    g.context = c.seq;
    g.width = c.width;
    g.layers = c.depth;
    g.heads = 2;
    return g;
  }
  explicit GptModel(const toy::Config& c) : cfg(c) {
    const GptConfig g = gpt(c);
    GptStage<T> stage = buildGptStage<T>(g, 0, g.numLayers() - 1, store, nullptr);
    layers = std::move(stage.layers);
    store.allocate(c.seed, g.numLayers());
  }
};

toy::Config gptConfig() {
  toy::Config c;
  c.vocab = 64;
  c.width = 16;
  c.depth = 2;
  c.seq = 8;
  c.batch = 8;
  return c;
}

AdamWConfig gptAdam() {
  AdamWConfig a;
  a.lr = 3e-3;
  a.clipNorm = 1.0;
  return a;
}

constexpr int kSteps = 20;

struct Result {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
};

using Case = std::tuple<std::string, int>;

class GptParity : public ::testing::TestWithParam<Case> {};

TEST_P(GptParity, MatchesOneProcess) {
  const std::string kind = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  const toy::Config c = gptConfig();
  toy::Reference<float, GptModel<float>> ref(c, gptAdam());
  std::vector<double> refLoss;
  for (int s = 0; s < kSteps; ++s) refLoss.push_back(ref.step(s));
  EXPECT_LT(refLoss.back(), refLoss.front());

  Result par;
  par.params.resize(size_t(n));
  std::mutex mu;
  auto errors = toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    GptModel<float> m(c);
    // ~3 buckets over ~9k parameters.
    auto dp = toy::makeStrategy<float>(kind, pg, m.store, gptAdam(), 1500, 3000);
    std::vector<double> losses;
    for (int s = 0; s < kSteps; ++s) losses.push_back(toy::step(m, *dp, pg, s));
    auto p = toy::fullParams(*dp, m.store);
    std::lock_guard<std::mutex> lock(mu);
    par.params[size_t(r)] = std::move(p);
    if (r == 0) par.losses = losses;
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[size_t(r)], "") << "rank " << r;
  ASSERT_EQ(par.losses.size(), size_t(kSteps));
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(par.losses[size_t(s)], refLoss[size_t(s)], 1e-5 * refLoss[size_t(s)]) << "step " << s;
  const float* want = ref.model.store.flatValues();
  double maxLoss = 0, maxParam = 0;
  for (int s = 0; s < kSteps; ++s)
    maxLoss = std::max(maxLoss, std::fabs(par.losses[size_t(s)] - refLoss[size_t(s)]) / refLoss[size_t(s)]);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < par.params[size_t(r)].size(); ++i)
      maxParam = std::max(maxParam, std::fabs(double(par.params[size_t(r)][i]) - double(want[i])));
  std::printf("[ parity   ] gpt %s dp=%d: %d steps, loss %.4f -> %.4f, max loss rel diff %.2e, max param abs diff %.2e\n",
              kind.c_str(), n, kSteps, refLoss.front(), refLoss.back(), maxLoss, maxParam);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(int64_t(par.params[size_t(r)].size()), ref.model.store.flatSize());
    int bad = 0;
    for (size_t i = 0; i < par.params[size_t(r)].size(); ++i) {
      const double a = par.params[size_t(r)][i], b = want[i];
      if (std::fabs(a - b) > 1e-5 * std::fabs(b) + 1e-5 && bad++ < 5)
        ADD_FAILURE() << "rank " << r << " param " << i << ": " << a << " vs " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptParity,
                         ::testing::Values(Case{"ddp", 2}, Case{"ddp", 4}, Case{"zero1", 2}, Case{"zero1", 4},
                                           Case{"zero2", 2}, Case{"zero2", 4}, Case{"zero3", 2},
                                           Case{"zero3", 4}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::get<0>(i.param) + "_dp" + std::to_string(std::get<1>(i.param));
                         });

// DDP on a larger GPT: every bucket but the last (the embedding's) is queued while
// backward still runs, and the measured share of communication hidden behind backward
// is reported. (The toy model's Ddp.CommunicationOverlapsBackward also checks that the
// buckets STARTED before backward ended, with a controlled backward duration.)
TEST(GptDdp, BucketsQueuedDuringBackward) {
  toy::Config c = gptConfig();
  c.width = 64;
  c.depth = 4;
  c.seq = 16;
  CommStats stats;
  size_t nBuckets = 0;
  std::mutex mu;
  auto errors = toy::runRanks(2, [&](int r, ProcessGroup& pg) {
    GptModel<float> m(c);
    DdpConfig dc;
    dc.firstBucketElems = 20000;  // ~200k parameters: about 8 buckets
    dc.bucketCapElems = 30000;
    Ddp<float> ddp(pg, m.store, gptAdam(), dc);
    for (int s = 0; s < 3; ++s) toy::step(m, ddp, pg, s);
    if (r == 0) {
      std::lock_guard<std::mutex> lock(mu);
      stats = ddp.commStats();
      nBuckets = ddp.buckets().size();
    }
  });
  for (size_t r = 0; r < errors.size(); ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  ASSERT_GE(nBuckets, 4u);
  ASSERT_EQ(stats.ops.size(), nBuckets);
  int startedEarly = 0;
  for (size_t b = 0; b + 1 < stats.ops.size(); ++b) {
    EXPECT_LT(stats.ops[b].queuedAt, stats.backwardEndAt) << stats.ops[b].what;
    startedEarly += stats.ops[b].startedAt < stats.backwardEndAt;
  }
  for (const CommTiming& t : stats.ops)
    std::printf("[ overlap  ]   %-22s %7lld elems: queued %+.3f ms, started %+.3f ms, finished %+.3f ms (vs backward end)\n",
                t.what.c_str(), (long long)t.elements, (t.queuedAt - stats.backwardEndAt) * 1e3,
                (t.startedAt - stats.backwardEndAt) * 1e3, (t.finishedAt - stats.backwardEndAt) * 1e3);
  std::printf("[ overlap  ] gpt width %lld depth %lld, %zu buckets: %d of %zu started before backward ended; "
              "communication %.3f ms, %.0f%% hidden behind backward\n",
              (long long)c.width, (long long)c.depth, nBuckets, startedEarly, nBuckets - 1,
              stats.commSeconds() * 1e3, stats.hiddenShare() * 100);
}

}  // namespace
}  // namespace train
}  // namespace braid
