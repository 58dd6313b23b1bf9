// The tuner: NCCL_ALGO / NCCL_PROTO syntax, ranked choices on described layouts, and
// ncclGroupSimulateEnd's estimate.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "nccl.h"
#include "src/core/machine.h"
#include "src/core/tuner.h"

namespace braid {
namespace {

TEST(AlgoSyntax, ListsNegationPrefixesAndCase) {
  EXPECT_TRUE(algoAllowed("", Coll::kAllReduce, "ring", "Ring"));
  EXPECT_TRUE(algoAllowed("Ring", Coll::kAllReduce, "ring", "Ring"));
  EXPECT_TRUE(algoAllowed("RING", Coll::kBroadcast, "chain", "Ring")) << "NCCL alias";
  EXPECT_FALSE(algoAllowed("tree", Coll::kAllReduce, "ring", "Ring"));
  EXPECT_TRUE(algoAllowed("tree,ring", Coll::kAllReduce, "ring", "Ring"));
  EXPECT_TRUE(algoAllowed(" tree , ring ", Coll::kAllReduce, "ring", "Ring")) << "spaces";
  EXPECT_FALSE(algoAllowed("^ring", Coll::kAllReduce, "ring", "Ring"));
  EXPECT_TRUE(algoAllowed("^ring", Coll::kAllReduce, "tree", "Tree"));
  EXPECT_FALSE(algoAllowed("^tree,ring", Coll::kAllReduce, "ring", "Ring"));
  // Per-collective lists; the unprefixed list applies to the collectives not named.
  const std::string spec = "allreduce:tree;broadcast:^chain;ring";
  EXPECT_TRUE(algoAllowed(spec, Coll::kAllReduce, "tree", "Tree"));
  EXPECT_FALSE(algoAllowed(spec, Coll::kAllReduce, "ring", "Ring"));
  EXPECT_FALSE(algoAllowed(spec, Coll::kBroadcast, "chain", "Ring"));
  EXPECT_TRUE(algoAllowed(spec, Coll::kBroadcast, "direct", nullptr));
  EXPECT_TRUE(algoAllowed(spec, Coll::kAllGather, "ring", "Ring"));
  EXPECT_FALSE(algoAllowed(spec, Coll::kAllGather, "bruck", nullptr));
  EXPECT_TRUE(algoAllowed("AllReduce:Tree", Coll::kAllReduce, "tree", "Tree")) << "case";
  EXPECT_TRUE(algoAllowed("all_reduce:tree", Coll::kAllReduce, "tree", "Tree")) << "underscore";
  EXPECT_TRUE(algoAllowed("reducescatter:hier", Coll::kReduceScatter, "hier", nullptr));
}

TEST(AlgoSyntax, NamedMeansAPositiveListForThatCollective) {
  EXPECT_TRUE(algoNamed("direct", Coll::kAllReduce, "direct", nullptr));
  EXPECT_FALSE(algoNamed("", Coll::kAllReduce, "direct", nullptr));
  EXPECT_FALSE(algoNamed("allreduce:^ring", Coll::kAllReduce, "direct", nullptr))
      << "allowed by a negation, not named";
  EXPECT_FALSE(algoNamed("^ring;allgather:direct", Coll::kAllReduce, "direct", nullptr));
  EXPECT_TRUE(algoNamed("^ring;allgather:direct", Coll::kAllGather, "direct", nullptr));
}

TEST(ProtoSyntax, SameRules) {
  EXPECT_TRUE(protoAllowed("", Coll::kAllReduce, "LL"));
  EXPECT_TRUE(protoAllowed("LL,LL128", Coll::kAllReduce, "LL128"));
  EXPECT_FALSE(protoAllowed("LL,LL128", Coll::kAllReduce, "Simple"));
  EXPECT_FALSE(protoAllowed("^simple", Coll::kAllReduce, "Simple"));
  EXPECT_TRUE(protoAllowed("allreduce:LL;Simple", Coll::kAllReduce, "LL"));
  EXPECT_FALSE(protoAllowed("allreduce:LL;Simple", Coll::kAllGather, "LL"));
}

TuneInput input(Coll coll, uint64_t count, const RankLayout& layout, const CostModel& model) {
  TuneInput in;
  in.args.coll = coll;
  in.args.nranks = int(layout.nodeOf.size());
  in.args.count = count;
  in.args.typeSize = 4;
  in.args.layout = std::make_shared<RankLayout>(layout);
  in.model = model;
  in.geometry.nslots = 8;
  in.geometry.slotBytes = 512 << 10;
  in.minChannels = 1;
  in.maxChannels = 2;
  return in;
}

/// Two nodes of two ranks behind a slow, high-latency network (the shaped CI setup).
CostModel shapedModel() {
  CostModel m = defaultCostModel(0.125);  // 1 Gbit/s
  m.inter.alphaUs = 250;
  m.inter.gbps = 0.125;
  return m;
}

TEST(Choices, RankedCheapestFirstAndDeterministic) {
  const RankLayout l = RankLayout::fromNodes({0, 0, 1, 1});
  for (uint64_t count : {2ull, 1ull << 10, 1ull << 18, 1ull << 24}) {
    auto a = rankChoices(input(Coll::kAllReduce, count, l, shapedModel()));
    auto b = rankChoices(input(Coll::kAllReduce, count, l, shapedModel()));
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].algo, b[i].algo);
      EXPECT_EQ(std::string(a[i].protocol), b[i].protocol);
      if (i) {
        EXPECT_LE(a[i - 1].us, a[i].us) << "not sorted at " << i;
      }
    }
  }
}

