// The direct-access steps (algorithms/plan.h: kSignal .. kPeerPut): the simulator's
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


TEST(DirectAccess, PutsAndReductionsToEveryRankRun) {
  Pair t;  // each rank puts its send buffer into the other's recv, then both reduce into both
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    w.peerPut(1 - r, Region{Buf::kSend, uint64_t(8 * r), 8}, Region{Buf::kRecv, uint64_t(8 * r), 8});
    w.barrier();
  });
  ASSERT_EQ(t.check(), "");
  for (bool copies : {false, true}) {
    SimGeometry g;
    g.peerReads = copies;  // writes through PeerAccess::write (process_vm_writev's place)
    Simulator sim(2, 1, g);
    const SimResult res = sim.run(t.ranks());
    ASSERT_TRUE(res.ok) << res.error;
    EXPECT_EQ(t.recv[1][0], 1.0f);   // rank 0's first half, written by rank 0
    EXPECT_EQ(t.recv[0][15], 2.0f);  // rank 1's second half, written by rank 1
  }
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    w.peerReduce(Region{Buf::kSend, uint64_t(8 * r), 8}, Region{Buf::kRecv, uint64_t(8 * r), 8},
                 kPostOp, kAllPeers);
    w.barrier();
  });
  ASSERT_EQ(t.check(), "");
  Simulator sim(2, 1, SimGeometry{});
  const SimResult res = sim.run(t.ranks());
  ASSERT_TRUE(res.ok) << res.error;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 16; ++i) EXPECT_EQ(t.recv[size_t(r)][size_t(i)], 3.0f) << r << " " << i;
}

TEST(DirectAccess, WritesRacingTheOwnerOrEndingEarlyAreFound) {
  Pair t;  // rank 0 writes rank 1's recv while rank 1 copies into it: nothing between
  t.each([](patterns::ProgramWriter& w, int r) {
    w.barrier();
    if (r == 0) w.peerPut(1, kAllSend, kAllRecv);
    else w.copy(kAllSend, kAllRecv);
    w.barrier();
  });
  EXPECT_NE(t.check().find("races with"), std::string::npos) << t.check();
  t.each([](patterns::ProgramWriter& w, int r) {  // no barrier after the put
    w.barrier();
    if (r == 0) w.peerPut(1, kAllSend, kAllRecv);
  });
  EXPECT_NE(t.check().find("may end its run while this writes"), std::string::npos) << t.check();
  t.each([](patterns::ProgramWriter& w, int r) {  // a peer's input is never written
    w.barrier();
    if (r == 0) w.peerPut(1, kAllSend, kAllSend);
    w.barrier();
  });
  EXPECT_NE(t.check().find("send buffer (a peer's input)"), std::string::npos) << t.check();
}

TEST(DirectAccess, ProgramsAreSeparateSequencesOfSignals) {
  // Two programs: program 1 reads what the peer's program 0 wrote. Its waits see only
  // the peer's program 1, which never signalled after that write: a race.
  Pair t;
  for (int r = 0; r < 2; ++r) {
    t.plans[size_t(r)] = Plan();
    patterns::ProgramWriter p0(&t.plans[size_t(r)], 0), p1(&t.plans[size_t(r)], 1);
    p0.copy(kAllSend, kAllRecv);
    p0.barrier();
    p0.barrier();
    p1.barrier();
    p1.peerCopy(1 - r, kAllRecv, Region{Buf::kRecv, 0, 16});
    p1.barrier();
  }
  // (rank r's program 1 writes its own recv too: that races with its program 0.)
  const std::string e = t.check();
  EXPECT_NE(e.find("races with"), std::string::npos) << e;
  // Split by shares as the builders do, every program keeps to its own bytes: fine.
  for (int r = 0; r < 2; ++r) {
    t.plans[size_t(r)] = Plan();
    PlanArgs a;
    a.typeSize = 4;
    patterns::forEachShare(&t.plans[size_t(r)], a, PlanParams{512, 2},
                           [&](patterns::ProgramWriter& w, auto share) {
                             w.barrier();
                             w.peerCopy(1 - r, share(kAllSend), share(kAllRecv));
                             w.barrier();
                           });
  }
  ASSERT_EQ(t.check(), "");
  Simulator sim(2, 2, SimGeometry{});
  const SimResult res = sim.run(t.ranks());
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(t.recv[0][15], 2.0f);
  EXPECT_EQ(t.recv[1][0], 1.0f);
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
    // The flag board's is the first of its collective.
    const Algorithm* first = peerAccessAlgorithm(a.coll);
    ASSERT_NE(first, nullptr);
    EXPECT_TRUE(first->needsPeerAccess);
    EXPECT_LE(first, &a);
  }
  for (int c = 0; c < int(Coll::kSendRecv); ++c)
    EXPECT_NE(peerAccessAlgorithm(Coll(c)), nullptr) << collName(Coll(c));
}

}  // namespace
}  // namespace braid
