// The direct-access steps (algorithms/plan.h: kSignal .. kPeerReduce): the simulator's
// static check of their contract finds the races it names, and a correct plan runs.
// (Every direct-access builder is also run for every rank count, count, root and
// placement by collectives_test.cc.)
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/patterns/program_writer.h"
#include "algorithms/registry.h"
#include "tests/sim/simulator.h"

namespace braid {
namespace {

/// Two ranks, 16 floats each way; rank r's send buffer holds r + 1.
struct Pair {
  std::vector<Plan> plans = std::vector<Plan>(2);
  std::vector<std::vector<float>> send{std::vector<float>(16, 1.0f), std::vector<float>(16, 2.0f)};
  std::vector<std::vector<float>> recv{std::vector<float>(16, 0.0f), std::vector<float>(16, 0.0f)};
  std::vector<SimRank> ranks() {
    std::vector<SimRank> out(2);
    for (int r = 0; r < 2; ++r) {
      out[size_t(r)].plan = &plans[size_t(r)];
      out[size_t(r)].bufs.send = send[size_t(r)].data();
      out[size_t(r)].bufs.recv = recv[size_t(r)].data();
      out[size_t(r)].reducer = Reducer(ncclFloat32, ncclSum, 2);
      out[size_t(r)].sendElems = out[size_t(r)].recvElems = 16;
    }
    return out;
  }
  /// Both ranks: `body(writer, rank)`.
  template <class F>
  void each(F body) {
    for (int r = 0; r < 2; ++r) {
      plans[size_t(r)] = Plan();
      patterns::ProgramWriter w(&plans[size_t(r)], 0);
      body(w, r);
    }
  }
  std::string check() { return checkPlans(ranks(), 1, 4, 0); }
};

const Region kAllSend{Buf::kSend, 0, 16}, kAllRecv{Buf::kRecv, 0, 16};

TEST(DirectAccess, AReadBetweenBarriersRuns) {
  Pair t;
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    w.peerCopy(1 - r, kAllSend, kAllRecv);
    w.barrier();
  });
  ASSERT_EQ(t.check(), "");
  for (bool copies : {false, true}) {
    SimGeometry g;
    g.peerReads = copies;
    Simulator sim(2, 1, g);
    const SimResult res = sim.run(t.ranks());
    ASSERT_TRUE(res.ok) << res.error;
    EXPECT_EQ(t.recv[0][15], 2.0f);
    EXPECT_EQ(t.recv[1][0], 1.0f);
  }
}

TEST(DirectAccess, PeerReduceSumsEveryRankInOrder) {
  Pair t;
  t.each([](patterns::ProgramWriter& w, int) {
    w.barrier();
    w.peerReduce(kAllSend, kAllRecv, kPostOp);
    w.barrier();
  });
  ASSERT_EQ(t.check(), "");
  Simulator sim(2, 1, SimGeometry{});
  const SimResult res = sim.run(t.ranks());
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(t.recv[0][3], 3.0f);
  EXPECT_EQ(t.recv[1][15], 3.0f);
}

TEST(DirectAccess, ReadingBeforeThePeerAnnouncedIsFound) {
  Pair t;
  t.each([](patterns::ProgramWriter& w, int r) {
    w.peerCopy(1 - r, kAllSend, kAllRecv);
    w.barrier();
  });
  EXPECT_NE(t.check().find("before seeing its first signal"), std::string::npos) << t.check();
}

TEST(DirectAccess, EndingWhileAPeerStillReadsIsFound) {
  Pair t;  // no second barrier: a rank may return while the other reads its buffer
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    w.peerCopy(1 - r, kAllSend, kAllRecv);
  });
  EXPECT_NE(t.check().find("may end its run while this reads"), std::string::npos) << t.check();
}

TEST(DirectAccess, OverwritingWhatAPeerReadsIsFound) {
  // Rank 0 reads rank 1's recv buffer while rank 1 writes it, with nothing between.
  Pair t;
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    if (r == 0) w.peerCopy(1, kAllRecv, Region{Buf::kRecv, 0, 16});
    else w.copy(kAllSend, kAllRecv);
    w.barrier();
  });
  EXPECT_NE(t.check().find("races with"), std::string::npos) << t.check();
  // Written before the barrier that the read follows: fine.
  t.each([](patterns::ProgramWriter& w, int r) {
    if (r == 1) w.copy(kAllSend, kAllRecv);
    w.barrier();
    if (r == 0) w.peerCopy(1, kAllRecv, Region{Buf::kRecv, 0, 16});
    w.barrier();
  });
  EXPECT_EQ(t.check(), "");
}

TEST(DirectAccess, UnequalSignalCountsAreFound) {
  Pair t;
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    w.peerCopy(1 - r, kAllSend, kAllRecv);
    w.barrier();
    if (r == 1) w.signal();
  });
  EXPECT_NE(t.check().find("every rank must post as many"), std::string::npos) << t.check();
}

TEST(DirectAccess, TheFirstWaitIsForEveryRank) {
  Pair t;  // the calls are compared at the first wait for all: nothing may be read before
  t.each([](patterns::ProgramWriter& w, int r) {
    w.signal();
    w.wait(1 - r);
    w.peerCopy(1 - r, kAllSend, kAllRecv);
    w.barrier();
  });
  EXPECT_NE(t.check().find("first wait must be for every rank"), std::string::npos) << t.check();
}

TEST(DirectAccess, TooManySignalsAheadAreFound) {
  Pair t;
  t.each([](patterns::ProgramWriter& w, int) {
    w.barrier();
    for (int i = 0; i < kMaxSignalsAhead + 1; ++i) w.signal();
    w.wait(kAllPeers);
  });
  EXPECT_NE(t.check().find("signals since its last wait"), std::string::npos) << t.check();
}

TEST(DirectAccess, PeersScratchAndOutOfBoundsReadsAreFound) {
  Pair t;
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    w.peerCopy(1 - r, Region{Buf::kScratch, 0, 4}, Region{Buf::kRecv, 0, 4});
    w.barrier();
  });
  t.plans[0].scratchElems = t.plans[1].scratchElems = 4;
  EXPECT_NE(t.check().find("scratch"), std::string::npos) << t.check();
  // Rank 1's send buffer is smaller than rank 0's: reading its tail is out of bounds.
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    if (r == 0) w.peerCopy(1, Region{Buf::kSend, 8, 8}, Region{Buf::kRecv, 0, 8});
    w.barrier();
  });
  auto ranks = t.ranks();
  ranks[1].sendElems = 12;
  const std::string e = checkPlans(ranks, 1, 4, 0);
  EXPECT_NE(e.find("at rank 1"), std::string::npos) << e;
  EXPECT_NE(e.find("outside the buffer"), std::string::npos) << e;
}

TEST(DirectAccess, BuildersDeclineWithoutPeerAccess) {
  for (const Algorithm& a : allAlgorithms()) {
    if (!a.needsPeerAccess) continue;
    PlanArgs args;
    args.coll = a.coll;
    args.nranks = 2;
    args.count = 16;
    Plan plan;
    EXPECT_FALSE(a.build(args, PlanParams(), &plan)) << a.name;
    args.peerAccess = true;
    plan = Plan();
    EXPECT_TRUE(a.build(args, PlanParams(), &plan)) << a.name;
    EXPECT_EQ(peerAccessAlgorithm(a.coll), &a);
  }
  for (int c = 0; c < int(Coll::kSendRecv); ++c)
    EXPECT_NE(peerAccessAlgorithm(Coll(c)), nullptr) << collName(Coll(c));
}

}  // namespace
}  // namespace braid