TEST(Choices, NodeAwareAlgorithmsWinAcrossASlowNetwork) {
  // The ring crosses the slow link 2(n-1) times in lock step; hierarchical and tree
  // all-reduce cross it far fewer times: the model must prefer them at every size.
  const RankLayout l = RankLayout::fromNodes({0, 0, 1, 1});
  for (uint64_t count : {1ull << 12, 1ull << 16, 1ull << 20, 1ull << 24}) {
    auto c = rankChoices(input(Coll::kAllReduce, count, l, shapedModel()));
    const std::string best = c.front().algo->name;
    EXPECT_TRUE(best == "hier" || best == "tree" || best == "rabenseifner")
        << count << " elements: chose " << best;
    double ring = -1;
    for (const TuneChoice& ch : c)
      if (std::string(ch.algo->name) == "ring" && ring < 0) ring = ch.us;
    EXPECT_GT(ring, c.front().us * 1.2) << count;
  }
}

TEST(Choices, TheSwitchWinsLargeAllReducesAcrossASlowNetwork) {
  // With a switch each node sends and receives the message once: on 4 nodes the ring
  // moves 1.5x that and the double binary tree 2x (a head with a parent and two
  // children), on 3 nodes 1.33x and 1.5x, so in-network reduction must win from a few
  // MiB (measured on the shaped namespace cluster: docs/performance.md). (On 2 nodes
  // the tree and hier also move the message once per node: a tie in the model.)
  for (const RankLayout& l : {RankLayout::fromNodes({0, 1, 2, 3}),
                              RankLayout::fromNodes({0, 0, 1, 1, 2, 2}),
                              RankLayout::fromNodes({0, 0, 1, 1, 2, 2, 3, 3})}) {
    for (uint64_t count : {1ull << 20, 1ull << 22, 1ull << 24}) {
      TuneInput in = input(Coll::kAllReduce, count, l, shapedModel());
      in.args.collnet = true;
      auto c = rankChoices(in);
      const std::string best = c.front().algo->name;
      EXPECT_EQ(best.rfind("collnet", 0), 0u) << l.describe() << " " << count << ": " << best;
      double ring = -1;
      for (const TuneChoice& ch : c)
        if (std::string(ch.algo->name) == "ring" && ring < 0) ring = ch.us;
      EXPECT_GT(ring, c.front().us * 1.2) << l.describe() << " " << count;
    }
  }
  // Without a switch they are never candidates, whatever NCCL_ALGO says.
  TuneInput in = input(Coll::kAllReduce, 1 << 24, RankLayout::fromNodes({0, 1, 2, 3}), shapedModel());
  in.algoSpec = "allreduce:collnet_chain";
  for (const TuneChoice& ch : rankChoices(in)) EXPECT_FALSE(ch.algo->needsSwitch) << ch.algo->name;
}

TEST(Choices, OneNodeSmallMessagesGoOneShot) {
  const RankLayout l = RankLayout::flat(4);
  auto c = rankChoices(input(Coll::kAllReduce, 2, l, defaultCostModel(0)));
  EXPECT_STREQ(c.front().algo->name, "direct");
  auto big = rankChoices(input(Coll::kAllReduce, 1 << 24, l, defaultCostModel(0)));
  for (const TuneChoice& ch : big) EXPECT_STRNE(ch.algo->name, "direct") << "above the threshold";
}

TEST(Choices, AlgoAndProtoSpecsRestrict) {
  const RankLayout l = RankLayout::flat(4);
  TuneInput in = input(Coll::kAllReduce, 1 << 20, l, defaultCostModel(0));
  in.algoSpec = "allreduce:tree";
  in.protoSpec = "LL128";
  auto c = rankChoices(in);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_STREQ(c[0].algo->name, "tree");
  EXPECT_STREQ(c[0].protocol, "LL128");
  EXPECT_EQ(c[0].sliceBytes, 64u << 10);
  EXPECT_LE(c[0].params.chunkBytes, 8u * (64u << 10) / 2) << "chunks must fit half the FIFO";
  EXPECT_EQ(c[0].params.nChannels, 2) << "one channel per tree";
  in.algoSpec = "CollNet";  // allows nothing: every candidate again
  EXPECT_GT(rankChoices(in).size(), 1u);
  in.algoSpec = "direct";  // named explicitly: allowed above the small-message size
  EXPECT_STREQ(rankChoices(in).front().algo->name, "direct");
}

TEST(GroupSimulateEnd, EstimateGrowsWithSizeAndRunsNothing) {
  const int n = 2;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  std::vector<float> small(16, 1.0f), big(1 << 20, 1.0f), out(1 << 20, -3.0f);
  auto simulate = [&](size_t count) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(ncclAllReduce(big.data(), out.data(), count, ncclFloat32, ncclSum, comms[r],
                              nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess);
    return sim.estimatedTime;
  };
  const float t1 = simulate(small.size()), t2 = simulate(big.size());
  EXPECT_GT(t1, 0.0f);
  EXPECT_GT(t2, 10 * t1) << "4 MiB must be predicted far slower than 64 B";
  EXPECT_EQ(out[0], -3.0f) << "a simulated group must not run";
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

}  // namespace
}  // namespace braid
