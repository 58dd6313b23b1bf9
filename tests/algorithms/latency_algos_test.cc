// The latency-optimal builders: the double binary tree all-reduce, Rabenseifner
// all-reduce, Bruck all-gather and Bruck all-to-all. Tree shapes, simulated runs on
// multi-node and permuted layouts (collectives_test.cc covers the flat sweep), and the
// shapes of their plans (rounds, message sizes, channels, pipelining).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "algorithms/patterns/tree.h"
#include "algorithms/registry.h"
#include "tests/algorithms/sim_case.h"

namespace braid {
namespace algotest {
namespace {

using patterns::BinaryTreeLinks;
using patterns::TreeLinks;

int floorLog2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}
int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// ---- tree shapes ---------------------------------------------------------------------

/// Checks that `links` (one entry per node) is one tree: a single root, parent and
/// child links agree, every node reachable from the root. Returns the depth (edges).
int checkTree(const std::vector<TreeLinks>& links, const std::string& what) {
  const int n = int(links.size());
  int root = -1;
  for (int x = 0; x < n; ++x) {
    if (links[size_t(x)].parent < 0) {
      EXPECT_EQ(root, -1) << what << ": two roots " << root << " and " << x;
      root = x;
    } else {
      const auto& kids = links[size_t(links[size_t(x)].parent)].children;
      EXPECT_EQ(std::count(kids.begin(), kids.end(), x), 1)
          << what << ": " << x << " is not a child of its parent " << links[size_t(x)].parent;
    }
    for (int c : links[size_t(x)].children) {
      EXPECT_TRUE(c >= 0 && c < n) << what;
      if (c >= 0 && c < n) {
        EXPECT_EQ(links[size_t(c)].parent, x) << what << ": child " << c;
      }
    }
  }
  EXPECT_GE(root, 0) << what << ": no root";
  if (root < 0) return -1;
  // Breadth-first from the root: every node once.
  std::vector<int> depth(static_cast<size_t>(n), -1);
  std::vector<int> queue = {root};
  depth[size_t(root)] = 0;
  int maxDepth = 0, seen = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const int x = queue[i];
    ++seen;
    maxDepth = std::max(maxDepth, depth[size_t(x)]);
    for (int c : links[size_t(x)].children) {
      if (c < 0 || c >= n) continue;
      EXPECT_EQ(depth[size_t(c)], -1) << what << ": " << c << " reached twice";
      if (depth[size_t(c)] != -1) return -1;
      depth[size_t(c)] = depth[size_t(x)] + 1;
      queue.push_back(c);
    }
  }
  EXPECT_EQ(seen, n) << what << ": the tree does not span all nodes";
  return maxDepth;
}

std::vector<TreeLinks> binaryTree(int n, int tree) {
  std::vector<TreeLinks> out(static_cast<size_t>(n));
  for (int x = 0; x < n; ++x) {
    const BinaryTreeLinks b = patterns::doubleBinaryTree(n, x, tree);
    out[size_t(x)].parent = b.parent;
    for (int c : b.child)
      if (c >= 0) out[size_t(x)].children.push_back(c);
  }
  return out;
}

TEST(DoubleBinaryTree, BothTreesSpanWithAtMostTwoChildrenAndLogDepth) {
  for (int n = 1; n <= 70; ++n) {
    for (int t = 0; t < 2; ++t) {
      const std::string what = "n=" + std::to_string(n) + " tree " + std::to_string(t);
      const std::vector<TreeLinks> links = binaryTree(n, t);
      for (const TreeLinks& l : links) EXPECT_LE(l.children.size(), 2u) << what;
      const int depth = checkTree(links, what);
      EXPECT_LE(depth, floorLog2(n)) << what;
      if (HasFailure()) return;
    }
  }
}

TEST(DoubleBinaryTree, TreesAreComplementary) {
  for (int n = 2; n <= 32; ++n) {
    int leafInBoth = 0;
    for (int x = 0; x < n; ++x) {
      const bool leaf0 = patterns::doubleBinaryTree(n, x, 0).isLeaf();
      const bool leaf1 = patterns::doubleBinaryTree(n, x, 1).isLeaf();
      EXPECT_TRUE(leaf0 || leaf1) << "n=" << n << ": position " << x << " interior in both";
      if (leaf0 && leaf1) ++leafInBoth;
    }
    // An odd count forces exactly one position to be a leaf in both trees.
    EXPECT_EQ(leafInBoth, n % 2) << "n=" << n;
    // Different roots spread the roots' extra work.
    int roots[2] = {-1, -1};
    for (int t = 0; t < 2; ++t)
      for (int x = 0; x < n; ++x)
        if (patterns::doubleBinaryTree(n, x, t).parent < 0) roots[t] = x;
    EXPECT_NE(roots[0], roots[1]) << "n=" << n;
  }
}

std::vector<int> nodesOf(int nodes, int perNode) {
  std::vector<int> ids;
  for (int node = 0; node < nodes; ++node)
    for (int i = 0; i < perNode; ++i) ids.push_back(node);
  return ids;
}

/// The layouts the simulated cases run on.
std::vector<std::shared_ptr<RankLayout>> testLayouts() {
  std::vector<std::shared_ptr<RankLayout>> out;
  auto add = [&](RankLayout l) { out.push_back(std::make_shared<RankLayout>(std::move(l))); };
  add(RankLayout::fromNodes(nodesOf(2, 2)));
  add(RankLayout::fromNodes(nodesOf(3, 2)));
  add(RankLayout::fromNodes(nodesOf(2, 3)));
  add(RankLayout::fromNodes(nodesOf(4, 2)));
  add(RankLayout::fromNodes({0, 1, 0, 1}));           // interleaved placement
  add(RankLayout::fromNodes({0, 0, 0, 1}));           // non-uniform
  add(RankLayout::fromNodes({5, 3, 5, 9, 3, 5, 9}));  // 3 nodes (3,2,2), scattered
  add(RankLayout::fromNodes({0, 1, 2, 3, 4}));        // one rank per node
  add(RankLayout::fromNodes({0, 0, 0, 0, 0}, {4, 2, 0, 3, 1}));  // one node, permuted ring
  add(RankLayout::fromNodes(nodesOf(2, 4), {1, 0, 3, 2, 7, 6, 5, 4}));  // permuted in nodes
  return out;
}

TEST(LayoutTree, SpansEveryLayoutWithChainsInsideNodes) {
  for (const auto& layout : testLayouts()) {
    const int n = int(layout->nodeOf.size());
    for (int t = 0; t < 2; ++t) {
      const std::string what = layout->describe() + " tree " + std::to_string(t);
      std::vector<TreeLinks> links(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) links[size_t(r)] = patterns::layoutTree(*layout, r, t);
      checkTree(links, what);
      for (int r = 0; r < n; ++r) {
        const TreeLinks& l = links[size_t(r)];
        const int node = layout->nodeOf[size_t(r)];
        const int local = layout->localRank[size_t(r)];
        int crossNode = 0;
        for (int c : l.children) crossNode += layout->nodeOf[size_t(c)] != node;
        EXPECT_LE(crossNode, 2) << what << " rank " << r;
        EXPECT_LE(l.children.size(), 3u) << what << " rank " << r;
        if (layout->nNodes == 1) {  // one node: the binary tree over the ring
          EXPECT_LE(l.children.size(), 2u) << what << " rank " << r;
        } else if (local > 0) {  // inside the node's chain, below its predecessor
          EXPECT_EQ(l.parent, layout->nodeRanks[size_t(node)][size_t(local - 1)]) << what;
          EXPECT_EQ(crossNode, 0) << what << " rank " << r;
        } else if (l.parent >= 0) {  // a head: joins another node's head
          EXPECT_NE(layout->nodeOf[size_t(l.parent)], node) << what;
          EXPECT_EQ(layout->localRank[size_t(l.parent)], 0) << what;
        }
      }
      if (HasFailure()) return;
    }
  }
}

// ---- simulated runs on layouts ---------------------------------------------------------

std::vector<const Algorithm*> latencyAlgos() {
  return {findAlgorithm(Coll::kAllReduce, "tree"), findAlgorithm(Coll::kAllReduce, "rabenseifner"),
          findAlgorithm(Coll::kAllGather, "bruck"), findAlgorithm(Coll::kAllToAll, "bruck")};
}

class LatencyAlgoLayouts : public ::testing::TestWithParam<int> {};

TEST_P(LatencyAlgoLayouts, EveryLayoutCountOpAndSetup) {
  const Algorithm* algo = latencyAlgos()[size_t(GetParam())];
  ASSERT_NE(algo, nullptr);
  int k = 0;
  for (const auto& layout : testLayouts()) {
    const int n = int(layout->nodeOf.size());
    for (uint64_t count : {uint64_t(1), uint64_t(n + 1), uint64_t(97), uint64_t(1009)}) {
      for (bool inPlace : {false, true}) {
        ++k;
        CaseSpec spec;
        spec.algo = algo;
        spec.nranks = n;
        spec.count = count;
        spec.layout = layout;
        spec.inPlace = inPlace;
        spec.type = typeAt(k % kNumTypes).type;
        spec.op = opAt(k % kNumOps);
        int setup = k % kNumSetups;
        if (setup == 2 && count > 97) setup = 0;  // 8-byte slots: keep it quick
        spec.setup = setupAt(setup);
        spec.allowDirect = !inPlace && k % 3 == 0;
        const CaseResult res = runCase(spec);
        EXPECT_EQ(res.status, CaseStatus::kPassed) << res.message;
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Latency, LatencyAlgoLayouts, ::testing::Range(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           const Algorithm* a = latencyAlgos()[size_t(info.param)];
                           return std::string(collName(a->coll)) + "_" + a->name;
                         });

// Every op on an uneven multi-node layout with the smallest FIFOs (Avg and PreMulSum
// check the pre/post flags: once per element per rank, once at the end).
TEST(LatencyAlgoOps, TreeAndRabenseifnerEveryOpOnNodes) {
  auto layout = std::make_shared<RankLayout>(RankLayout::fromNodes({0, 0, 0, 1, 1, 2}));
  for (const char* name : {"tree", "rabenseifner"}) {
    for (int o = 0; o < kNumOps; ++o) {
      for (int setup : {0, 1, 3}) {
        CaseSpec spec;
        spec.algo = findAlgorithm(Coll::kAllReduce, name);
        spec.nranks = 6;
        spec.count = 301;
        spec.layout = layout;
        spec.op = opAt(o);
        spec.type = o % 2 ? ncclInt32 : ncclFloat32;
        spec.inPlace = setup == 1;
        spec.setup = setupAt(setup);
        const CaseResult res = runCase(spec);
        EXPECT_EQ(res.status, CaseStatus::kPassed) << res.message;
      }
    }
  }
}

// ---- plan shapes ---------------------------------------------------------------------

Plan build(const Algorithm* algo, int n, int rank, uint64_t count, PlanParams params,
           std::shared_ptr<const RankLayout> layout = nullptr, bool inPlace = false) {
  PlanArgs args;
  args.coll = algo->coll;
  args.nranks = n;
  args.rank = rank;
  args.count = count;
  args.typeSize = 4;
  args.inPlace = inPlace;
  args.layout = std::move(layout);
  Plan plan;
  EXPECT_TRUE(algo->build(args, params, &plan));
  return plan;
}

bool sends(StepKind k) {
  return k == StepKind::kSend || k == StepKind::kRecvReduceSend ||
         k == StepKind::kRecvReduceCopySend || k == StepKind::kRecvCopySend;
}
bool recvs(StepKind k) { return k != StepKind::kSend && k != StepKind::kCopy; }

std::set<int> sendPeers(const Plan& plan) {
  std::set<int> out;
  for (const Program& p : plan.programs)
    for (const Step& s : p.steps)
      if (sends(s.kind)) out.insert(s.sendPeer);
  return out;
}
std::set<int> recvPeers(const Plan& plan) {
  std::set<int> out;
  for (const Program& p : plan.programs)
    for (const Step& s : p.steps)
      if (recvs(s.kind)) out.insert(s.recvPeer);
  return out;
}
/// Elements sent, per send step, in program order.
std::vector<uint64_t> sendSizes(const Plan& plan) {
  std::vector<uint64_t> out;
  for (const Program& p : plan.programs)
    for (const Step& s : p.steps)
      if (sends(s.kind)) out.push_back(s.count());
  return out;
}

const PlanParams kBig{1 << 20, 1};

TEST(BruckShape, AllGatherTakesCeilLog2Rounds) {
  const Algorithm* algo = findAlgorithm(Coll::kAllGather, "bruck");
  for (int n = 2; n <= 17; ++n) {
    for (int r = 0; r < n; ++r) {
      const Plan plan = build(algo, n, r, 5, kBig);
      // One peer per round and direction: r - 2^k and r + 2^k.
      EXPECT_EQ(sendPeers(plan).size(), size_t(ceilLog2(n))) << "n=" << n << " rank " << r;
      EXPECT_EQ(recvPeers(plan).size(), size_t(ceilLog2(n))) << "n=" << n << " rank " << r;
      EXPECT_EQ(sendPeers(plan).count((r + n - 1) % n), 1u) << "round 0 goes to r-1";
      // Blocks land in place: at most two steps (a wrapped range) per round and way.
      EXPECT_LE(sendSizes(plan).size(), size_t(2 * ceilLog2(n))) << "n=" << n;
    }
  }
}

TEST(BruckShape, AllToAllSendsOneMessagePerRound) {
  const Algorithm* algo = findAlgorithm(Coll::kAllToAll, "bruck");
  for (int n = 2; n <= 17; ++n) {
    for (int r = 0; r < n; r += 3) {
      for (bool inPlace : {false, true}) {
        const Plan plan = build(algo, n, r, 5, kBig, nullptr, inPlace);
        EXPECT_EQ(sendPeers(plan).size(), size_t(ceilLog2(n))) << "n=" << n;
        EXPECT_EQ(recvPeers(plan).size(), size_t(ceilLog2(n))) << "n=" << n;
        // Packed: one send step per round, each with the indices that have bit k set.
        const std::vector<uint64_t> sizes = sendSizes(plan);
        ASSERT_EQ(sizes.size(), size_t(ceilLog2(n))) << "n=" << n;
        for (int k = 0; k < ceilLog2(n); ++k) {
          uint64_t blocks = 0;
          for (int i = 1; i < n; ++i) blocks += (i >> k) & 1;
          EXPECT_EQ(sizes[size_t(k)], 5 * blocks) << "n=" << n << " round " << k;
        }
        EXPECT_GT(plan.scratchElems, 0u);
      }
    }
  }
}

TEST(RabenseifnerShape, MessagesHalveThenDouble) {
  const Algorithm* algo = findAlgorithm(Coll::kAllReduce, "rabenseifner");
  const uint64_t count = 8 * 64;  // 8 blocks of 64 floats (whole cache lines)
  for (int r = 0; r < 8; ++r) {
    const Plan plan = build(algo, 8, r, count, kBig);
    const std::vector<uint64_t> want = {count / 2, count / 4, count / 8,
                                        count / 8, count / 4, count / 2};
    EXPECT_EQ(sendSizes(plan), want) << "rank " << r << "\n" << plan.toString();
    EXPECT_EQ(sendPeers(plan), (std::set<int>{r ^ 1, r ^ 2, r ^ 4})) << "rank " << r;
  }
  // Chunking: every step at most chunkBytes, the same peers.
  const Plan chunked = build(algo, 8, 3, count, PlanParams{64, 1});
  for (uint64_t s : sendSizes(chunked)) EXPECT_LE(s * 4, 64u);
  EXPECT_EQ(sendPeers(chunked), (std::set<int>{2, 1, 7}));
}

TEST(RabenseifnerShape, BigMessagesStayInsideNodes) {
  // 2 nodes x 4 ranks: the halving rounds pair ranks 1 and 2 apart (same node) with the
  // big halves; only the two smallest messages (count/8 each) cross nodes.
  const Algorithm* algo = findAlgorithm(Coll::kAllReduce, "rabenseifner");
  auto layout = std::make_shared<RankLayout>(RankLayout::fromNodes(nodesOf(2, 4)));
  const uint64_t count = 8 * 64;
  for (int r = 0; r < 8; ++r) {
    const Plan plan = build(algo, 8, r, count, kBig, layout);
    uint64_t inter = 0, total = 0;
    for (const Program& p : plan.programs)
      for (const Step& s : p.steps) {
        if (!sends(s.kind)) continue;
        total += s.count();
        if (layout->nodeOf[size_t(s.sendPeer)] != layout->nodeOf[size_t(r)]) inter += s.count();
      }
    EXPECT_EQ(total, 2 * (count - count / 8)) << "rank " << r;
    EXPECT_EQ(inter, count / 4) << "rank " << r;
  }
}

TEST(RabenseifnerShape, ExtraRanksFoldIntoAPartner) {
  const Algorithm* algo = findAlgorithm(Coll::kAllReduce, "rabenseifner");
  // 6 ranks: p = 4; positions 0,1 and 2,3 fold; 0 and 2 only talk to their partner.
  for (int r : {0, 2}) {
    const Plan plan = build(algo, 6, r, 600, kBig);
    EXPECT_EQ(sendPeers(plan), std::set<int>{r + 1}) << plan.toString();
    EXPECT_EQ(recvPeers(plan), std::set<int>{r + 1}) << plan.toString();
  }
  const Plan odd = build(algo, 6, 1, 600, kBig);
  EXPECT_EQ(sendPeers(odd).count(0), 1u);  // the result back to its partner
  EXPECT_EQ(sendPeers(odd).size(), 3u);    // partner + log2(4) exchange peers
}

TEST(TreeShape, TwoChannelsRunBothTreesPipelined) {
  const Algorithm* algo = findAlgorithm(Coll::kAllReduce, "tree");
  const int n = 8;
  const uint64_t count = 4096;  // 16 KiB: 8 KiB per tree
  std::map<int, std::set<int>> roots;  // channel -> ranks with one program on it
  for (int r = 0; r < n; ++r) {
    const Plan plan = build(algo, n, r, count, PlanParams{1024, 2});
    std::map<int, int> programsPerChannel;
    for (const Program& p : plan.programs) ++programsPerChannel[p.steps.at(0).channel];
    ASSERT_EQ(programsPerChannel.size(), 2u) << "both trees, one per channel";
    for (const auto& kv : programsPerChannel) {
      // The root has one program per tree; every other rank two (up and down).
      EXPECT_TRUE(kv.second == 1 || kv.second == 2);
      if (kv.second == 1) roots[kv.first].insert(r);
    }
    for (const Program& p : plan.programs)
      for (const Step& s : p.steps)
        if (sends(s.kind) || recvs(s.kind)) {
          EXPECT_LE(s.count() * 4, 1024u);
        }
    // Pipelined: 8 KiB per tree in chunks of 1 KiB, every rank sends >= 8 steps per tree.
    EXPECT_GE(sendSizes(plan).size(), 16u);
  }
  // One root per tree, and not the same rank (positions 7 and 6 of the two trees).
  EXPECT_EQ(roots[0], std::set<int>{7});
  EXPECT_EQ(roots[1], std::set<int>{6});
  // One channel: a single tree carries everything (a rank's neighbours <= 3).
  for (int r = 0; r < n; ++r) {
    const Plan plan = build(algo, n, r, count, PlanParams{1024, 1});
    std::set<int> peers = sendPeers(plan);
    for (int x : recvPeers(plan)) peers.insert(x);
    EXPECT_LE(peers.size(), 3u) << "rank " << r;
    EXPECT_LE(plan.programs.size(), 2u);
  }
}

TEST(TreeShape, NodesTalkOnlyThroughTheirHeads) {
  const Algorithm* algo = findAlgorithm(Coll::kAllReduce, "tree");
  auto layout = std::make_shared<RankLayout>(RankLayout::fromNodes(nodesOf(4, 3)));
  for (int r = 0; r < 12; ++r) {
    const Plan plan = build(algo, 12, r, 1000, PlanParams{512, 2}, layout);
    std::set<int> peers = sendPeers(plan);
    for (int x : recvPeers(plan)) peers.insert(x);
    for (int peer : peers) {
      if (layout->nodeOf[size_t(peer)] == layout->nodeOf[size_t(r)]) continue;
      EXPECT_EQ(layout->localRank[size_t(r)], 0) << "rank " << r << " talks to " << peer;
      EXPECT_EQ(layout->localRank[size_t(peer)], 0) << "rank " << r << " talks to " << peer;
    }
  }
}

TEST(BruckShape, FollowsTheLayoutRing) {
  // One node whose ring is 0, 2, 4, 1, 3: round 0 goes to the ring predecessor.
  auto layout =
      std::make_shared<RankLayout>(RankLayout::fromNodes({0, 0, 0, 0, 0}, {0, 3, 1, 4, 2}));
  ASSERT_EQ(layout->ring, (std::vector<int>{0, 2, 4, 1, 3}));
  const Algorithm* algo = findAlgorithm(Coll::kAllGather, "bruck");
  const Plan plan = build(algo, 5, 4, 16, kBig, layout);
  ASSERT_FALSE(plan.programs.empty());
  const std::vector<Step>& steps = plan.programs[0].steps;
  const auto first = std::find_if(steps.begin(), steps.end(),
                                  [](const Step& s) { return s.kind == StepKind::kSend; });
  ASSERT_NE(first, steps.end());
  EXPECT_EQ(first->sendPeer, 2);
}

}  // namespace
}  // namespace algotest
}  // namespace braid
