// Rank layouts (nodes) and the node-aware builders: every collective algorithm
// simulated over uniform, interleaved and non-uniform layouts (the hierarchical ones
// must run on uniform layouts and decline the others, the registry's fallback then
// being correct), and the shapes that make them node-aware: the ring crosses each node
// boundary once, hier all-reduce sends 1/L of the data between nodes, hier all-to-all
// talks to N-1 remote ranks, hier all-gather / reduce-scatter send the minimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/patterns/ring.h"
#include "tests/algorithms/sim_case.h"

namespace braid {
namespace algotest {
namespace {

struct LayoutCase {
  const char* name;
  std::vector<int> nodes;  ///< rank -> node id
};

const std::vector<LayoutCase>& layoutCases() {
  static const std::vector<LayoutCase> cases = {
      {"1x4", {0, 0, 0, 0}},
      {"4x1", {0, 1, 2, 3}},
      {"2x2", {0, 0, 1, 1}},
      {"3x2", {0, 0, 1, 1, 2, 2}},
      {"2x3", {0, 0, 0, 1, 1, 1}},
      {"4x2", {0, 0, 1, 1, 2, 2, 3, 3}},
      {"inter2x2", {0, 1, 0, 1}},
      {"inter3x2", {0, 1, 2, 0, 1, 2}},
      {"uneven3_1", {0, 0, 0, 1}},
      {"uneven1_3_1", {0, 1, 1, 1, 2}},
  };
  return cases;
}

std::shared_ptr<const RankLayout> makeLayout(const std::vector<int>& nodes) {
  return std::make_shared<const RankLayout>(RankLayout::fromNodes(nodes));
}

/// The builders that need nodes of equal size (hierarchical and in-network ones).
bool isHier(const Algorithm& a) { return std::string(a.name) == "hier" || usesSwitch(&a); }

std::vector<int> collectiveAlgos() {
  std::vector<int> out;
  const auto& all = allAlgorithms();
  // Not the direct-access algorithms: they do not look at the layout (collectives_test.cc
  // sweeps them).
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].coll != Coll::kSendRecv && !all[i].needsPeerAccess) out.push_back(int(i));
  return out;
}

std::vector<int> rootsFor(Coll coll, int n) {
  if (!isRooted(coll)) return {0};
  std::set<int> roots = {0, n - 1, n / 2};
  return std::vector<int>(roots.begin(), roots.end());
}

// ---- every algorithm over every layout -------------------------------------------

class LayoutSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(LayoutSweep, CorrectOrDeclinedWithACorrectFallback) {
  const Algorithm* algo = &allAlgorithms()[std::get<0>(GetParam())];
  const LayoutCase& lc = layoutCases()[std::get<1>(GetParam())];
  const std::shared_ptr<const RankLayout> layout = makeLayout(lc.nodes);
  const int n = int(lc.nodes.size());
  const bool mustDecline = isHier(*algo) && !layout->uniform();
  std::set<uint64_t> counts = {0, 1, uint64_t(n - 1), 13, 97, 1009};
  int k = 0;  // rotates types, ops and setups across cases
  for (uint64_t count : counts) {
    for (int root : rootsFor(algo->coll, n)) {
      for (bool inPlace : {false, true}) {
        ++k;
        CaseSpec spec;
        spec.algo = algo;
        spec.nranks = n;
        spec.count = count;
        spec.root = root;
        spec.inPlace = inPlace;
        spec.layout = layout;
        spec.type = typeAt((k * 5) % kNumTypes).type;
        spec.op = opAt(k % kNumOps);
        int setup = k % kNumSetups;
        if (setup == 2 && count > 97) setup = 0;  // 8-byte slots: keep it quick
        spec.setup = setupAt(setup);
        spec.allowDirect = k % 3 == 0;
        CaseResult res = runCase(spec);
        if (mustDecline) {
          EXPECT_EQ(res.status, CaseStatus::kUnsupported)
              << spec.describe() << ": a hierarchical builder accepted a non-uniform layout";
          // What the registry runs instead: the collective's default, built by buildPlan.
          PlanArgs args;
          args.coll = algo->coll;
          args.nranks = n;
          args.count = count;
          args.typeSize = typeInfo(spec.type).size;
          args.root = root;
          args.inPlace = inPlace;
          args.layout = layout;
          Plan plan;
          ASSERT_EQ(buildPlan(args, spec.setup.params, algo, &plan), ncclSuccess);
          EXPECT_EQ(plan.algorithm, defaultAlgorithm(algo->coll)->name);
          spec.algo = defaultAlgorithm(algo->coll);
          res = runCase(spec);
        }
        EXPECT_EQ(res.status, CaseStatus::kPassed) << res.message;
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LayoutSweep,
    ::testing::Combine(::testing::ValuesIn(collectiveAlgos()),
                       ::testing::Range(0, int(layoutCases().size()))),
    [](const ::testing::TestParamInfo<LayoutSweep::ParamType>& info) {
      const Algorithm& a = allAlgorithms()[std::get<0>(info.param)];
      return std::string(collName(a.coll)) + "_" + a.name + "_" +
             layoutCases()[std::get<1>(info.param)].name;
    });

// Larger uniform layouts and counts for the hierarchical builders: many loops, several
// channels, every op.
TEST(HierBuilders, LargerLayoutsManyLoopsEveryOp) {
  const std::vector<RankLayout> layouts = {
      RankLayout::fromNodes({0, 0, 0, 1, 1, 1, 2, 2, 2}),  // 3x3
      RankLayout::fromNodes({0, 1, 2, 3, 0, 1, 2, 3}),     // 4x2, interleaved
      RankLayout::fromNodes({0, 0, 0, 0, 1, 1, 1, 1}),     // 2x4
      // 2x3 with each node's ranks in descending intra-node order (ring 2,1,0,5,4,3).
      RankLayout::fromNodes({0, 0, 0, 1, 1, 1}, {2, 1, 0, 2, 1, 0}),
  };
  int k = 0;
  for (const Algorithm& a : allAlgorithms()) {
    if (!isHier(a)) continue;
    for (const RankLayout& layout : layouts) {
      for (uint64_t count : {uint64_t(5003), uint64_t(40000)}) {
        ++k;
        CaseSpec spec;
        spec.algo = &a;
        spec.nranks = int(layout.nodeOf.size());
        spec.count = a.coll == Coll::kAllReduce ? count : count / layout.nodeOf.size() + 1;
        spec.layout = std::make_shared<const RankLayout>(layout);
        spec.type = typeAt(k % kNumTypes).type;
        spec.op = opAt(k % kNumOps);
        spec.inPlace = k % 2 == 0;
        spec.setup = setupAt(k % 2 ? 1 : 3);
        spec.allowDirect = !spec.inPlace;
        CaseResult res = runCase(spec);
        EXPECT_EQ(res.status, CaseStatus::kPassed) << res.message;
      }
    }
  }
  // The ring builders on the reordered layout too.
  for (const Algorithm& a : allAlgorithms()) {
    const std::string name = a.name;
    if (name != "ring" && name != "chain") continue;
    CaseSpec spec;
    spec.algo = &a;
    spec.nranks = 6;
    spec.count = 1009;
    spec.root = 4;
    spec.op = Op::kAvg;
    spec.layout = std::make_shared<const RankLayout>(layouts.back());
    ASSERT_EQ(spec.layout->ring, (std::vector<int>{2, 1, 0, 5, 4, 3}));
    CaseResult res = runCase(spec);
    EXPECT_EQ(res.status, CaseStatus::kPassed) << res.message;
  }
}

// ---- plan shapes -----------------------------------------------------------------

/// Every rank's plan of `algo` (which must accept the call).
std::vector<Plan> buildAll(const Algorithm* algo, const std::shared_ptr<const RankLayout>& layout,
                           int n, uint64_t count, int root = 0,
                           PlanParams params = PlanParams{}) {
  std::vector<Plan> plans(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    PlanArgs args;
    args.coll = algo->coll;
    args.nranks = n;
    args.rank = r;
    args.count = count;
    args.typeSize = 4;
    args.root = root;
    args.layout = layout;
    EXPECT_TRUE(algo->build(args, params, &plans[size_t(r)])) << algo->name << " rank " << r;
  }
  return plans;
}

/// Elements `plan` sends to each peer.
std::map<int, uint64_t> sentTo(const Plan& plan) {
  std::map<int, uint64_t> out;
  for (const Program& prog : plan.programs)
    for (const Step& s : prog.steps)
      if (s.sendPeer >= 0) out[s.sendPeer] += s.count();
  return out;
}

/// Connections (sender, receiver) between different nodes used by the plans.
std::set<std::pair<int, int>> crossings(const std::vector<Plan>& plans, const RankLayout& nodes) {
  std::set<std::pair<int, int>> out;
  for (size_t r = 0; r < plans.size(); ++r)
    for (const auto& kv : sentTo(plans[r]))
      if (nodes.nodeOf[r] != nodes.nodeOf[size_t(kv.first)]) out.insert({int(r), kv.first});
  return out;
}

const Algorithm* algo(Coll c, const char* name) {
  const Algorithm* a = findAlgorithm(c, name);
  EXPECT_NE(a, nullptr) << collName(c) << " " << name;
  return a;
}

TEST(LayoutRing, RingFollowsTheLayoutOrder) {
  const RankLayout l = RankLayout::fromNodes({0, 1, 0, 1});
  ASSERT_EQ(l.ring, (std::vector<int>{0, 2, 1, 3}));
  const patterns::Ring ring(l, 2);
  EXPECT_EQ(ring.position(), 1);
  EXPECT_EQ(ring.next(), 1);
  EXPECT_EQ(ring.prev(), 0);
  EXPECT_EQ(ring.reduceBlock(3), 2);  // step n-1 completes our own block
  EXPECT_EQ(ring.gatherBlock(0), 2);  // all-gather starts with our own block
  const patterns::Chain chain = patterns::Chain::endingAt(ring, 3);  // 0, 2, 1, 3
  EXPECT_EQ(chain.position(), 1);
  EXPECT_EQ(chain.prev(), 0);
  EXPECT_EQ(chain.next(), 1);
  // A ring that is not a permutation falls back to the identity.
  RankLayout bad = l;
  bad.ring = {0, 0, 1, 3};
  const patterns::Ring identity(bad, 2);
  EXPECT_EQ(identity.next(), 3);
  EXPECT_EQ(identity.prev(), 1);
}

TEST(LayoutRing, InterleavedRingCrossesNodesTwice) {
  const auto inter = makeLayout({0, 1, 0, 1});
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}) {
    const Algorithm* a = algo(c, "ring");
    const std::vector<Plan> plans = buildAll(a, inter, 4, 1000);
    EXPECT_EQ(crossings(plans, *inter).size(), 2u) << collName(c);
    // The same builder on one node (identity ring) would cross four times here.
    EXPECT_EQ(crossings(buildAll(a, nullptr, 4, 1000), *inter).size(), 4u) << collName(c);
  }
  // Chains along the ring: 0 -> 2 -> 1 -> 3 crosses once.
  EXPECT_EQ(crossings(buildAll(algo(Coll::kBroadcast, "chain"), inter, 4, 1000, 0), *inter).size(),
            1u);
  EXPECT_EQ(crossings(buildAll(algo(Coll::kReduce, "chain"), inter, 4, 1000, 3), *inter).size(),
            1u);
}

TEST(LayoutRing, FlatAndContiguousLayoutsGiveTheIdentityRingPlans) {
  for (const Algorithm& a : allAlgorithms()) {
    const std::string name = a.name;
    if (name != "ring" && name != "chain") continue;
    const std::vector<Plan> none = buildAll(&a, nullptr, 4, 1000, 1);
    const std::vector<Plan> contiguous = buildAll(&a, makeLayout({7, 7, 3, 3}), 4, 1000, 1);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(none[size_t(r)].toString(), contiguous[size_t(r)].toString()) << a.name;
      for (const auto& kv : sentTo(none[size_t(r)])) EXPECT_EQ(kv.first, (r + 1) % 4) << a.name;
    }
  }
}

TEST(HierShape, AllReduceSendsOneLthBetweenNodes) {
  const int N = 2, L = 4, n = N * L;
  const uint64_t count = 4096;  // one loop, divisible by n
  const auto layout = makeLayout({0, 1, 0, 1, 0, 1, 0, 1});
  const std::vector<Plan> hier = buildAll(algo(Coll::kAllReduce, "hier"), layout, n, count);
  const std::vector<Plan> ring = buildAll(algo(Coll::kAllReduce, "ring"), layout, n, count);
  for (int r = 0; r < n; ++r) {
    uint64_t inter = 0, biggest = 0;
    for (const Program& prog : hier[size_t(r)].programs)
      for (const Step& s : prog.steps)
        if (s.sendPeer >= 0 && layout->nodeOf[size_t(s.sendPeer)] != layout->nodeOf[size_t(r)]) {
          inter += s.count();
          biggest = std::max(biggest, s.count());
        }
    // A ring all-reduce among N ranks of our block of count / L elements.
    EXPECT_EQ(inter, 2 * uint64_t(N - 1) * count / uint64_t(N * L)) << "rank " << r;
    EXPECT_LE(biggest, count / uint64_t(n)) << "rank " << r;
    // Each rank's inter-node peer is the one with its local rank.
    for (const auto& kv : sentTo(hier[size_t(r)])) {
      if (layout->nodeOf[size_t(kv.first)] != layout->nodeOf[size_t(r)]) {
        EXPECT_EQ(layout->localRank[size_t(kv.first)], layout->localRank[size_t(r)]);
      }
    }
  }
  // Between the nodes: hier uses L rings of 1/L of the data, the flat ring one ring of
  // all of it; the bytes between the nodes are the same, the slow hops per ring fewer.
  uint64_t hierTotal = 0, ringTotal = 0;
  for (int r = 0; r < n; ++r) {
    for (const auto& kv : sentTo(hier[size_t(r)]))
      if (layout->nodeOf[size_t(kv.first)] != layout->nodeOf[size_t(r)]) hierTotal += kv.second;
    for (const auto& kv : sentTo(ring[size_t(r)]))
      if (layout->nodeOf[size_t(kv.first)] != layout->nodeOf[size_t(r)]) ringTotal += kv.second;
  }
  EXPECT_EQ(hierTotal, 2 * uint64_t(N - 1) * count);
  EXPECT_LE(hierTotal, ringTotal);
}

TEST(HierShape, AllToAllTalksToOneRankPerRemoteNode) {
  const uint64_t count = 100;
  for (const std::vector<int>& nodes :
       {std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}, std::vector<int>{0, 1, 2, 0, 1, 2}}) {
    const auto layout = makeLayout(nodes);
    const int n = int(nodes.size()), N = layout->nNodes, L = layout->ranksPerNode();
    const std::vector<Plan> hier = buildAll(algo(Coll::kAllToAll, "hier"), layout, n, count);
    const std::vector<Plan> flat = buildAll(algo(Coll::kAllToAll, "pairwise"), layout, n, count);
    for (int r = 0; r < n; ++r) {
      std::set<int> remote;
      uint64_t bytes = 0;
      for (const auto& kv : sentTo(hier[size_t(r)]))
        if (layout->nodeOf[size_t(kv.first)] != layout->nodeOf[size_t(r)]) {
          remote.insert(kv.first);
          bytes += kv.second;
        }
      EXPECT_EQ(int(remote.size()), N - 1) << "rank " << r;
      EXPECT_EQ(bytes, uint64_t((N - 1) * L) * count) << "rank " << r;  // all, once
      std::set<int> flatRemote;
      for (const auto& kv : sentTo(flat[size_t(r)]))
        if (layout->nodeOf[size_t(kv.first)] != layout->nodeOf[size_t(r)])
          flatRemote.insert(kv.first);
      EXPECT_EQ(int(flatRemote.size()), n - L) << "rank " << r;
    }
  }
}

