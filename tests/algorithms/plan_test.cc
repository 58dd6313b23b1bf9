// The plan vocabulary, the registry, and the simulator's own checks (plan contract
// violations, deadlocks, unconsumed data) on hand-written plans.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "tests/sim/simulator.h"
#include "src/reduce/reducer.h"

namespace braid {
namespace {

Step makeStep(StepKind kind, int from, int to, Region src, Region dst, uint8_t flags = 0) {
  Step s;
  s.kind = kind;
  s.recvPeer = from;
  s.sendPeer = to;
  s.src = src;
  s.dst = dst;
  s.flags = flags;
  return s;
}
Region sendR(uint64_t off, uint64_t n) { return Region{Buf::kSend, off, n}; }
Region recvR(uint64_t off, uint64_t n) { return Region{Buf::kRecv, off, n}; }

TEST(PlanNames, EveryKindAndCollectiveHasADistinctName) {
  std::set<std::string> names;
  for (int k = 0; k <= int(StepKind::kCopy); ++k) {
    std::string name = stepKindName(StepKind(k));
    EXPECT_NE(name, "Unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  names.clear();
  for (int c = 0; c < int(Coll::kCount); ++c) {
    std::string name = collName(Coll(c));
    EXPECT_NE(name, "Unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_STREQ(collName(Coll::kAllReduce), "AllReduce");
  EXPECT_STREQ(stepKindName(StepKind::kRecvReduceCopySend), "RecvReduceCopySend");
}

TEST(PlanToString, ListsEveryStep) {
  PlanArgs args;
  args.nranks = 3;
  args.rank = 1;
  args.count = 6;
  Plan plan;
  ASSERT_EQ(buildPlan(args, PlanParams{}, nullptr, &plan), ncclSuccess);
  EXPECT_EQ(plan.algorithm, "ring");
  EXPECT_EQ(plan.stepCount(), 5u);  // 2n-1 steps for one loop
  const std::string text = plan.toString();
  EXPECT_NE(text.find("plan ring: 1 program(s), 5 step(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("RecvReduceCopySend"), std::string::npos) << text;
  EXPECT_NE(text.find("from=0 to=2"), std::string::npos) << text;
  EXPECT_NE(text.find("pre post"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7) << text;
}

TEST(Registry, EveryCollectiveHasADefaultAndNamesAreUnique) {
  for (int c = 0; c < int(Coll::kCount); ++c) {
    const Algorithm* def = defaultAlgorithm(Coll(c));
    ASSERT_NE(def, nullptr) << collName(Coll(c));
    EXPECT_EQ(def->coll, Coll(c));
    EXPECT_EQ(algorithmsFor(Coll(c)).front(), def);
    std::set<std::string> names;
    for (const Algorithm* a : algorithmsFor(Coll(c))) {
      EXPECT_TRUE(names.insert(a->name).second) << a->name;
      EXPECT_NE(a->build, nullptr);
      EXPECT_GT(strlen(a->description), 0u);
    }
  }
}

TEST(Registry, FindsByNameOrNcclNameInAnyCase) {
  EXPECT_EQ(findAlgorithm(Coll::kAllReduce, "ring"), defaultAlgorithm(Coll::kAllReduce));
  EXPECT_EQ(findAlgorithm(Coll::kAllReduce, "RING"), defaultAlgorithm(Coll::kAllReduce));
  EXPECT_EQ(findAlgorithm(Coll::kBroadcast, "Ring"), defaultAlgorithm(Coll::kBroadcast));
  EXPECT_EQ(findAlgorithm(Coll::kBroadcast, "chain"), defaultAlgorithm(Coll::kBroadcast));
  EXPECT_EQ(findAlgorithm(Coll::kAllToAll, "PairWise"), defaultAlgorithm(Coll::kAllToAll));
  EXPECT_EQ(findAlgorithm(Coll::kAllReduce, "tree-of-life"), nullptr);
  EXPECT_EQ(findAlgorithm(Coll::kAllToAll, "ring"), nullptr);
}

TEST(Registry, BuildPlanRejectsBadArguments) {
  Plan plan;
  PlanArgs args;
  args.nranks = 4;
  args.count = 10;
  args.rank = 4;
  EXPECT_EQ(buildPlan(args, PlanParams{}, nullptr, &plan), ncclInvalidArgument);
  args.rank = 0;
  args.root = -1;
  EXPECT_EQ(buildPlan(args, PlanParams{}, nullptr, &plan), ncclInvalidArgument);
  args.root = 0;
  args.typeSize = 8;
  PlanParams tiny;
  tiny.chunkBytes = 4;
  EXPECT_EQ(buildPlan(args, tiny, nullptr, &plan), ncclInvalidArgument);
  PlanParams noChannels;
  noChannels.nChannels = 0;
  EXPECT_EQ(buildPlan(args, noChannels, nullptr, &plan), ncclInvalidArgument);
  // An algorithm of another collective.
  EXPECT_EQ(buildPlan(args, PlanParams{}, defaultAlgorithm(Coll::kBroadcast), &plan),
            ncclInvalidArgument);
  // p2p peer out of range.
  PlanArgs p2p;
  p2p.coll = Coll::kSendRecv;
  p2p.nranks = 2;
  p2p.p2p.push_back(P2pOp{true, 2, Buf::kSend, 0, 1});
  EXPECT_EQ(buildPlan(p2p, PlanParams{}, nullptr, &plan), ncclInvalidArgument);
  // The ring all-reduce itself still builds with good arguments.
  EXPECT_EQ(buildPlan(args, PlanParams{}, nullptr, &plan), ncclSuccess);
  EXPECT_GT(plan.stepCount(), 0u);
}

bool declineEverything(const PlanArgs&, const PlanParams&, Plan* plan) {
  plan->programs.resize(1);  // partial output must not survive a decline
  return false;
}

TEST(Registry, DecliningAlgorithmFallsBackToTheDefault) {
  const Algorithm picky{Coll::kAllGather, "picky", nullptr, "declines every call",
                        declineEverything};
  PlanArgs args;
  args.coll = Coll::kAllGather;
  args.nranks = 3;
  args.count = 5;
  Plan plan;
  ASSERT_EQ(buildPlan(args, PlanParams{}, &picky, &plan), ncclSuccess);
  EXPECT_EQ(plan.algorithm, "ring");
  EXPECT_EQ(plan.stepCount(), 1u + 3u);  // own copy, send, recv-copy-send, recv
}

TEST(Registry, EmptyCallsBuildEmptyPlans) {
  for (const Algorithm& a : allAlgorithms()) {
    for (int n : {1, 4}) {
      PlanArgs args;
      args.coll = a.coll;
      args.nranks = n;
      args.rank = n - 1;
      args.count = 0;
      args.collnet = a.needsSwitch;  // else they decline
      args.peerAccess = a.needsPeerAccess;
      Plan plan;
      ASSERT_TRUE(a.build(args, PlanParams{}, &plan)) << collName(a.coll) << "/" << a.name;
      EXPECT_EQ(plan.programs.size(), 0u) << collName(a.coll) << "\n" << plan.toString();
    }
  }
}

TEST(Registry, CollNetBuildersNeedASwitch) {
  for (const Algorithm& a : allAlgorithms()) {
    if (!a.needsSwitch) continue;
    int toSwitch = 0, fromSwitch = 0;
    for (int rank = 0; rank < 4; ++rank) {
      PlanArgs args;
      args.coll = a.coll;
      args.nranks = 4;
      args.rank = rank;
      args.count = 1000;
      args.layout = std::make_shared<const RankLayout>(RankLayout::fromNodes({0, 0, 1, 1}));
      Plan plan;
      EXPECT_FALSE(a.build(args, PlanParams{}, &plan)) << a.name << " without a switch";
      args.collnet = true;
      plan = Plan{};
      ASSERT_TRUE(a.build(args, PlanParams{}, &plan)) << a.name;
      EXPECT_NE(plan.switchOp, SwitchOp::kNone) << a.name;
      for (const Program& p : plan.programs)
        for (const Step& s : p.steps) {
          toSwitch += s.sendPeer == kSwitchPeer;
          fromSwitch += s.recvPeer == kSwitchPeer;
        }
      if (rank == 0) {
        EXPECT_NE(plan.toString().find("to=switch"), std::string::npos) << a.name;
      }
    }
    EXPECT_GT(toSwitch, 0) << a.name;
    EXPECT_GT(fromSwitch, 0) << a.name;
  }
}

TEST(Registry, RingStepsNeverExceedChunkBytes) {
  PlanArgs args;
  args.nranks = 5;
  args.rank = 2;
  args.count = 100003;
  PlanParams params;
  params.chunkBytes = 1000;  // not a multiple of the loop size on purpose
  params.nChannels = 3;
  Plan plan;
  ASSERT_EQ(buildPlan(args, params, nullptr, &plan), ncclSuccess);
  ASSERT_EQ(plan.programs.size(), 3u);
  std::set<int> channels;
  uint64_t reduced = 0;
  for (const Program& p : plan.programs) {
    for (const Step& s : p.steps) {
      EXPECT_LE(s.count() * args.typeSize, params.chunkBytes);
      channels.insert(s.channel);
      if (s.kind == StepKind::kRecvReduceCopySend) reduced += s.count();
    }
  }
  EXPECT_EQ(channels.size(), 3u);
  // Rank 2 finalises one block per loop; all blocks of all ranks cover the buffer, so
  // about one fifth of it is finalised here.
  EXPECT_GT(reduced, args.count / 5 - 1000);
  EXPECT_LT(reduced, args.count / 5 + 1000);
}

// ---- simulator self-checks -----------------------------------------------------------

struct TwoRanks {
  std::vector<Plan> plans = std::vector<Plan>(2);
  std::vector<std::vector<float>> send{std::vector<float>(64, 1.0f), std::vector<float>(64, 2.0f)};
  std::vector<std::vector<float>> recv{std::vector<float>(64, 0.0f), std::vector<float>(64, 0.0f)};
  std::vector<SimRank> ranks() {
    std::vector<SimRank> out(2);
    for (int r = 0; r < 2; ++r) {
      out[r].plan = &plans[r];
      out[r].bufs.send = send[r].data();
      out[r].bufs.recv = recv[r].data();
      out[r].reducer = Reducer(ncclFloat32, ncclSum, 2);
      out[r].sendElems = out[r].recvElems = 64;
    }
    return out;
  }
};

TEST(Simulator, RunsAHandWrittenExchange) {
  TwoRanks t;
  for (int r = 0; r < 2; ++r) {
    t.plans[r].programs.resize(1);
    auto& steps = t.plans[r].programs[0].steps;
    steps.push_back(makeStep(StepKind::kSend, -1, 1 - r, sendR(0, 16), Region{}));
    steps.push_back(makeStep(StepKind::kRecvReduceCopy, 1 - r, -1, sendR(0, 16), recvR(0, 16)));
  }
  auto ranks = t.ranks();
  EXPECT_EQ(checkPlans(ranks, 1, 4, 128), "");
  Simulator sim(2, 1, SimGeometry{4, 64, false});
  SimResult res = sim.run(ranks);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_FALSE(res.deadlock);
  EXPECT_EQ(t.recv[0][15], 3.0f);
  EXPECT_EQ(t.recv[1][0], 3.0f);
  EXPECT_EQ(t.recv[1][16], 0.0f);
}

TEST(Simulator, ReportsADeadlockWithTheStuckRanks) {
  TwoRanks t;
  for (int r = 0; r < 2; ++r) {  // both receive first
    t.plans[r].programs.resize(1);
    auto& steps = t.plans[r].programs[0].steps;
    steps.push_back(makeStep(StepKind::kRecv, 1 - r, -1, Region{}, recvR(0, 8)));
    steps.push_back(makeStep(StepKind::kSend, -1, 1 - r, sendR(0, 8), Region{}));
  }
  auto ranks = t.ranks();
  EXPECT_EQ(checkPlans(ranks, 1, 4, 0), "");  // statically fine: balanced
  Simulator sim(2, 1, SimGeometry{4, 64, false});
  SimResult res = sim.run(ranks);
  EXPECT_FALSE(res.ok);
  EXPECT_TRUE(res.deadlock);
  EXPECT_NE(res.error.find("DEADLOCK"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("rank 0"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("rank 1"), std::string::npos) << res.error;
}

TEST(Simulator, SendingMoreThanAFifoAroundACycleDeadlocks) {
  // Why builders cut ring steps into chunks: both send 64 floats (256 bytes) into a
  // 128-byte FIFO before receiving.
  TwoRanks t;
  for (int r = 0; r < 2; ++r) {
    t.plans[r].programs.resize(1);
    auto& steps = t.plans[r].programs[0].steps;
    steps.push_back(makeStep(StepKind::kSend, -1, 1 - r, sendR(0, 64), Region{}));
    steps.push_back(makeStep(StepKind::kRecv, 1 - r, -1, Region{}, recvR(0, 64)));
  }
  auto ranks = t.ranks();
  EXPECT_NE(checkPlans(ranks, 1, 4, 64).find("more than chunkBytes"), std::string::npos);
  Simulator sim(2, 1, SimGeometry{2, 64, false});
  SimResult res = sim.run(ranks);
  EXPECT_TRUE(res.deadlock) << res.error;
  EXPECT_NE(res.error.find("drain"), std::string::npos) << res.error;
}

TEST(Simulator, ReportsDataLeftUnconsumed) {
  TwoRanks t;
  t.plans[0].programs.resize(1);
  t.plans[0].programs[0].steps.push_back(makeStep(StepKind::kSend, -1, 1, sendR(0, 8), Region{}));
  t.plans[1].programs.resize(1);
  t.plans[1].programs[0].steps.push_back(makeStep(StepKind::kRecv, 0, -1, Region{}, recvR(0, 4)));
  auto ranks = t.ranks();
  EXPECT_NE(checkPlans(ranks, 1, 4, 0).find("sends 16 bytes more"), std::string::npos)
      << checkPlans(ranks, 1, 4, 0);
  Simulator sim(2, 1, SimGeometry{4, 64, false});
  SimResult res = sim.run(ranks);
  EXPECT_FALSE(res.ok);
  EXPECT_FALSE(res.deadlock);
  EXPECT_NE(res.error.find("unconsumed"), std::string::npos) << res.error;
}

TEST(Simulator, CheckPlansFindsContractViolations) {
  TwoRanks t;
  auto ranks = t.ranks();
  auto& p0 = t.plans[0].programs;
  auto& p1 = t.plans[1].programs;
  p1.resize(1);
  p1[0].steps.push_back(makeStep(StepKind::kRecv, 0, -1, Region{}, recvR(0, 8)));
  // Two programs sending to the same peer on the same channel.
  p0.resize(2);
  p0[0].steps.push_back(makeStep(StepKind::kSend, -1, 1, sendR(0, 4), Region{}));
  p0[1].steps.push_back(makeStep(StepKind::kSend, -1, 1, sendR(4, 4), Region{}));
  EXPECT_NE(checkPlans(ranks, 1, 4, 0).find("two programs send to rank 1"), std::string::npos);
  // Fixed by using channel 1 (and receiving there)...
  p0[1].steps[0].channel = 1;
  p1[0].steps[0].dst.count = 4;
  p1.resize(2);
  p1[1].steps.push_back(makeStep(StepKind::kRecv, 0, -1, Region{}, recvR(4, 4)));
  p1[1].steps[0].channel = 1;
  EXPECT_NE(checkPlans(ranks, 1, 4, 0).find(">= nChannels"), std::string::npos);
  EXPECT_EQ(checkPlans(ranks, 2, 4, 0), "");
  // ... a region outside the buffer, a zero-count step, a bad peer.
  p1[1].steps[0].dst.offset = 61;
  EXPECT_NE(checkPlans(ranks, 2, 4, 0).find("outside the buffer"), std::string::npos);
  p1[1].steps[0].dst.offset = 4;
  p0[0].steps.push_back(makeStep(StepKind::kCopy, -1, -1, sendR(0, 0), recvR(0, 0)));
  EXPECT_NE(checkPlans(ranks, 2, 4, 0).find("zero elements"), std::string::npos);
  p0[0].steps.pop_back();
  p0[0].steps[0].sendPeer = 2;
  EXPECT_NE(checkPlans(ranks, 2, 4, 0).find("bad send peer"), std::string::npos);
}

TEST(Simulator, ExecutorErrorsAreReported) {
  // A plan using a channel the simulator has no connection for.
  TwoRanks t;
  for (int r = 0; r < 2; ++r) {
    t.plans[r].programs.resize(1);
    Step s = makeStep(r == 0 ? StepKind::kSend : StepKind::kRecv, r == 0 ? -1 : 0,
                      r == 0 ? 1 : -1, r == 0 ? sendR(0, 4) : Region{},
                      r == 0 ? Region{} : recvR(0, 4));
    s.channel = 1;
    t.plans[r].programs[0].steps.push_back(s);
  }
  Simulator sim(2, 1, SimGeometry{4, 64, false});
  SimResult res = sim.run(t.ranks());
  EXPECT_FALSE(res.ok);
  EXPECT_FALSE(res.deadlock);
  EXPECT_NE(res.error.find("no such connection"), std::string::npos) << res.error;
}

}  // namespace
}  // namespace braid
