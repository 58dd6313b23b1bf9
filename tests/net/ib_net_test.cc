// The IB verbs net (ibNet(), transports/net_ib/) driven through its ncclNet_v11_t table,
// as the net transport drives it: listen/connect/accept, regMr, isend/irecv/test.
//
// Needs an active RDMA port; without one every data test skips. Soft-RoCE in a qemu
// guest provides one:   scripts/rdma-guest.sh -- build/bin/braid_ib_net_test
// The process tests re-run this executable (fork + exec of /proc/self/exe) with
// BRAID_IB_TEST_ROLE set, so that each side has verbs state of its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/net_plugin.h"
#include "transports/net/builtin_nets.h"
#if __has_include(<infiniband/verbs.h>)
#include "transports/net_ib/ib_device.h"
#endif

namespace braid {
namespace {

constexpr const char* kNoPort =
    "no active RDMA port (ibv_get_device_list found none): run under scripts/rdma-guest.sh";
constexpr int64_t kSetupTimeoutMs = 120000;  // emulated guests are slow
constexpr int64_t kIoTimeoutMs = 120000;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct TheNet {
  const ncclNet_v11_t* net = nullptr;
  void* ctx = nullptr;
  int ndev = 0;
};

TheNet& theNet() {
  static TheNet n = [] {
    TheNet t;
    t.net = ibNet();
    if (t.net && t.net->init(&t.ctx, 0, nullptr, nullptr, nullptr) == ncclSuccess)
      t.net->devices(&t.ndev);
    return t;
  }();
  return n;
}

#define REQUIRE_IB_PORT()                                                                   \
  do {                                                                                      \
    if (!theNet().net) GTEST_SKIP() << "libibverbs.so.1 cannot be loaded: ibNet() is NULL"; \
    if (theNet().ndev == 0) GTEST_SKIP() << kNoPort;                                        \
  } while (0)

uint8_t pattern(uint64_t msg, size_t i) { return uint8_t((msg * 131 + i * 7 + (i >> 9)) & 0xff); }

struct Pair {
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  ~Pair() {
    const ncclNet_v11_t* n = theNet().net;
    if (send) n->closeSend(send);
    if (recv) n->closeRecv(recv);
    if (listen) n->closeListen(listen);
  }
};

// Both ends from one thread: connect() and accept() never block, so alternating them
// must finish the handshake.
::testing::AssertionResult connectPair(Pair* p) {
  const ncclNet_v11_t* n = theNet().net;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  if (n->listen(theNet().ctx, 0, handle, &p->listen) != ncclSuccess)
    return ::testing::AssertionFailure() << "listen failed";
  const int64_t deadline = nowMs() + kSetupTimeoutMs;
  while (!p->send || !p->recv) {
    if (!p->send && n->connect(theNet().ctx, 0, handle, &p->send, nullptr) != ncclSuccess)
      return ::testing::AssertionFailure() << "connect failed";
    if (!p->recv && n->accept(p->listen, &p->recv, nullptr) != ncclSuccess)
      return ::testing::AssertionFailure() << "accept failed";
    if (nowMs() > deadline) return ::testing::AssertionFailure() << "setup timed out";
  }
  return ::testing::AssertionSuccess();
}

// Waits for a request; returns the size it reports, -1 on error, -2 on timeout.
int waitReq(void* req, int64_t timeoutMs = kIoTimeoutMs) {
  const int64_t deadline = nowMs() + timeoutMs;
  for (;;) {
    int done = 0, size = -1;
    if (theNet().net->test(req, &done, &size) != ncclSuccess) return -1;
    if (done) return size;
    if (nowMs() > deadline) return -2;
  }
}

// One message of sendSize bytes into a receive of postSize bytes, checked byte for byte,
// including that nothing past the message was touched.
void transfer(const Pair& p, size_t sendSize, size_t postSize, uint64_t msg) {
  const ncclNet_v11_t* n = theNet().net;
  std::vector<uint8_t> sbuf(sendSize + 1), rbuf(postSize + 64, 0xEE);
  for (size_t i = 0; i < sendSize; ++i) sbuf[i] = pattern(msg, i);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(n->regMr(p.send, sbuf.data(), sbuf.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(n->regMr(p.recv, rbuf.data(), rbuf.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void* rdata = rbuf.data();
  size_t rsize = postSize;
  int tag = 0;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(n->irecv(p.recv, 1, &rdata, &rsize, &tag, &rmh, nullptr, &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  const int64_t deadline = nowMs() + kIoTimeoutMs;
  while (!sreq) {
    ASSERT_EQ(n->isend(p.send, sbuf.data(), sendSize, 0, smh, nullptr, &sreq), ncclSuccess);
    ASSERT_LT(nowMs(), deadline) << "the receiver's FIFO entry never reached the sender";
  }
  EXPECT_EQ(waitReq(sreq), int(sendSize));
  EXPECT_EQ(waitReq(rreq), int(sendSize));
  size_t bad = 0;
  for (size_t i = 0; i < sendSize; ++i) bad += rbuf[i] != pattern(msg, i);
  EXPECT_EQ(bad, 0u) << "corrupt bytes in a " << sendSize << " byte message";
  for (size_t i = sendSize; i < rbuf.size(); ++i)
    if (rbuf[i] != 0xEE) {
      ADD_FAILURE() << "byte " << i << " past the message was written";
      break;
    }
  EXPECT_EQ(n->deregMr(p.send, smh), ncclSuccess);
  EXPECT_EQ(n->deregMr(p.recv, rmh), ncclSuccess);
}

TEST(IbNet, TableIsComplete) {
  const ncclNet_v11_t* n = ibNet();
  if (!n) GTEST_SKIP() << "libibverbs.so.1 cannot be loaded: ibNet() is NULL";
  EXPECT_STREQ(n->name, "IB");
  for (const void* f :
       {(const void*)n->init, (const void*)n->devices, (const void*)n->getProperties,
        (const void*)n->listen, (const void*)n->connect, (const void*)n->accept,
        (const void*)n->regMr, (const void*)n->deregMr, (const void*)n->isend,
        (const void*)n->irecv, (const void*)n->iflush, (const void*)n->test,
        (const void*)n->closeSend, (const void*)n->closeRecv, (const void*)n->closeListen})
    EXPECT_NE(f, nullptr);
  int ndev = -1;
  ASSERT_EQ(n->devices(&ndev), ncclSuccess);
  EXPECT_GE(ndev, 0);
  ncclNetProperties_v11_t props;
  EXPECT_NE(n->getProperties(ndev, &props), ncclSuccess) << "a device past the last one";
}

#if __has_include(<infiniband/verbs.h>)
TEST(IbNet, HcaFilter) {
  EXPECT_TRUE(ib::ibHcaAllowed("", "mlx5_0", 1));
  EXPECT_TRUE(ib::ibHcaAllowed("mlx5", "mlx5_10", 1));
  EXPECT_FALSE(ib::ibHcaAllowed("=mlx5_1", "mlx5_10", 1));
  EXPECT_TRUE(ib::ibHcaAllowed("=mlx5_1", "mlx5_1", 2));
  EXPECT_TRUE(ib::ibHcaAllowed("mlx5_0:1,rxe", "rxe0", 1));
  EXPECT_FALSE(ib::ibHcaAllowed("mlx5_0:1", "mlx5_0", 2));
  EXPECT_FALSE(ib::ibHcaAllowed("^rxe", "rxe0", 1));
  EXPECT_TRUE(ib::ibHcaAllowed("^rxe", "mlx5_0", 1));
  EXPECT_FALSE(ib::ibHcaAllowed("^=mlx5_0:1", "mlx5_0", 1));
  EXPECT_TRUE(ib::ibHcaAllowed("^=mlx5_0:1", "mlx5_0", 2));
}
#endif

TEST(IbNet, Properties) {
  REQUIRE_IB_PORT();
  ncclNetProperties_v11_t p;
  ASSERT_EQ(theNet().net->getProperties(0, &p), ncclSuccess);
  ASSERT_NE(p.name, nullptr);
  EXPECT_GT(std::strlen(p.name), 0u);
  EXPECT_TRUE(p.ptrSupport & NCCL_PTR_HOST);
  EXPECT_GT(p.speed, 0);
  EXPECT_GE(p.port, 1);
  EXPECT_EQ(p.maxRecvs, 8);
  EXPECT_GE(p.maxP2pBytes, size_t(8) << 20);
  printf("IB device 0: %s port %d, %d Mbit/s, pciPath %s, ptrSupport 0x%x, maxComms %d\n", p.name,
         p.port, p.speed, p.pciPath ? p.pciPath : "(none)", p.ptrSupport, p.maxComms);
}

class IbNetQps : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    setenv("NCCL_IB_QPS_PER_CONNECTION", std::to_string(GetParam()).c_str(), 1);
  }
  void TearDown() override { unsetenv("NCCL_IB_QPS_PER_CONNECTION"); }
};

TEST_P(IbNetQps, SizesAndSmallerThanPosted) {
  REQUIRE_IB_PORT();
  Pair p;
  ASSERT_TRUE(connectPair(&p));
  uint64_t msg = 1;
  for (size_t size : {size_t(0), size_t(1), size_t(4096), size_t(1) << 20, size_t(8) << 20})
    transfer(p, size, size, msg++);
  transfer(p, 1000, size_t(1) << 20, msg++);  // smaller than posted
  transfer(p, 0, 4096, msg++);
  transfer(p, (size_t(3) << 20) + 5, size_t(8) << 20, msg++);  // odd split across QPs
}

// Multi-receive: one irecv of n tagged buffers; sends match them by tag (the first
// buffer not yet served whose tag matches), in any order; test() reports each size.
void multiRecv(const Pair& p, const std::vector<int>& tags, const std::vector<size_t>& posted,
               const std::vector<int>& sendOrder, const std::vector<size_t>& sendSizes,
               uint64_t msg) {
  const ncclNet_v11_t* n = theNet().net;
  const int nb = int(tags.size());
  const size_t nbuf = tags.size();
  std::vector<std::vector<uint8_t>> rbufs(nbuf), sbufs(sendOrder.size());
  std::vector<void*> rdata(nbuf), rmh(nbuf), smh(sendOrder.size());
  std::vector<size_t> rsize(posted);
  std::vector<int> rtags(tags);
  for (int i = 0; i < nb; ++i) {
    rbufs[size_t(i)].assign(posted[size_t(i)] + 64, 0xEE);
    rdata[size_t(i)] = rbufs[size_t(i)].data();
    ASSERT_EQ(n->regMr(p.recv, rdata[size_t(i)], rbufs[size_t(i)].size(), NCCL_PTR_HOST,
                       &rmh[size_t(i)]), ncclSuccess);
  }
  void* rreq = nullptr;
  ASSERT_EQ(n->irecv(p.recv, nb, rdata.data(), rsize.data(), rtags.data(), rmh.data(), nullptr,
                     &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  // Which buffer each send lands in: the first unserved one with its tag.
  std::vector<int> target;
  std::vector<bool> served(size_t(nb), false);
  for (int t : sendOrder) {
    int i = 0;
    while (i < nb && (served[size_t(i)] || tags[size_t(i)] != t)) ++i;
    ASSERT_LT(i, nb) << "test bug: a send with no buffer";
    served[size_t(i)] = true;
    target.push_back(i);
  }
  std::vector<void*> sreqs;
  for (size_t k = 0; k < sendOrder.size(); ++k) {
    sbufs[k].resize(sendSizes[k] + 1);
    for (size_t b = 0; b < sendSizes[k]; ++b) sbufs[k][b] = pattern(msg + k, b);
    ASSERT_EQ(n->regMr(p.send, sbufs[k].data(), sbufs[k].size(), NCCL_PTR_HOST, &smh[k]),
              ncclSuccess);
    void* sreq = nullptr;
    const int64_t deadline = nowMs() + kIoTimeoutMs;
    while (!sreq) {
      ASSERT_EQ(n->isend(p.send, sbufs[k].data(), sendSizes[k], sendOrder[k], smh[k], nullptr,
                         &sreq), ncclSuccess);
      ASSERT_LT(nowMs(), deadline) << "the receiver's FIFO entry never reached the sender";
    }
    sreqs.push_back(sreq);
  }
  for (size_t k = 0; k < sreqs.size(); ++k) EXPECT_EQ(waitReq(sreqs[k]), int(sendSizes[k]));
  std::vector<int> got(size_t(nb), -7);
  const int64_t deadline = nowMs() + kIoTimeoutMs;
  for (int done = 0; !done;) {
    ASSERT_EQ(n->test(rreq, &done, got.data()), ncclSuccess);
    ASSERT_LT(nowMs(), deadline) << "the multi-receive never completed";
  }
  for (size_t k = 0; k < sendOrder.size(); ++k) {
    const size_t i = size_t(target[k]);
    EXPECT_EQ(got[i], int(sendSizes[k])) << "size reported for buffer " << i;
    size_t bad = 0;
    for (size_t b = 0; b < sendSizes[k]; ++b) bad += rbufs[i][b] != pattern(msg + k, b);
    EXPECT_EQ(bad, 0u) << "buffer " << i << " (tag " << tags[i] << ")";
    for (size_t b = sendSizes[k]; b < rbufs[i].size(); ++b)
      if (rbufs[i][b] != 0xEE) {
        ADD_FAILURE() << "buffer " << i << ": byte " << b << " past the message was written";
        break;
      }
  }
  for (void* mh : rmh) EXPECT_EQ(n->deregMr(p.recv, mh), ncclSuccess);
  for (void* mh : smh) EXPECT_EQ(n->deregMr(p.send, mh), ncclSuccess);
}

TEST_P(IbNetQps, MultiReceive) {
  REQUIRE_IB_PORT();
  Pair p;
  ASSERT_TRUE(connectPair(&p));
  // Sends out of order, a repeated tag, an empty message, smaller than posted.
  multiRecv(p, {7, 3, 9, 3}, {4096, 1000, 65536, 300000}, {9, 3, 7, 3}, {65536, 0, 4000, 299999},
            100);
  transfer(p, 12345, 12345, 200);  // single receives go on in the next slots
  // All eight, each over several QPs' parts.
  multiRecv(p, {0, 1, 2, 3, 4, 5, 6, 7}, std::vector<size_t>(8, size_t(1) << 20),
            {7, 6, 5, 4, 3, 2, 1, 0},
            {size_t(1) << 20, 1, 128, 129, 4096, 5000, 777777, 65},
            300);
  // Many in a row: slots wrap around (kSlots 32) with mixed group sizes.
  for (uint64_t round = 0; round < 40; ++round) {
    const int nb = 1 + int(round % 8);
    std::vector<int> tags;
    std::vector<size_t> sizes, order_sizes;
    std::vector<int> order;
    for (int i = 0; i < nb; ++i) {
      tags.push_back(i * 10);
      sizes.push_back(8192);
      order.push_back((nb - 1 - i) * 10);
      order_sizes.push_back(size_t(100 + 997 * i));
    }
    multiRecv(p, tags, sizes, order, order_sizes, 1000 + round * 16);
  }
}

TEST(IbNet, MultiReceiveErrors) {
  REQUIRE_IB_PORT();
  const ncclNet_v11_t* n = theNet().net;
  Pair p;
  ASSERT_TRUE(connectPair(&p));
  std::vector<uint8_t> buf(4096);
  void* mh = nullptr;
  ASSERT_EQ(n->regMr(p.recv, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  void* data[9];
  size_t sizes[9];
  int tags[9];
  void* mhs[9];
  for (int i = 0; i < 9; ++i) {
    data[i] = buf.data();
    sizes[i] = 16;
    tags[i] = i;
    mhs[i] = mh;
  }
  void* req = nullptr;
  EXPECT_EQ(n->irecv(p.recv, 9, data, sizes, tags, mhs, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(req, nullptr);
  // Two buffers tagged 1 and 2; a send tagged 5 matches neither.
  ASSERT_EQ(n->irecv(p.recv, 2, data + 1, sizes, tags + 1, mhs, nullptr, &req), ncclSuccess);
  ASSERT_NE(req, nullptr);
  void* smh = nullptr;
  ASSERT_EQ(n->regMr(p.send, buf.data(), buf.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  void* sreq = nullptr;
  ncclResult_t r = ncclSuccess;
  const int64_t deadline = nowMs() + kIoTimeoutMs;
  while (r == ncclSuccess && !sreq && nowMs() < deadline)
    r = n->isend(p.send, buf.data(), 16, 5, smh, nullptr, &sreq);
  EXPECT_EQ(r, ncclInvalidUsage);
  EXPECT_EQ(sreq, nullptr);
  EXPECT_EQ(n->deregMr(p.send, smh), ncclSuccess);
  EXPECT_EQ(n->deregMr(p.recv, mh), ncclSuccess);
}

// A sender thread and a receiver thread, each with up to 8 requests in flight, random
// sizes; meanwhile another connection is set up, used and closed on this thread (setup
// calls on other comms run concurrently with the data path).
TEST_P(IbNetQps, ManyInFlightWithConcurrentSetup) {
  REQUIRE_IB_PORT();
  const ncclNet_v11_t* n = theNet().net;
  Pair p;
  ASSERT_TRUE(connectPair(&p));
  constexpr int kMsgs = 400, kDepth = 8;
  constexpr size_t kMax = 256 << 10;
  auto sizeOf = [](int i) -> size_t {
    uint64_t x = uint64_t(i) * 2654435761u;
    return i % 7 == 0 ? 0 : size_t(x % kMax) + 1;
  };
  std::atomic<bool> sendOk{true}, recvOk{true};
  const int64_t t0 = nowMs();
  std::thread sender([&] {
    std::vector<uint8_t> buf(kDepth * kMax);
    void* mh = nullptr;
    if (n->regMr(p.send, buf.data(), buf.size(), NCCL_PTR_HOST, &mh) != ncclSuccess) {
      sendOk = false;
      return;
    }
    void* reqs[kDepth] = {};
    int posted = 0, done = 0;
    const int64_t deadline = nowMs() + kIoTimeoutMs;
    while (done < kMsgs && nowMs() < deadline) {
      if (posted < kMsgs && posted - done < kDepth) {
        uint8_t* d = buf.data() + (posted % kDepth) * kMax;
        const size_t s = sizeOf(posted);
        for (size_t i = 0; i < s; ++i) d[i] = pattern(uint64_t(posted), i);
        void* r = nullptr;
        if (n->isend(p.send, d, s, 0, mh, nullptr, &r) != ncclSuccess) break;
        if (r) reqs[posted++ % kDepth] = r;
      }
      if (done < posted) {
        int fin = 0, size = 0;
        if (n->test(reqs[done % kDepth], &fin, &size) != ncclSuccess) break;
        if (fin) {
          if (size != int(sizeOf(done))) break;
          ++done;
        }
      }
    }
    sendOk = done == kMsgs;
    n->deregMr(p.send, mh);
  });
  std::thread receiver([&] {
    std::vector<uint8_t> buf(kDepth * kMax);
    void* mh = nullptr;
    if (n->regMr(p.recv, buf.data(), buf.size(), NCCL_PTR_HOST, &mh) != ncclSuccess) {
      recvOk = false;
      return;
    }
    void* reqs[kDepth] = {};
    int posted = 0, done = 0;
    bool good = true;
    const int64_t deadline = nowMs() + kIoTimeoutMs;
    while (good && done < kMsgs && nowMs() < deadline) {
      if (posted < kMsgs && posted - done < kDepth) {
        void* d = buf.data() + (posted % kDepth) * kMax;
        size_t s = kMax;
        int tag = 0;
        void* r = nullptr;
        if (n->irecv(p.recv, 1, &d, &s, &tag, &mh, nullptr, &r) != ncclSuccess) break;
        if (r) reqs[posted++ % kDepth] = r;
      }
      if (done < posted) {
        int fin = 0, size = 0;
        if (n->test(reqs[done % kDepth], &fin, &size) != ncclSuccess) break;
        if (fin) {
          const uint8_t* d = buf.data() + (done % kDepth) * kMax;
          good = size == int(sizeOf(done));
          for (int i = 0; good && i < size; ++i) good = d[i] == pattern(uint64_t(done), size_t(i));
          ++done;
        }
      }
    }
    recvOk = good && done == kMsgs;
    n->deregMr(p.recv, mh);
  });
  {
    Pair other;
    EXPECT_TRUE(connectPair(&other));
    if (other.send && other.recv) transfer(other, 1 << 20, 1 << 20, 99);
  }
  sender.join();
  receiver.join();
  size_t bytes = 0;
  for (int i = 0; i < kMsgs; ++i) bytes += sizeOf(i);
  const double secs = double(nowMs() - t0) / 1000.0;
  printf("%d messages, %.1f MiB in %.2f s: %.1f MiB/s (alongside a second connection's setup)\n",
         kMsgs, double(bytes) / 1048576.0, secs, double(bytes) / 1048576.0 / secs);
  EXPECT_TRUE(sendOk);
  EXPECT_TRUE(recvOk);
}

// Streams 8 MiB messages (4 in flight, data not checked) and prints the rate: a figure
// for logs, not a pass criterion (under emulation it measures the emulator).
// A measurement, not a test (run it with --gtest_also_run_disabled_tests).
TEST_P(IbNetQps, DISABLED_Bandwidth) {
  REQUIRE_IB_PORT();
  const ncclNet_v11_t* n = theNet().net;
  Pair p;
  ASSERT_TRUE(connectPair(&p));
  constexpr int kMsgs = 24, kDepth = 4;
  constexpr size_t kSize = 8 << 20;
  std::vector<uint8_t> sbuf(kSize, 1), rbuf(kSize * kDepth);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(n->regMr(p.send, sbuf.data(), sbuf.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(n->regMr(p.recv, rbuf.data(), rbuf.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void *sreqs[kDepth] = {}, *rreqs[kDepth] = {};
  int sPosted = 0, sDone = 0, rPosted = 0, rDone = 0;
  const int64_t t0 = nowMs(), deadline = t0 + kIoTimeoutMs;
  while ((sDone < kMsgs || rDone < kMsgs) && nowMs() < deadline) {
    if (rPosted < kMsgs && rPosted - rDone < kDepth) {
      void* d = rbuf.data() + (rPosted % kDepth) * kSize;
      size_t s = kSize;
      int tag = 0;
      void* r = nullptr;
      ASSERT_EQ(n->irecv(p.recv, 1, &d, &s, &tag, &rmh, nullptr, &r), ncclSuccess);
      if (r) rreqs[rPosted++ % kDepth] = r;
    }
    if (sPosted < kMsgs && sPosted - sDone < kDepth) {
      void* r = nullptr;
      ASSERT_EQ(n->isend(p.send, sbuf.data(), kSize, 0, smh, nullptr, &r), ncclSuccess);
      if (r) sreqs[sPosted++ % kDepth] = r;
    }
    int done = 0, size = 0;
    if (sDone < sPosted) {
      ASSERT_EQ(n->test(sreqs[sDone % kDepth], &done, &size), ncclSuccess);
      sDone += done;
    }
    if (rDone < rPosted) {
      ASSERT_EQ(n->test(rreqs[rDone % kDepth], &done, &size), ncclSuccess);
      if (done) {
        ASSERT_EQ(size, int(kSize));
      }
      rDone += done;
    }
  }
  ASSERT_EQ(rDone, kMsgs);
  const double secs = double(nowMs() - t0) / 1000.0;
  printf("%d QP(s): %d x 8 MiB in %.2f s = %.1f MiB/s\n", GetParam(), kMsgs, secs,
         kMsgs * 8.0 / secs);
  EXPECT_EQ(n->deregMr(p.send, smh), ncclSuccess);
  EXPECT_EQ(n->deregMr(p.recv, rmh), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Qps, IbNetQps, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "qp";
                         });

TEST(IbNet, RegistrationCache) {
  REQUIRE_IB_PORT();
  const ncclNet_v11_t* n = theNet().net;
  Pair p;
  ASSERT_TRUE(connectPair(&p));
  std::vector<uint8_t> buf(1 << 20);
  void *whole = nullptr, *part = nullptr;
  ASSERT_EQ(n->regMr(p.send, buf.data(), buf.size(), NCCL_PTR_HOST, &whole), ncclSuccess);
  ASSERT_EQ(n->regMr(p.recv, buf.data() + 8192, 4096, NCCL_PTR_HOST, &part), ncclSuccess);
  EXPECT_EQ(whole, part) << "a range inside a registered one reuses its region";
  EXPECT_EQ(n->deregMr(p.send, whole), ncclSuccess);
  EXPECT_EQ(n->deregMr(p.recv, part), ncclSuccess);
  setenv("BRAID_IB_REG_CACHE", "0", 1);
  ASSERT_EQ(n->regMr(p.send, buf.data(), buf.size(), NCCL_PTR_HOST, &whole), ncclSuccess);
  ASSERT_EQ(n->regMr(p.send, buf.data() + 8192, 4096, NCCL_PTR_HOST, &part), ncclSuccess);
  unsetenv("BRAID_IB_REG_CACHE");
  EXPECT_NE(whole, part) << "BRAID_IB_REG_CACHE=0 registers every call";
  EXPECT_EQ(n->deregMr(p.send, whole), ncclSuccess);
  EXPECT_EQ(n->deregMr(p.send, part), ncclSuccess);
}

TEST(IbNet, BadHandleAndTokenRejected) {
  REQUIRE_IB_PORT();
  const ncclNet_v11_t* n = theNet().net;
  char garbage[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* comm = nullptr;
  EXPECT_EQ(n->connect(theNet().ctx, 0, garbage, &comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);

  void* listen = nullptr;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  ASSERT_EQ(n->listen(theNet().ctx, 0, handle, &listen), ncclSuccess);
  char forged[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(forged, handle, sizeof(forged));
  forged[8] ^= 0x5a;  // the token follows the 8-byte magic
  ncclResult_t res = ncclSuccess;
  const int64_t deadline = nowMs() + kSetupTimeoutMs;
  while (res == ncclSuccess && nowMs() < deadline) {
    res = n->connect(theNet().ctx, 0, forged, &comm, nullptr);
    void* recv = nullptr;
    ASSERT_EQ(n->accept(listen, &recv, nullptr), ncclSuccess) << "the listener must survive";
    ASSERT_EQ(recv, nullptr) << "a connection without the token was accepted";
    ASSERT_EQ(comm, nullptr);
  }
  EXPECT_NE(res, ncclSuccess) << "connect with a wrong token must fail, not hang";
  // The listener still accepts the real peer.
  void *send = nullptr, *recv = nullptr;
  while ((!send || !recv) && nowMs() < deadline) {
    if (!send) {
      ASSERT_EQ(n->connect(theNet().ctx, 0, handle, &send, nullptr), ncclSuccess);
    }
    if (!recv) {
      ASSERT_EQ(n->accept(listen, &recv, nullptr), ncclSuccess);
    }
  }
  EXPECT_TRUE(send && recv);
  if (send) n->closeSend(send);
  if (recv) n->closeRecv(recv);
  n->closeListen(listen);
}

// A completion error (the receiver's region is gone before the data lands) fails the
// send with ncclRemoteError and a message naming the peer and the verbs status.
TEST(IbNet, CompletionErrorNamesPeerAndStatus) {
  REQUIRE_IB_PORT();
  const ncclNet_v11_t* n = theNet().net;
  Pair p;
  ASSERT_TRUE(connectPair(&p));
  std::vector<uint8_t> sbuf(64 << 10), rbuf(64 << 10);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(n->regMr(p.send, sbuf.data(), sbuf.size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(n->regMr(p.recv, rbuf.data(), rbuf.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
  void* d = rbuf.data();
  size_t s = rbuf.size();
  int tag = 0;
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(n->irecv(p.recv, 1, &d, &s, &tag, &rmh, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(n->deregMr(p.recv, rmh), ncclSuccess);  // the announced rkey is now invalid
  const int64_t deadline = nowMs() + kIoTimeoutMs;
  ncclResult_t res = ncclSuccess;
  while (!sreq && res == ncclSuccess && nowMs() < deadline)
    res = n->isend(p.send, sbuf.data(), sbuf.size(), 0, smh, nullptr, &sreq);
  ASSERT_EQ(res, ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  int done = 0, size = 0;
  while (res == ncclSuccess && !done && nowMs() < deadline) res = n->test(sreq, &done, &size);
  EXPECT_EQ(res, ncclRemoteError);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find("remote"), std::string::npos) << msg;
  EXPECT_NE(msg.find("send to "), std::string::npos) << "names the peer: " << msg;
  printf("sender: %s\n", msg.c_str());
  // The receiver's QP went to error with it: its request fails too, never completes.
  res = ncclSuccess;
  done = 0;
  while (res == ncclSuccess && !done && nowMs() < deadline) res = n->test(rreq, &done, &size);
  EXPECT_FALSE(done);
  printf("receiver: %d %s\n", int(res), ncclGetLastError(nullptr));
  EXPECT_EQ(n->deregMr(p.send, smh), ncclSuccess);
}

// ---- two processes ----------------------------------------------------------------

std::string toHex(const char* h) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < NCCL_NET_HANDLE_MAXSIZE; ++i) {
    s += digits[(uint8_t(h[i]) >> 4) & 15];
    s += digits[uint8_t(h[i]) & 15];
  }
  return s;
}

void fromHex(const std::string& s, char* h) {
  for (int i = 0; i < NCCL_NET_HANDLE_MAXSIZE && size_t(2 * i + 1) < s.size(); ++i)
    h[i] = char(std::stoi(s.substr(size_t(2 * i), 2), nullptr, 16));
}

constexpr size_t kProcMsg = 1 << 20;

// Starts this executable again as the other side. `role` is "send" or "recv";
// `count` messages of kProcMsg bytes; `hang` keeps the child alive afterwards (to be
// killed). A "recv" child writes its handle to *handleFd.
pid_t spawnChild(const char* role, int count, bool hang, const std::string& handle, int* handleFd) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(fds[0]);
    setenv("BRAID_IB_TEST_ROLE", role, 1);
    setenv("BRAID_IB_TEST_COUNT", std::to_string(count).c_str(), 1);
    setenv("BRAID_IB_TEST_HANG", hang ? "1" : "0", 1);
    setenv("BRAID_IB_TEST_HANDLE", handle.c_str(), 1);
    setenv("BRAID_IB_TEST_FD", std::to_string(fds[1]).c_str(), 1);
    execl("/proc/self/exe", "/proc/self/exe", "--gtest_filter=IbNetChild.Role", nullptr);
    _exit(127);
  }
  close(fds[1]);
  if (handleFd)
    *handleFd = fds[0];
  else
    close(fds[0]);
  return pid;
}

// Exit status of a child, waiting at most timeoutMs (then it is killed: -2).
int waitChild(pid_t pid, int64_t timeoutMs) {
  const int64_t deadline = nowMs() + timeoutMs;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (nowMs() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -2;
    }
    usleep(10000);
  }
}

std::string readHandle(int fd) {
  std::string s;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') s += c;
  return s;
}

// Sends or receives message i of the process tests; returns false on any failure.
bool procMessage(void* comm, bool send, uint64_t i, std::vector<uint8_t>& buf, void* mh) {
  const ncclNet_v11_t* n = theNet().net;
  void* req = nullptr;
  const int64_t deadline = nowMs() + kIoTimeoutMs;
  if (send) {
    for (size_t j = 0; j < kProcMsg; ++j) buf[j] = pattern(i, j);
    while (!req) {
      if (n->isend(comm, buf.data(), kProcMsg, 0, mh, nullptr, &req) != ncclSuccess) return false;
      if (nowMs() > deadline) return false;
    }
    return waitReq(req) == int(kProcMsg);
  }
  void* d = buf.data();
  size_t s = buf.size();
  int tag = 0;
  if (n->irecv(comm, 1, &d, &s, &tag, &mh, nullptr, &req) != ncclSuccess || !req) return false;
  if (waitReq(req) != int(kProcMsg)) return false;
  for (size_t j = 0; j < kProcMsg; ++j)
    if (buf[j] != pattern(i, j)) return false;
  return true;
}

// The other process of the tests below (skips unless started by them).
TEST(IbNetChild, Role) {
  const char* role = getenv("BRAID_IB_TEST_ROLE");
  if (!role) GTEST_SKIP() << "helper process of the IbNetProcess tests";
  REQUIRE_IB_PORT();
  const ncclNet_v11_t* n = theNet().net;
  const bool send = std::strcmp(role, "send") == 0;
  const int count = std::atoi(getenv("BRAID_IB_TEST_COUNT"));
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *listen = nullptr, *comm = nullptr;
  const int64_t deadline = nowMs() + kSetupTimeoutMs;
  if (send) {
    fromHex(getenv("BRAID_IB_TEST_HANDLE"), handle);
    while (!comm && nowMs() < deadline)
      ASSERT_EQ(n->connect(theNet().ctx, 0, handle, &comm, nullptr), ncclSuccess);
  } else {
    ASSERT_EQ(n->listen(theNet().ctx, 0, handle, &listen), ncclSuccess);
    std::string line = toHex(handle) + "\n";
    const int fd = std::atoi(getenv("BRAID_IB_TEST_FD"));
    ASSERT_EQ(write(fd, line.data(), line.size()), ssize_t(line.size()));
    close(fd);
    while (!comm && nowMs() < deadline) ASSERT_EQ(n->accept(listen, &comm, nullptr), ncclSuccess);
  }
  ASSERT_NE(comm, nullptr);
  std::vector<uint8_t> buf(kProcMsg);
  void* mh = nullptr;
  ASSERT_EQ(n->regMr(comm, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  for (int i = 0; i < count; ++i) ASSERT_TRUE(procMessage(comm, send, uint64_t(i), buf, mh));
  if (std::strcmp(getenv("BRAID_IB_TEST_HANG"), "1") == 0)
    for (;;) pause();  // until the parent kills us
  n->deregMr(comm, mh);
  send ? n->closeSend(comm) : n->closeRecv(comm);
  if (listen) n->closeListen(listen);
}

// Parent sends, child (its own process, own verbs context) receives and checks.
TEST(IbNetProcess, ForkedPair) {
  REQUIRE_IB_PORT();
  setenv("NCCL_IB_QPS_PER_CONNECTION", "2", 1);
  const ncclNet_v11_t* n = theNet().net;
  int fd = -1;
  const int kCount = 20;
  pid_t pid = spawnChild("recv", kCount, false, "", &fd);
  ASSERT_GT(pid, 0);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  fromHex(readHandle(fd), handle);
  close(fd);
  void* comm = nullptr;
  const int64_t deadline = nowMs() + kSetupTimeoutMs;
  while (!comm && nowMs() < deadline)
    ASSERT_EQ(n->connect(theNet().ctx, 0, handle, &comm, nullptr), ncclSuccess);
  unsetenv("NCCL_IB_QPS_PER_CONNECTION");
  ASSERT_NE(comm, nullptr);
  std::vector<uint8_t> buf(kProcMsg);
  void* mh = nullptr;
  ASSERT_EQ(n->regMr(comm, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  for (int i = 0; i < kCount; ++i) EXPECT_TRUE(procMessage(comm, true, uint64_t(i), buf, mh));
  EXPECT_EQ(waitChild(pid, kIoTimeoutMs), 0) << "the receiving process failed";
  n->deregMr(comm, mh);
  EXPECT_EQ(n->closeSend(comm), ncclSuccess);
}

// A peer killed with requests outstanding: the survivor's request fails within a
// bounded time (the closed setup socket tells), it does not hang.
void killedPeer(bool survivorSends) {
  const ncclNet_v11_t* n = theNet().net;
  setenv("NCCL_IB_TIMEOUT", "14", 1);  // ~67 ms per retry, if the QP has to notice
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *listen = nullptr, *comm = nullptr;
  pid_t pid;
  const int64_t deadline = nowMs() + kSetupTimeoutMs;
  if (survivorSends) {
    int fd = -1;
    pid = spawnChild("recv", 1, true, "", &fd);
    ASSERT_GT(pid, 0);
    fromHex(readHandle(fd), handle);
    close(fd);
    while (!comm && nowMs() < deadline)
      ASSERT_EQ(n->connect(theNet().ctx, 0, handle, &comm, nullptr), ncclSuccess);
  } else {
    ASSERT_EQ(n->listen(theNet().ctx, 0, handle, &listen), ncclSuccess);
    pid = spawnChild("send", 1, true, toHex(handle), nullptr);
    ASSERT_GT(pid, 0);
    while (!comm && nowMs() < deadline) ASSERT_EQ(n->accept(listen, &comm, nullptr), ncclSuccess);
  }
  unsetenv("NCCL_IB_TIMEOUT");
  ASSERT_NE(comm, nullptr);
  std::vector<uint8_t> buf(kProcMsg);
  void* mh = nullptr;
  ASSERT_EQ(n->regMr(comm, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  ASSERT_TRUE(procMessage(comm, survivorSends, 0, buf, mh)) << "the first message failed";
  // The second request is outstanding when the peer dies.
  void* req = nullptr;
  ncclResult_t res = ncclSuccess;
  if (!survivorSends) {
    void* d = buf.data();
    size_t s = buf.size();
    int tag = 0;
    ASSERT_EQ(n->irecv(comm, 1, &d, &s, &tag, &mh, nullptr, &req), ncclSuccess);
  }
  kill(pid, SIGKILL);
  waitChild(pid, 10000);
  const int64_t t0 = nowMs();
  while (res == ncclSuccess && nowMs() - t0 < 60000) {
    if (!req) {
      res = n->isend(comm, buf.data(), kProcMsg, 0, mh, nullptr, &req);
    } else {
      int done = 0, size = 0;
      res = n->test(req, &done, &size);
      ASSERT_FALSE(done) << "a request completed with its peer dead";
    }
  }
  const int64_t took = nowMs() - t0;
  EXPECT_NE(res, ncclSuccess) << "no error within 60 s of the peer's death";
  EXPECT_TRUE(res == ncclRemoteError || res == ncclSystemError) << int(res);
  printf("peer killed: error %d after %lld ms: %s\n", int(res), (long long)took,
         theNet().net ? ncclGetLastError(nullptr) : "");
  n->deregMr(comm, mh);
  survivorSends ? n->closeSend(comm) : n->closeRecv(comm);  // must not hang either
  if (listen) n->closeListen(listen);
}

TEST(IbNetProcess, KilledSenderFailsReceive) {
  REQUIRE_IB_PORT();
  killedPeer(false);
}

TEST(IbNetProcess, KilledReceiverFailsSend) {
  REQUIRE_IB_PORT();
  killedPeer(true);
}

}  // namespace
}  // namespace braid
