// Launch-level behaviour of the CUDA executor's interpreter (host emulation): several
// works in one launch (the grid barrier), replays of a launch (counters and barrier
// words carried over, as with CUDA Graphs), giving up on abort and on a closed FIFO
// instead of hanging, and a connection whose other end is the host (FifoSender /
// FifoReceiver, as the net proxy, or the whole host executor).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "algorithms/registry.h"
#include "tests/sim/simulator.h"
#include "src/device/launch_plan.h"
#include "src/reduce/reducer.h"
#include "tests/device_emu/emu_case.h"
#include "tests/device_emu/emu_harness.h"

namespace braid {
namespace emutest {
namespace {

using Clock = std::chrono::steady_clock;

Plan buildOrDie(Coll coll, const char* algo, int n, int r, uint64_t count, size_t ts,
                bool inPlace, PlanParams params = PlanParams{512, 1}) {
  PlanArgs a;
  a.coll = coll;
  a.nranks = n;
  a.rank = r;
  a.count = count;
  a.typeSize = ts;
  a.inPlace = inPlace;
  Plan p;
  const Algorithm* al = findAlgorithm(coll, algo);
  EXPECT_NE(al, nullptr) << algo;
  if (al) {
    EXPECT_TRUE(al->build(a, params, &p)) << algo;
  }
  return p;
}

std::vector<float> floats(uint64_t n, uint64_t seed) {
  std::vector<float> v(n);
  fillValues(ncclFloat32, v.data(), n, seed);
  return v;
}

// ---- several works in one launch ---------------------------------------------------------

TEST(EmuLaunch, SeveralWorksGridBarrierAndReplay) {
  constexpr int n = 3;
  constexpr uint64_t count = 1001;
  // Work 0: ring all-reduce a -> b over 2 channels (2 programs: 2 blocks write b).
  // Work 1: direct all-reduce b -> c (reads all of b: both blocks' output of work 0).
  // Work 2: ring reduce-scatter c -> d (in place in c would alias; out of place).
  std::vector<Plan> p0(n), p1(n), p2(n);
  for (int r = 0; r < n; ++r) {
    p0[r] = buildOrDie(Coll::kAllReduce, "ring", n, r, count, 4, false, PlanParams{512, 2});
    p1[r] = buildOrDie(Coll::kAllReduce, "direct", n, r, count, 4, false, PlanParams{512, 1});
    p2[r] = buildOrDie(Coll::kReduceScatter, "ring", n, r, count / n, 4, false, PlanParams{256, 1});
  }
  ASSERT_EQ(p0[0].programs.size(), 2u);
  std::vector<std::vector<float>> a(n), b(n, std::vector<float>(count)), c(n, std::vector<float>(count)),
      d(n, std::vector<float>(count / n));
  for (int r = 0; r < n; ++r) a[r] = floats(count, r + 1);
  // Reference: the host executor, one op after the other.
  auto ra = a, rb = b, rc = c, rd = d;
  for (int w = 0; w < 3; ++w) {
    std::vector<SimRank> sim(n);
    for (int r = 0; r < n; ++r) {
      sim[r].plan = w == 0 ? &p0[r] : w == 1 ? &p1[r] : &p2[r];
      sim[r].bufs.send = w == 0 ? ra[r].data() : w == 1 ? rb[r].data() : rc[r].data();
      sim[r].bufs.recv = w == 0 ? rb[r].data() : w == 1 ? rc[r].data() : rd[r].data();
      sim[r].reducer = Reducer(ncclFloat32, ncclSum, n);
    }
    Simulator s(n, 2, SimGeometry{4, 256, false});
    const SimResult res = s.run(sim);
    ASSERT_TRUE(res.ok) << res.error;
  }
  Fabric fabric(4, 256);
  std::vector<EmuLaunch> launches(n);
  std::vector<EmuLaunch*> ptrs;
  for (int r = 0; r < n; ++r) {
    std::vector<EmuWork> works(3);
    works[0].plan = &p0[r];
    works[0].send = a[r].data();
    works[0].recv = b[r].data();
    works[1].plan = &p1[r];
    works[1].send = b[r].data();
    works[1].recv = c[r].data();
    works[2].plan = &p2[r];
    works[2].send = c[r].data();
    works[2].recv = d[r].data();
    for (auto& w : works) w.nranks = n;
    ASSERT_TRUE(launches[r].build(&fabric, r, 4, works));
    ptrs.push_back(&launches[r]);
  }
  for (int replay = 0; replay < 2; ++replay) {
    for (int r = 0; r < n; ++r) {
      std::fill(b[r].begin(), b[r].end(), 0.f);
      std::fill(c[r].begin(), c[r].end(), 0.f);
      std::fill(d[r].begin(), d[r].end(), 0.f);
    }
    const auto ok = runAll(ptrs, ncclFloat32, DevRed::kSum);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(ok[r]) << "rank " << r << " replay " << replay;
      EXPECT_EQ(0, std::memcmp(b[r].data(), rb[r].data(), count * 4)) << "rank " << r;
      EXPECT_EQ(0, std::memcmp(c[r].data(), rc[r].data(), count * 4)) << "rank " << r;
      EXPECT_EQ(0, std::memcmp(d[r].data(), rd[r].data(), (count / n) * 4)) << "rank " << r;
      const DevControl& ctl = launches[r].control();
      EXPECT_EQ(ctl.started, uint64_t(replay + 1));
      EXPECT_EQ(ctl.finished, uint64_t(replay + 1));
      EXPECT_GT(ctl.progress, 0u);
      EXPECT_EQ(ctl.error, 0u);
      // The arrival count is back to 0, the launch count went up.
      EXPECT_EQ(launches[r].barrier()[0], 0u);
      EXPECT_EQ(launches[r].barrier()[1], uint32_t(replay + 1));
    }
    EXPECT_TRUE(fabric.drained());
  }
}

// ---- giving up instead of hanging -------------------------------------------------------

/// Rank 0 of a 2-rank ring all-reduce runs alone (its peer never starts); `stop` makes
/// it give up. Returns how long it took after stop() and whether it returned false.
template <class Stop>
void expectGivesUp(Stop stop, bool withData = false) {
  Plan p = buildOrDie(Coll::kAllReduce, "ring", 2, 0, 300, 4, false, PlanParams{256, 1});
  std::vector<float> send = floats(300, 1), recv(300);
  Fabric fabric(4, 128);
  EmuLaunch l;
  EmuWork w;
  w.plan = &p;
  w.send = send.data();
  w.recv = recv.data();
  w.nranks = 2;
  ASSERT_TRUE(l.build(&fabric, 0, 4, {w}));
  (void)withData;
  std::atomic<bool> done{false};
  bool ok = true;
  std::thread t([&] {
    ok = emulateDevBlock(l.launch(), 0, ncclFloat32, DevRed::kSum);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(done.load()) << "finished without its peer";
  const auto t0 = Clock::now();
  stop(l, fabric);
  while (!done && Clock::now() - t0 < std::chrono::seconds(10)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!done) {
    // Do not leave a hung thread behind: abort it for good, then fail.
    __atomic_store_n(&l.control().abort, 1u, __ATOMIC_RELEASE);
    t.join();
    FAIL() << "still blocked 10 s after being stopped";
  }
  t.join();
  EXPECT_FALSE(ok);
  EXPECT_EQ(l.control().error, 1u);
  EXPECT_LT(secs, 2.0);
  EXPECT_EQ(l.control().started, 1u);
}

TEST(EmuGiveUp, AbortWhileWaitingForAPeer) {
  expectGivesUp([](EmuLaunch& l, Fabric&) { __atomic_store_n(&l.control().abort, 1u, __ATOMIC_RELEASE); });
}

TEST(EmuGiveUp, ClosedInputFifo) {
  expectGivesUp([](EmuLaunch&, Fabric& f) {
    f.header(1, 0, 0)->closed.store(kFifoSenderAborted, std::memory_order_release);
  });
}

TEST(EmuGiveUp, ClosedOutputFifoWhenFull) {
  // Rank 0 broadcasts from the root to a rank that never reads: the FIFO fills up.
  Plan p = buildOrDie(Coll::kBroadcast, "chain", 2, 0, 4000, 4, false, PlanParams{256, 1});
  std::vector<float> send = floats(4000, 2), recv(4000);
  Fabric fabric(2, 64);
  EmuLaunch l;
  EmuWork w;
  w.plan = &p;
  w.send = send.data();
  w.recv = recv.data();
  ASSERT_TRUE(l.build(&fabric, 0, 4, {w}));
  bool ok = true;
  std::thread t([&] { ok = emulateDevBlock(l.launch(), 0, ncclFloat32, DevRed::kNone); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fabric.header(0, 1, 0)->closed.store(kFifoReceiverAborted, std::memory_order_release);
  t.join();
  EXPECT_FALSE(ok);
  EXPECT_EQ(l.control().error, 1u);
}

TEST(EmuGiveUp, AnotherBlocksErrorReleasesTheGridBarrier) {
  // Two works; block 1 of work 0 waits for a peer that never comes; block 0 finishes
  // work 0 and waits at the barrier. An abort must release both.
  Plan p = buildOrDie(Coll::kAllReduce, "ring", 2, 0, 600, 4, false, PlanParams{256, 2});
  ASSERT_EQ(p.programs.size(), 2u);
  // Make program 0 local only (a copy), so block 0 reaches the barrier.
  p.programs[0].steps.clear();
  Step s;
  s.kind = StepKind::kCopy;
  s.src = {Buf::kSend, 0, 10};
  s.dst = {Buf::kRecv, 0, 10};
  p.programs[0].steps.push_back(s);
  std::vector<float> send = floats(600, 3), recv(600);
  Fabric fabric(4, 128);
  EmuLaunch l;
  EmuWork w;
  w.plan = &p;
  w.send = send.data();
  w.recv = recv.data();
  ASSERT_TRUE(l.build(&fabric, 0, 4, {w, w}));
  std::vector<char> ok(2, 1);
  std::vector<std::thread> ts;
  for (uint32_t b = 0; b < 2; ++b)
    ts.emplace_back([&, b] { ok[b] = emulateDevBlock(l.launch(), b, ncclFloat32, DevRed::kSum); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  __atomic_store_n(&l.control().abort, 1u, __ATOMIC_RELEASE);
  for (auto& t : ts) t.join();
  EXPECT_FALSE(ok[0]);
  EXPECT_FALSE(ok[1]);
  EXPECT_EQ(l.control().error, 1u);
  // The barrier words are consistent again: one launch counted, no arrival pending.
  EXPECT_EQ(l.barrier()[0], 0u);
  EXPECT_EQ(l.barrier()[1], 1u);
  EXPECT_EQ(l.control().finished, 1u);
}

// ---- the host at the other end ----------------------------------------------------------

TEST(EmuInterop, ClosedAfterTheLastBytesStillDelivers) {
  // A host sender (the proxy's view) publishes everything in odd-sized slots, then
  // closes: the kernel must still receive all of it.
  constexpr uint64_t count = 700;
  Plan p;
  p.programs.resize(1);
  Step s;
  s.kind = StepKind::kRecv;
  s.recvPeer = 1;
  s.dst = {Buf::kRecv, 0, count};
  p.programs[0].steps.push_back(s);
  std::vector<float> src = floats(count, 9), recv(count);
  Fabric fabric(64, 128);
  FifoSender tx(fabric.region(1, 0, 0));
  uint64_t off = 0;
  for (int i = 0; off < count * 4; ++i) {
    const uint64_t n = std::min<uint64_t>(count * 4 - off, 4 * (1 + (i * 7) % 31));
    char* slot = tx.acquire();
    ASSERT_NE(slot, nullptr);
    std::memcpy(slot, reinterpret_cast<char*>(src.data()) + off, n);
    tx.commit(n);
    off += n;
  }
  tx.close(kFifoSenderAborted);
  EmuLaunch l;
  EmuWork w;
  w.plan = &p;
  w.recv = recv.data();
  ASSERT_TRUE(l.build(&fabric, 0, 4, {w}));
  EXPECT_TRUE(emulateDevBlock(l.launch(), 0, ncclFloat32, DevRed::kNone));
  EXPECT_EQ(0, std::memcmp(recv.data(), src.data(), count * 4));
  EXPECT_TRUE(tx.drained());
}

TEST(EmuInterop, HostSenderAndReceiverReslice) {
  // kernel Send -> host FifoReceiver consuming in random parts; host FifoSender in
  // random slot sizes -> kernel Recv (the net proxy re-slices so).
  constexpr uint64_t count = 5000;
  Plan p;
  p.sliceBytes = 96;
  p.programs.resize(2);
  Step tx;
  tx.kind = StepKind::kSend;
  tx.sendPeer = 1;
  tx.src = {Buf::kSend, 0, count};
  p.programs[0].steps.push_back(tx);
  for (uint64_t off = 0; off < count; off += 1000) {  // several receive steps
    Step rx;
    rx.kind = StepKind::kRecv;
    rx.recvPeer = 1;
    rx.dst = {Buf::kRecv, off, 1000};
    p.programs[1].steps.push_back(rx);
  }
  std::vector<float> send = floats(count, 4), recv(count), hostIn = floats(count, 5), hostOut(count);
  Fabric fabric(4, 256);
  FifoReceiver hostRx(fabric.region(0, 1, 0));
  FifoSender hostTx(fabric.region(1, 0, 0));
  EmuLaunch l;
  EmuWork w;
  w.plan = &p;
  w.send = send.data();
  w.recv = recv.data();
  ASSERT_TRUE(l.build(&fabric, 0, 4, {w}));
  std::thread kernelBlocks[2];
  bool ok[2] = {false, false};
  for (int b = 0; b < 2; ++b)
    kernelBlocks[b] = std::thread([&, b] { ok[b] = emulateDevBlock(l.launch(), uint32_t(b), ncclFloat32, DevRed::kNone); });
  std::thread host([&] {
    std::mt19937 rng(1);
    uint64_t got = 0, put = 0;
    const uint64_t total = count * 4;
    const auto t0 = Clock::now();
    while ((got < total || put < total) && Clock::now() - t0 < std::chrono::seconds(20)) {
      bool moved = false;
      const char* ptr;
      if (got < total) {
        uint64_t n = hostRx.peek(&ptr);
        if (n) {
          n = std::min<uint64_t>(n, 4 * (1 + rng() % 40));
          std::memcpy(reinterpret_cast<char*>(hostOut.data()) + got, ptr, n);
          hostRx.release(n);
          got += n;
          moved = true;
        }
      }
      if (put < total) {
        if (char* slot = hostTx.acquire()) {
          const uint64_t n = std::min<uint64_t>(total - put, 4 * (1 + rng() % 64));
          std::memcpy(slot, reinterpret_cast<char*>(hostIn.data()) + put, n);
          hostTx.commit(n);
          put += n;
          moved = true;
        }
      }
      if (!moved) std::this_thread::yield();
    }
    if (got < total || put < total) __atomic_store_n(&l.control().abort, 1u, __ATOMIC_RELEASE);
  });
  for (auto& t : kernelBlocks) t.join();
  host.join();
  EXPECT_TRUE(ok[0]);
  EXPECT_TRUE(ok[1]);
  EXPECT_EQ(0, std::memcmp(hostOut.data(), send.data(), count * 4));
  EXPECT_EQ(0, std::memcmp(recv.data(), hostIn.data(), count * 4));
  EXPECT_TRUE(fabric.drained());
}

TEST(EmuInterop, HostExecutorRankInTheRing) {
  // Ranks 0 and 2 run the kernel's interpreter (slices of 64 bytes), rank 1 the host
  // executor (whole 256-byte slots): the streams are sliced differently at both ends.
  constexpr int n = 3;
  constexpr uint64_t count = 2999;
  for (const char* algo : {"ring", "tree", "direct"}) {
    std::vector<Plan> plans(n);
    for (int r = 0; r < n; ++r) {
      plans[r] = buildOrDie(Coll::kAllReduce, algo, n, r, count, 4, false, PlanParams{128, 1});
      plans[r].sliceBytes = r == 1 ? 0 : 64;
    }
    std::vector<std::vector<float>> send(n), recv(n, std::vector<float>(count)), ref(n, std::vector<float>(count));
    for (int r = 0; r < n; ++r) send[r] = floats(count, 20 + r);
    std::vector<SimRank> sim(n);
    for (int r = 0; r < n; ++r) {
      sim[r].plan = &plans[r];
      sim[r].bufs.send = send[r].data();
      sim[r].bufs.recv = ref[r].data();
      sim[r].reducer = Reducer(ncclFloat32, ncclSum, n);
    }
    Simulator s(n, 1, SimGeometry{4, 256, false});
    ASSERT_TRUE(s.run(sim).ok);

    Fabric fabric(4, 256);
    EmuLaunch l0, l2;
    EmuWork w;
    w.nranks = n;
    w.plan = &plans[0];
    w.send = send[0].data();
    w.recv = recv[0].data();
    ASSERT_TRUE(l0.build(&fabric, 0, 4, {w}));
    w.plan = &plans[2];
    w.send = send[2].data();
    w.recv = recv[2].data();
    ASSERT_TRUE(l2.build(&fabric, 2, 4, {w}));
    HostConns conns(&fabric, 1, plans[1]);
    std::string hostError;
    std::thread host([&] {
      PlanRun run(&plans[1], PlanBuffers{send[1].data(), recv[1].data(), nullptr},
                  Reducer(ncclFloat32, ncclSum, n), &conns, false);
      const auto t0 = Clock::now();
      while (run.state() == RunState::kRunning && Clock::now() - t0 < std::chrono::seconds(20))
        if (!run.progress()) std::this_thread::yield();
      if (run.state() != RunState::kDone) hostError = "host rank: " + run.error() + " " + run.describeWait();
    });
    const auto ok = runAll({&l0, &l2}, ncclFloat32, DevRed::kSum);
    host.join();
    ASSERT_TRUE(hostError.empty()) << algo << ": " << hostError;
    EXPECT_TRUE(ok[0] && ok[1]) << algo;
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(0, std::memcmp(recv[r].data(), ref[r].data(), count * 4)) << algo << " rank " << r;
    EXPECT_TRUE(fabric.drained()) << algo;
  }
}

// ---- grouped send/recv ------------------------------------------------------------------

TEST(EmuP2p, RingExchangeWithSelf) {
  for (int n : {1, 2, 4}) {
    constexpr uint64_t count = 777;
    std::vector<Plan> plans(n);
    const Algorithm* algo = findAlgorithm(Coll::kSendRecv, "p2p");
    ASSERT_NE(algo, nullptr);
    for (int r = 0; r < n; ++r) {
      PlanArgs a;
      a.coll = Coll::kSendRecv;
      a.nranks = n;
      a.rank = r;
      a.typeSize = 8;
      // recv from the left into [0, count), send [0, count) to the right, and a copy
      // to self into [count, 2 count).
      a.p2p.push_back(P2pOp{false, (r + n - 1) % n, Buf::kRecv, 0, count});
      a.p2p.push_back(P2pOp{true, (r + 1) % n, Buf::kSend, 0, count});
      a.p2p.push_back(P2pOp{true, r, Buf::kSend, count, count});
      a.p2p.push_back(P2pOp{false, r, Buf::kRecv, count, count});
      ASSERT_TRUE(algo->build(a, PlanParams{256, 2}, &plans[r]));
    }
    std::vector<std::vector<double>> send(n, std::vector<double>(2 * count)), recv(n, std::vector<double>(2 * count));
    for (int r = 0; r < n; ++r) fillValues(ncclFloat64, send[r].data(), 2 * count, 40 + r);
    Fabric fabric(4, 256);
    std::vector<EmuLaunch> ls(n);
    std::vector<EmuLaunch*> ptrs;
    for (int r = 0; r < n; ++r) {
      EmuWork w;
      w.plan = &plans[r];
      w.send = send[r].data();
      w.recv = recv[r].data();
      ASSERT_TRUE(ls[r].build(&fabric, r, 8, {w}));
      ptrs.push_back(&ls[r]);
    }
    const auto ok = runAll(ptrs, ncclFloat64, DevRed::kNone);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(ok[r]);
      EXPECT_EQ(0, std::memcmp(recv[r].data(), send[(r + n - 1) % n].data(), count * 8)) << n << " " << r;
      EXPECT_EQ(0, std::memcmp(recv[r].data() + count, send[r].data() + count, count * 8)) << n << " " << r;
    }
  }
}


// A group's send/recv ops as the CUDA executor places them (planLaunches): one block
// range per (peer, direction) lane, several ops per lane in order, then a collective
// after a grid barrier. Every rank sends before it receives and each message is many
// FIFOs long, so the lanes must run side by side (one after another would deadlock).
TEST(EmuP2p, GroupedOpsRunSideBySideAsTheExecutorPlacesThem) {
  for (int n : {2, 3}) {
    constexpr uint64_t count = 777;  // doubles: ~6 KiB per message through 1 KiB FIFOs
    const Algorithm* p2p = findAlgorithm(Coll::kSendRecv, "p2p");
    const Algorithm* ring = findAlgorithm(Coll::kAllGather, "ring");
    ASSERT_NE(p2p, nullptr);
    ASSERT_NE(ring, nullptr);
    // Per rank: send A, send B to the right; recv A, recv B from the left; all-gather.
    std::vector<std::vector<Plan>> plans(n, std::vector<Plan>(5));
    std::vector<std::vector<double>> send(n, std::vector<double>(2 * count)),
        recv(n, std::vector<double>(2 * count)), gathered(n, std::vector<double>(count * n));
    Fabric fabric(4, 256);
    std::vector<EmuLaunch> ls(n);
    std::vector<EmuLaunch*> ptrs;
    for (int r = 0; r < n; ++r) {
      fillValues(ncclFloat64, send[r].data(), 2 * count, 70 + r);
      const int right = (r + 1) % n, left = (r + n - 1) % n;
      const P2pOp ops[4] = {{true, right, Buf::kSend, 0, count},
                            {true, right, Buf::kSend, 0, count},
                            {false, left, Buf::kRecv, 0, count},
                            {false, left, Buf::kRecv, 0, count}};
      std::vector<LaunchItem> items;
      for (int k = 0; k < 4; ++k) {
        PlanArgs a;
        a.coll = Coll::kSendRecv;
        a.nranks = n;
        a.rank = r;
        a.typeSize = 8;
        a.p2p.push_back(ops[k]);
        ASSERT_TRUE(p2p->build(a, PlanParams{256, 1}, &plans[r][k]));
        LaunchItem it;
        it.coll = Coll::kSendRecv;
        it.peer = ops[k].peer;
        it.isSend = ops[k].isSend;
        it.nPrograms = uint32_t(plans[r][k].programs.size());
        items.push_back(it);
      }
      PlanArgs g;
      g.coll = Coll::kAllGather;
      g.nranks = n;
      g.rank = r;
      g.count = count;
      g.typeSize = 8;
      ASSERT_TRUE(ring->build(g, PlanParams{256, 1}, &plans[r][4]));
      LaunchItem it;
      it.coll = Coll::kAllGather;
      it.nPrograms = uint32_t(plans[r][4].programs.size());
      items.push_back(it);
      std::vector<LaunchSpec> specs;
      std::string why;
      ASSERT_TRUE(planLaunches(items, &specs, &why)) << why;
      ASSERT_EQ(specs.size(), 1u);
      std::vector<EmuWork> works(5);
      for (int k = 0; k < 5; ++k) {
        works[k].plan = &plans[r][k];
        works[k].firstBlock = specs[0].firstBlock[size_t(k)];
        works[k].newStage = specs[0].newStage[size_t(k)] != 0;
      }
      // The second op of each lane writes / reads the second half.
      works[0].send = send[r].data();
      works[1].send = send[r].data() + count;
      works[2].recv = recv[r].data();
      works[3].recv = recv[r].data() + count;
      works[4].send = send[r].data();
      works[4].recv = gathered[r].data();
      ASSERT_TRUE(ls[r].build(&fabric, r, 8, works));
      ptrs.push_back(&ls[r]);
    }
    const auto ok = runAll(ptrs, ncclFloat64, DevRed::kNone);
    for (int r = 0; r < n; ++r) {
      const int left = (r + n - 1) % n;
      EXPECT_TRUE(ok[r]) << n << " ranks, rank " << r;
      EXPECT_EQ(0, std::memcmp(recv[r].data(), send[left].data(), 2 * count * 8)) << n << " " << r;
      for (int q = 0; q < n; ++q)
        EXPECT_EQ(0, std::memcmp(gathered[r].data() + q * count, send[q].data(), count * 8))
            << n << " ranks, rank " << r << ", block of rank " << q;
    }
  }
}


// ---- direct access: signals carried over works and launches -------------------------------

Plan buildDirect(Coll coll, const char* algo, int n, int r, uint64_t count, bool inPlace,
                 int programs) {
  PlanArgs a;
  a.coll = coll;
  a.nranks = n;
  a.rank = r;
  a.count = count;
  a.typeSize = 4;
  a.inPlace = inPlace;
  a.peerAccess = true;
  Plan p;
  const Algorithm* al = findAlgorithm(coll, algo);
  EXPECT_NE(al, nullptr) << algo;
  if (al) {
    EXPECT_TRUE(al->build(a, PlanParams{512, programs}, &p)) << algo;
  }
  return p;
}

TEST(EmuDirect, SignalCountsCarryOverWorksAndReplays) {
  // One launch of two direct-access works (reduce_put all-reduce a -> b, then peer_put
  // all-gather of b's first block -> c), replayed: each replay starts where the slots'
  // counts are, so nothing is reset, and every slot ends at 2 signals x 2 works x runs.
  constexpr int n = 3, programs = 4;
  constexpr uint64_t count = 3001;
  std::vector<Plan> p0(n), p1(n);
  for (int r = 0; r < n; ++r) {
    p0[r] = buildDirect(Coll::kAllReduce, "reduce_put", n, r, count, false, programs);
    p1[r] = buildDirect(Coll::kAllGather, "peer_put", n, r, count / n, false, programs);
  }
  std::vector<std::vector<float>> a(n), b(n, std::vector<float>(count)),
      c(n, std::vector<float>(count / n * n));
  for (int r = 0; r < n; ++r) a[r] = floats(count, r + 11);
  std::vector<float> sum(count, 0.0f);
  for (uint64_t i = 0; i < count; ++i) {
    float acc = a[1][i] + a[0][i];  // rank order, as every executor reduces
    for (int r = 2; r < n; ++r) acc = a[r][i] + acc;
    sum[i] = acc;
  }
  Fabric fabric(4, 256);
  std::vector<EmuLaunch> ls(n);
  std::vector<EmuLaunch*> ptrs;
  for (int r = 0; r < n; ++r) {
    std::vector<EmuWork> works(2);
    works[0].plan = &p0[r];
    works[0].send = a[r].data();
    works[0].recv = b[r].data();
    works[1].plan = &p1[r];
    works[1].send = b[r].data();
    works[1].recv = c[r].data();
    for (EmuWork& w : works) w.nranks = n;
    ASSERT_TRUE(ls[r].build(&fabric, r, 4, works));
    ptrs.push_back(&ls[r]);
  }
  for (int run = 1; run <= 3; ++run) {
    for (int r = 0; r < n; ++r) std::fill(c[r].begin(), c[r].end(), -1.0f);
    const auto ok = runAll(ptrs, ncclFloat32, DevRed::kSum);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(ok[r]) << "run " << run << " rank " << r;
      ASSERT_EQ(0, std::memcmp(b[r].data(), sum.data(), count * 4)) << "run " << run << " rank " << r;
      for (int q = 0; q < n; ++q)
        ASSERT_EQ(0, std::memcmp(c[r].data() + q * (count / n), sum.data(), (count / n) * 4))
            << "run " << run << " rank " << r << " block " << q;
      for (int prog = 0; prog < programs; ++prog)
        EXPECT_EQ(fabric.area(r).slot[prog].signals, uint64_t(4 * run))
            << "run " << run << " rank " << r << " program " << prog;
    }
  }
}

TEST(EmuDirect, AWaitForAMissingRankGivesUpOnAbort) {
  // Rank 2 never launches: ranks 0 and 1 wait at the first barrier until aborted.
  constexpr int n = 3;
  std::vector<Plan> plans(n);
  for (int r = 0; r < n; ++r) plans[r] = buildDirect(Coll::kAllReduce, "reduce_put", n, r, 999, false, 2);
  std::vector<std::vector<float>> a(n, std::vector<float>(999, 1.0f)), b(n, std::vector<float>(999));
  Fabric fabric(4, 256);
  std::vector<EmuLaunch> ls(2);
  std::vector<EmuLaunch*> ptrs;
  for (int r = 0; r < 2; ++r) {
    EmuWork w;
    w.plan = &plans[r];
    w.send = a[r].data();
    w.recv = b[r].data();
    w.nranks = n;
    ASSERT_TRUE(ls[r].build(&fabric, r, 4, {w}));
    ptrs.push_back(&ls[r]);
  }
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (EmuLaunch* l : ptrs) __atomic_store_n(&l->control().abort, 1u, __ATOMIC_RELEASE);
  });
  const auto t0 = Clock::now();
  const auto ok = runAll(ptrs, ncclFloat32, DevRed::kSum);
  aborter.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(ok[r]) << r;
    EXPECT_EQ(ls[r].control().error, 1u) << r;
  }
}

}  // namespace
}  // namespace emutest
}  // namespace braid
