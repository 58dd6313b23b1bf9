// The cost model: a formula for every registered algorithm, sane shapes (monotonic in
// size, latency and bandwidth terms where they belong), and the model file format.
#include <gtest/gtest.h>

#include <string>

#include "algorithms/cost.h"
#include "algorithms/registry.h"
#include "src/core/machine.h"

namespace braid {
namespace {

CostQuery query(Coll coll, uint64_t bytes, const RankLayout& l, const CostModel& m) {
  CostQuery q;
  q.coll = coll;
  q.nranks = int(l.nodeOf.size());
  q.bytes = bytes;
  q.layout = &l;
  q.model = &m;
  q.chunkBytes = 2 << 20;
  q.sliceBytes = 512 << 10;
  return q;
}

TEST(CostModel, EveryAlgorithmHasAMonotonicFormula) {
  const CostModel m = defaultCostModel(1.25);
  for (const RankLayout& l : {RankLayout::flat(4), RankLayout::fromNodes({0, 0, 1, 1}),
                              RankLayout::fromNodes({0, 0, 1, 1, 2, 2})}) {
    for (const Algorithm& a : allAlgorithms()) {
      if (a.coll == Coll::kSendRecv) continue;
      double prev = 0;
      for (uint64_t bytes : {0ull, 8ull, 4096ull, 1ull << 20, 64ull << 20}) {
        const double us = predictUs(a.name, query(a.coll, bytes, l, m));
        ASSERT_GE(us, 0) << collName(a.coll) << "/" << a.name << " has no formula";
        EXPECT_GE(us, prev) << collName(a.coll) << "/" << a.name << " at " << bytes;
        prev = us;
      }
    }
  }
}

TEST(CostModel, HierarchicalNeedsUniformNodes) {
  const CostModel m = defaultCostModel(1.25);
  const RankLayout l = RankLayout::fromNodes({0, 0, 0, 1});
  EXPECT_LT(predictUs("hier", query(Coll::kAllReduce, 1 << 20, l, m)), 0);
  EXPECT_LT(predictUs("nosuch", query(Coll::kAllReduce, 1 << 20, l, m)), 0);
}

TEST(CostModel, LatencyAndBandwidthTerms) {
  CostModel m = defaultCostModel(1.25);
  const RankLayout flat = RankLayout::flat(8);
  // Ring all-reduce: 2(n-1) steps of latency; bandwidth 2(n-1)/n * S.
  const double t0 = predictUs("ring", query(Coll::kAllReduce, 8, flat, m));
  EXPECT_NEAR(t0, 14 * (m.stepUs + m.intra.alphaUs), 1.0);
  const double big = double(256 << 20);
  const double t1 = predictUs("ring", query(Coll::kAllReduce, uint64_t(big), flat, m));
  EXPECT_NEAR(t1, 2.0 * 7 / 8 * big / (m.intra.gbps * 1e3), 0.3 * t1);
  // Doubling the intra-node bandwidth nearly halves a large ring on one node.
  CostModel fast = m;
  fast.intra.gbps *= 2;
  fast.reduceGbps *= 2;
  const double t2 = predictUs("ring", query(Coll::kAllReduce, uint64_t(big), flat, fast));
  EXPECT_NEAR(t2, t1 / 2, 0.1 * t1);
  // Across nodes the ring is paced by the network.
  const RankLayout two = RankLayout::fromNodes({0, 0, 0, 0, 1, 1, 1, 1});
  EXPECT_GT(predictUs("ring", query(Coll::kAllReduce, uint64_t(big), two, m)), 3 * t1);
}

TEST(CostModel, FileFormat) {
  CostModel m = defaultCostModel(0);
  std::string err;
  ASSERT_TRUE(m.parse("# calibrated\ninter_alpha_us = 120\ninter_gbps=0.1 # shaped\n", &err))
      << err;
  EXPECT_DOUBLE_EQ(m.inter.alphaUs, 120);
  EXPECT_DOUBLE_EQ(m.inter.gbps, 0.1);
  CostModel back = defaultCostModel(0);
  ASSERT_TRUE(back.parse(m.toString(), &err)) << err;
  EXPECT_EQ(back.toString(), m.toString());
  for (const char* bad : {"inter_gbps", "inter_gbps=", "inter_gbps=fast", "inter_gbps=-1",
                          "warp_speed=9", "inter_gbps=1x"}) {
    CostModel before = m;
    EXPECT_FALSE(m.parse(bad, &err)) << bad;
    EXPECT_NE(err.find("line 1"), std::string::npos) << err;
    EXPECT_EQ(m.toString(), before.toString()) << "a failed parse must not change the model";
  }
}

TEST(Layout, FromNodesAndRing) {
  const RankLayout l = RankLayout::fromNodes({7, 3, 7, 3, 9});
  EXPECT_EQ(l.nNodes, 3);
  EXPECT_EQ(l.nodeOf, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(l.localRank, (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(l.ring, (std::vector<int>{0, 2, 1, 3, 4}));
  EXPECT_FALSE(l.uniform());
  EXPECT_EQ(l.describe(), "3 nodes (2,2,1 ranks)");
  EXPECT_EQ(l.ringPosition(3), 3);
  const RankLayout o = RankLayout::fromNodes({0, 0, 0}, {2, 0, 1});
  EXPECT_EQ(o.ring, (std::vector<int>{1, 2, 0})) << "intra-node order key";
  EXPECT_EQ(RankLayout::flat(3).describe(), "1 node(s) x 3 rank(s)");
}

}  // namespace
}  // namespace braid
