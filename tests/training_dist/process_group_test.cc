// ProcessGroup on 1..4 ranks as threads: every collective against a reference, async
// Works and their timestamps, groups (send/recv pairs), split, and errors that name the
// op and the rank.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/training_dist/toy.h"

namespace braid {
namespace train {
namespace {

class PgTest : public ::testing::TestWithParam<int> {};

void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(PgTest, Collectives) {
  const int n = GetParam();
  expectNoErrors(toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    EXPECT_EQ(pg.rank(), r);
    EXPECT_EQ(pg.size(), n);
    const size_t count = 7;  // odd on purpose
    // allReduce: sum, max, avg (float), sum (double).
    std::vector<float> a(count);
    for (size_t i = 0; i < count; ++i) a[i] = float(r + 1) * float(i + 1);
    std::vector<float> s = a, mx = a, avg = a;
    pg.allReduce(s.data(), count);
    pg.allReduce(mx.data(), count, ReduceOp::kMax);
    pg.allReduce(avg.data(), count, ReduceOp::kAvg);
    const float tri = float(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i) {
      EXPECT_FLOAT_EQ(s[i], tri * float(i + 1));
      EXPECT_FLOAT_EQ(mx[i], float(n) * float(i + 1));
      EXPECT_FLOAT_EQ(avg[i], tri / float(n) * float(i + 1));
    }
    double d = 0.5 * r;
    pg.allReduce(&d, 1);
    EXPECT_DOUBLE_EQ(d, 0.5 * n * (n - 1) / 2);
    // allGather.
    std::vector<double> mine(3, double(r)), all(size_t(3 * n), -1);
    pg.allGather(mine.data(), all.data(), 3);
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 3; ++i) EXPECT_EQ(all[size_t(q * 3 + i)], q);
    // reduceScatter: block q of the sum lands on rank q.
    std::vector<float> in(size_t(2 * n)), out(2, -1);
    for (int i = 0; i < 2 * n; ++i) in[size_t(i)] = float(i + r);
    pg.reduceScatter(in.data(), out.data(), 2);
    for (int i = 0; i < 2; ++i) EXPECT_FLOAT_EQ(out[size_t(i)], float(n * (2 * r + i) + n * (n - 1) / 2));
    // broadcast from the last rank; reduce to rank 0.
    int64_t v = r == n - 1 ? 99 : r;
    pg.broadcast(&v, 1, n - 1);
    EXPECT_EQ(v, 99);
    float red = float(r), dst = -1;
    pg.reduceAsync(&red, &dst, 1, 0).wait();
    if (r == 0) {
          EXPECT_FLOAT_EQ(dst, float(n * (n - 1) / 2));
        }
    // A ring of send/recv in one group.
    float token = float(100 + r), got = -1;
    Work g = pg.group([&] {
      pg.sendAsync(&token, 1, (r + 1) % n);
      pg.recvAsync(&got, 1, (r + n - 1) % n);
    });
    g.wait();
    EXPECT_FLOAT_EQ(got, float(100 + (r + n - 1) % n));
    pg.synchronize();
  }));
}

TEST_P(PgTest, AsyncWorkTimestampsAndOrder) {
  const int n = GetParam();
  expectNoErrors(toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    std::vector<std::vector<float>> bufs(8, std::vector<float>(1000, float(r)));
    std::vector<Work> works;
    const double t0 = now();
    for (auto& b : bufs) works.push_back(pg.allReduceAsync(b.data(), b.data(), b.size()));
    for (size_t i = 0; i < works.size(); ++i) {
      works[i].wait();
      EXPECT_TRUE(works[i].done());
      EXPECT_EQ(works[i].name(), "allReduce");
      EXPECT_GE(works[i].queuedAt(), t0);
      EXPECT_GE(works[i].startedAt(), works[i].queuedAt());
      EXPECT_GE(works[i].finishedAt(), works[i].startedAt());
      // Stream order: op i+1 starts after op i finished.
      if (i > 0) {
          EXPECT_GE(works[i].startedAt(), works[i - 1].finishedAt());
        }
      EXPECT_FLOAT_EQ(bufs[i][999], float(n * (n - 1) / 2));
    }
    Work empty;
    EXPECT_TRUE(empty.done());
    empty.wait();
  }));
}

TEST_P(PgTest, SplitEvenOdd) {
  const int n = GetParam();
  expectNoErrors(toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    auto sub = pg.split(r % 2, r);
    ASSERT_TRUE(sub);
    EXPECT_EQ(sub->size(), (n + 1 - r % 2) / 2);
    EXPECT_EQ(sub->rank(), r / 2);
    double x = r;
    sub->allReduce(&x, 1);
    double want = 0;
    for (int q = r % 2; q < n; q += 2) want += q;
    EXPECT_DOUBLE_EQ(x, want);
    // NOCOLOR: rank 0 stays out.
    auto none = pg.split(r == 0 ? -1 : 0, r);
    EXPECT_EQ(none == nullptr, r == 0);
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, PgTest, ::testing::Values(1, 2, 3, 4));

TEST(ProcessGroupErrors, BadPeerThrowsNamingOpAndRank) {
  expectNoErrors(toy::runRanks(2, [&](int r, ProcessGroup& pg) {
    float x = 0;
    try {
      pg.sendAsync(&x, 1, 5);
      ADD_FAILURE() << "send to peer 5 of 2 did not throw";
    } catch (const DistError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("send"), std::string::npos) << what;
      EXPECT_NE(what.find("rank " + std::to_string(r)), std::string::npos) << what;
      EXPECT_NE(e.code(), ncclSuccess);
    }
    EXPECT_TRUE(pg.failed());
  }));
}

TEST(ProcessGroupErrors, ExceptionInsideGroupClosesIt) {
  expectNoErrors(toy::runRanks(1, [&](int, ProcessGroup& pg) {
    EXPECT_THROW(pg.group([&] { throw std::runtime_error("boom"); }), std::runtime_error);
    // The group was closed: a plain collective still works.
    double x = 3;
    pg.allReduce(&x, 1);
    EXPECT_EQ(x, 3);
  }));
}

}  // namespace
}  // namespace train
}  // namespace braid