TEST(HierShape, AllGatherAndReduceScatterSendTheMinimumBetweenNodes) {
  const uint64_t count = 60;
  const auto layout = makeLayout({0, 0, 0, 1, 1, 1, 2, 2, 2});
  const int n = 9, N = 3, L = 3;
  for (Coll c : {Coll::kAllGather, Coll::kReduceScatter}) {
    const std::vector<Plan> hier = buildAll(algo(c, "hier"), layout, n, count);
    for (int v = 0; v < N; ++v) {
      uint64_t out = 0;
      for (int r : layout->nodeRanks[size_t(v)])
        for (const auto& kv : sentTo(hier[size_t(r)]))
          if (layout->nodeOf[size_t(kv.first)] != v) out += kv.second;
      // Every block of (or for) each of the other nodes' L ranks crosses once.
      EXPECT_EQ(out, uint64_t((N - 1) * L) * count) << collName(c) << " node " << v;
    }
  }
}

TEST(HierShape, DeclinesNonUniformLayoutsAndFallsBack) {
  for (const Algorithm& a : allAlgorithms()) {
    if (!isHier(a)) continue;
    PlanArgs args;
    args.coll = a.coll;
    args.nranks = 4;
    args.rank = 3;
    args.count = 100;
    args.layout = makeLayout({0, 0, 0, 1});
    args.collnet = usesSwitch(&a);
    Plan plan;
    EXPECT_FALSE(a.build(args, PlanParams{}, &plan)) << collName(a.coll);
    plan = Plan{};
    ASSERT_EQ(buildPlan(args, PlanParams{}, &a, &plan), ncclSuccess);
    EXPECT_EQ(plan.algorithm, defaultAlgorithm(a.coll)->name);
    // A uniform layout is accepted.
    args.layout = makeLayout({0, 0, 1, 1});
    plan = Plan{};
    EXPECT_TRUE(a.build(args, PlanParams{}, &plan)) << collName(a.coll);
  }
}

}  // namespace
}  // namespace algotest
}  // namespace braid
