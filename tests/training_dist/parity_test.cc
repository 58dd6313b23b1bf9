// Parity: DDP and ZeRO-1/2/3 on 2 and 4 data-parallel ranks (threads) produce the same
// per-step losses, gradient norms and final parameters as one process training on the
// same global batch (the toy model; the GPT parity lives in gpt_parity_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "tests/training_dist/strategies.h"
#include "tests/training_dist/toy.h"

namespace braid {
namespace train {
namespace {

constexpr int kSteps = 20;

struct RunResult {
  std::vector<double> losses, norms;
  std::vector<std::vector<float>> params;  // per rank, at the end
};

RunResult reference(const toy::Config& c) {
  toy::Reference<float> ref(c, toy::testAdam());
  RunResult out;
  for (int s = 0; s < kSteps; ++s) {
    double n = 0;
    out.losses.push_back(ref.step(s, &n));
    out.norms.push_back(n);
  }
  out.params.push_back(std::vector<float>(ref.model.store.flatValues(),
                                          ref.model.store.flatValues() + ref.model.store.flatSize()));
  return out;
}

RunResult parallel(const std::string& kind, int n, const toy::Config& c) {
  RunResult out;
  out.params.resize(size_t(n));
  std::mutex mu;
  auto errors = toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    toy::Model<float> m(c);
    auto dp = toy::makeStrategy<float>(kind, pg, m.store, toy::testAdam());
    std::vector<double> losses, norms;
    for (int s = 0; s < kSteps; ++s) {
      double nrm = 0;
      losses.push_back(toy::step(m, *dp, pg, s, &nrm));
      norms.push_back(nrm);
    }
    auto p = toy::fullParams(*dp, m.store);
    std::lock_guard<std::mutex> lock(mu);
    out.params[size_t(r)] = std::move(p);
    if (r == 0) {
      out.losses = losses;
      out.norms = norms;
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
  return out;
}

void expectRel(double a, double b, double tol, const std::string& what) {
  EXPECT_LE(std::fabs(a - b), tol * std::max(std::fabs(b), 1e-30)) << what << ": " << a << " vs " << b;
}

using Case = std::tuple<std::string, int, int>;  // strategy, dp ranks, microbatches

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, MatchesOneProcess) {
  const std::string kind = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  toy::Config c;
  c.micro = std::get<2>(GetParam());
  const RunResult ref = reference(c);
  const RunResult par = parallel(kind, n, c);
  ASSERT_EQ(par.losses.size(), size_t(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    expectRel(par.losses[size_t(s)], ref.losses[size_t(s)], 1e-5, "loss at step " + std::to_string(s));
    expectRel(par.norms[size_t(s)], ref.norms[size_t(s)], 1e-4, "grad norm at step " + std::to_string(s));
  }
  double maxLoss = 0, maxParam = 0;
  for (int s = 0; s < kSteps; ++s)
    maxLoss = std::max(maxLoss, std::fabs(par.losses[size_t(s)] - ref.losses[size_t(s)]) / ref.losses[size_t(s)]);
  for (const auto& p : par.params)
    for (size_t i = 0; i < p.size() && i < ref.params[0].size(); ++i)
      maxParam = std::max(maxParam, std::fabs(double(p[i]) - double(ref.params[0][i])));
  std::printf("[ parity   ] toy %s dp=%d micro=%d: max loss rel diff %.2e, max param abs diff %.2e\n", kind.c_str(), n,
              c.micro, maxLoss, maxParam);
  // The model learned something (the comparison is not between two frozen models).
  EXPECT_LT(ref.losses.back(), ref.losses.front() * 0.9);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(par.params[size_t(r)].size(), ref.params[0].size()) << "rank " << r;
    int bad = 0;
    for (size_t i = 0; i < ref.params[0].size(); ++i) {
      const double a = par.params[size_t(r)][i], b = ref.params[0][i];
      if (std::fabs(a - b) > 1e-5 * std::fabs(b) + 1e-6 && bad++ < 5)
        ADD_FAILURE() << "rank " << r << " param " << i << ": " << a << " vs " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Toy, Parity,
    ::testing::Values(Case{"ddp", 2, 1}, Case{"ddp", 4, 1}, Case{"ddp", 2, 2}, Case{"zero1", 2, 1},
                      Case{"zero1", 4, 1}, Case{"zero2", 2, 1}, Case{"zero2", 4, 1}, Case{"zero2", 2, 2},
                      Case{"zero3", 2, 1}, Case{"zero3", 4, 1}, Case{"zero3", 2, 2},
                      Case{"zero3-keep", 2, 2}, Case{"zero3-noprefetch", 4, 1}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string kind = std::get<0>(i.param);
      std::replace(kind.begin(), kind.end(), '-', '_');
      return kind + "_dp" + std::to_string(std::get<1>(i.param)) + "_m" +
             std::to_string(std::get<2>(i.param));
    });

}  // namespace
}  // namespace train
}  // namespace braid
