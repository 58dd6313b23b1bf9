// The net transport over the Socket net (BRAID_TRANSPORT=socket): TCP connections
// progressed by the proxy thread, in one process and across fork().
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "tests/transports/transport_test_util.h"

namespace braid {
namespace {

using namespace testing_util;

Transport& net() { return netTransport(); }

/// A context for the net transport over the Socket net (whatever else this host has).
ConnectContext sockCtx(const PeerInfo* self, const PeerInfo* peer, uint32_t nslots,
                       uint64_t slotBytes, int timeoutMs = 10000, uint64_t secret = 42) {
  ConnectContext c = makeCtx(self, peer, nslots, slotBytes, timeoutMs, secret);
  c.netName = "Socket";
  return c;
}

struct NetPair {
  PeerInfo r0 = makePeer(0);
  PeerInfo r1 = makePeer(1);
  RecvSide recv;
  SendSide send;
};

void connectNet(NetPair* p, uint32_t nslots, uint64_t slotBytes, int channel = 0) {
  ConnectContext rctx = sockCtx(&p->r1, &p->r0, nslots, slotBytes);
  ConnectContext sctx = sockCtx(&p->r0, &p->r1, nslots, slotBytes);
  rctx.channel = sctx.channel = channel;
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(rctx, &p->recv, &d), ncclSuccess);
  EXPECT_EQ(d.transport, uint32_t(TransportId::kNet));
  ASSERT_EQ(net().connectSend(sctx, d, &p->send), ncclSuccess);
  ASSERT_EQ(net().finishRecv(rctx, &p->recv), ncclSuccess);
}

TEST(NetSocketTransport, CanAlwaysConnect) {
  PeerInfo a = makePeer(0, 1, 1), c = makePeer(2, 6, 3);
  EXPECT_TRUE(net().canConnect(a, c));
  EXPECT_TRUE(net().canConnect(a, a));
}

class NetStream : public ::testing::TestWithParam<uint64_t> {};

TEST_P(NetStream, EveryByteArrivesWithSlotBoundariesKept) {
  const uint64_t slot = GetParam();
  NetPair p;
  connectNet(&p, 4, slot);
  EXPECT_FALSE(p.send.allowDirect);
  auto sizes = streamSizes(slot);
  std::vector<uint64_t> sentSlots, gotSlots;
  std::string sendErr, recvErr;
  std::thread producer([&] { sendErr = produce(p.send.fifo, sizes, &sentSlots); });
  recvErr = consume(p.recv.fifo, totalOf(sizes), &gotSlots);
  producer.join();
  EXPECT_EQ(sendErr, "");
  EXPECT_EQ(recvErr, "");
  EXPECT_EQ(sentSlots, gotSlots) << "the receiver must see the sender's slots";
  std::string why;
  EXPECT_EQ(p.send.res->checkPeer(&why), ncclSuccess) << why;
  EXPECT_EQ(p.recv.res->checkPeer(&why), ncclSuccess) << why;
}

INSTANTIATE_TEST_SUITE_P(SlotSizes, NetStream, ::testing::Values(64, 1000, 256 << 10));

TEST(NetSocketTransport, ManyConnectionsShareTheProxy) {
  constexpr int kConns = 6;
  const uint64_t slot = 4096 + 24;
  std::vector<std::unique_ptr<NetPair>> pairs;
  for (int i = 0; i < kConns; ++i) {
    pairs.push_back(std::make_unique<NetPair>());
    connectNet(pairs.back().get(), 3, slot, i);
  }
  auto sizes = streamSizes(slot);
  std::vector<std::string> errs(2 * kConns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kConns; ++i) {
    threads.emplace_back([&, i] { errs[2 * i] = produce(pairs[i]->send.fifo, sizes); });
    threads.emplace_back(
        [&, i] { errs[2 * i + 1] = consume(pairs[i]->recv.fifo, totalOf(sizes)); });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errs) EXPECT_EQ(e, "");
  // Tear down in an interleaved order while the proxy runs.
  for (int i = 0; i < kConns; ++i) {
    if (i % 2) pairs[i]->send.res.reset();
    else pairs[i]->recv.res.reset();
  }
  pairs.clear();
}

TEST(NetSocketTransport, ProxyStartsAgainAfterTheLastConnectionWentAway) {
  for (int round = 0; round < 3; ++round) {
    NetPair p;
    connectNet(&p, 2, 512);
    std::vector<uint64_t> sizes{5000, 1, 700};
    std::string sendErr;
    std::thread producer([&] { sendErr = produce(p.send.fifo, sizes); });
    EXPECT_EQ(consume(p.recv.fifo, totalOf(sizes)), "");
    producer.join();
    EXPECT_EQ(sendErr, "");
  }
}

TEST(NetSocketTransport, AWrongSecretIsRejected) {
  NetPair p;
  ConnectContext rctx = sockCtx(&p.r1, &p.r0, 2, 1024, /*timeoutMs=*/500, /*secret=*/42);
  ConnectContext bad = sockCtx(&p.r0, &p.r1, 2, 1024, 5000, /*secret=*/43);
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(rctx, &p.recv, &d), ncclSuccess);
  ASSERT_EQ(net().connectSend(bad, d, &p.send), ncclSuccess);  // the sender cannot tell yet
  auto t0 = Clock::now();
  EXPECT_NE(net().finishRecv(rctx, &p.recv), ncclSuccess);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(400));  // kept waiting
  // The impostor's connection was closed: its proxy sees the EOF.
  std::string why;
  EXPECT_EQ(waitPeerFailure(p.send.res.get(), &why, 5000), ncclRemoteError);
  EXPECT_NE(why.find("net connection to rank 1 (Socket net"), std::string::npos) << why;
}

TEST(NetSocketTransport, TheRightSenderIsAcceptedAfterAWrongOne) {
  NetPair p;
  ConnectContext rctx = sockCtx(&p.r1, &p.r0, 2, 1024, 5000, 42);
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(rctx, &p.recv, &d), ncclSuccess);
  SendSide impostor;
  ASSERT_EQ(net().connectSend(sockCtx(&p.r0, &p.r1, 2, 1024, 5000, 7), d, &impostor),
            ncclSuccess);
  ASSERT_EQ(net().connectSend(sockCtx(&p.r0, &p.r1, 2, 1024, 5000, 42), d, &p.send),
            ncclSuccess);
  ASSERT_EQ(net().finishRecv(rctx, &p.recv), ncclSuccess);
  std::vector<uint64_t> sizes{3000, 5, 1024};
  std::string sendErr;
  std::thread producer([&] { sendErr = produce(p.send.fifo, sizes); });
  EXPECT_EQ(consume(p.recv.fifo, totalOf(sizes)), "");
  producer.join();
  EXPECT_EQ(sendErr, "");
}

TEST(NetSocketTransport, LargerSenderSlotsAreRefused) {
  NetPair p;
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(sockCtx(&p.r1, &p.r0, 2, 1024), &p.recv, &d), ncclSuccess);
  EXPECT_EQ(net().connectSend(sockCtx(&p.r0, &p.r1, 2, 2048), d, &p.send), ncclInvalidUsage);
}

TEST(NetSocketTransport, AcceptHonoursTheAbortFlag) {
  NetPair p;
  std::atomic<bool> abortFlag{false};
  ConnectContext rctx = sockCtx(&p.r1, &p.r0, 2, 1024, 60000);
  rctx.abortFlag = &abortFlag;
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(rctx, &p.recv, &d), ncclSuccess);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abortFlag = true;
  });
  auto t0 = Clock::now();
  EXPECT_NE(net().finishRecv(rctx, &p.recv), ncclSuccess);
  aborter.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

TEST(NetSocketTransport, EveryByteArrivesAcrossFork) {
  const uint64_t slot = 64 << 10;
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = sockCtx(&r1, &r0, 4, slot);
  RecvSide recv;
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(rctx, &recv, &d), ncclSuccess);
  auto sizes = streamSizes(slot);
  pid_t child = forkChild([&] {
    PeerInfo c0 = makePeer(0, 1, 2, int(getpid()));
    SendSide send;
    if (net().connectSend(sockCtx(&c0, &r1, 4, slot), d, &send) != ncclSuccess) return 2;
    std::string err = produce(send.fifo, sizes);
    if (!err.empty()) {
      std::fprintf(stderr, "child: %s\n", err.c_str());
      return 3;
    }
    return 0;
  });
  ASSERT_GT(child, 0);
  ASSERT_EQ(net().finishRecv(rctx, &recv), ncclSuccess);
  EXPECT_EQ(consume(recv.fifo, totalOf(sizes)), "");
  EXPECT_EQ(waitChild(child), 0);
}

// The sender's process dies (no teardown, so no goodbye): the receiver notices the
// closed socket.
TEST(NetSocketTransport, CheckPeerReportsAnExitedSender) {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = sockCtx(&r1, &r0, 2, 1024);
  RecvSide recv;
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(rctx, &recv, &d), ncclSuccess);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = forkChild([&] {
    PeerInfo c0 = makePeer(0, 1, 2, int(getpid()));
    auto* send = new SendSide;  // never destroyed: the process just ends
    if (net().connectSend(sockCtx(&c0, &r1, 2, 1024), d, send) != ncclSuccess) return 2;
    char b;
    return readFull(go[0], &b, 1) ? 0 : 3;  // connected: the parent says so
  });
  ASSERT_GT(child, 0);
  ASSERT_EQ(net().finishRecv(rctx, &recv), ncclSuccess);
  ASSERT_TRUE(writeFull(go[1], "x", 1));
  std::string why;
  EXPECT_EQ(waitPeerFailure(recv.res.get(), &why, 10000), ncclRemoteError);
  EXPECT_NE(why.find("net connection from rank 0 (Socket net"), std::string::npos) << why;
  EXPECT_NE(why.find("peer closed the connection"), std::string::npos) << why;
  EXPECT_EQ(recv.fifo.closed(), uint32_t(kFifoSenderAborted));  // the executor sees it too
  EXPECT_EQ(waitChild(child), 0);
  close(go[0]);
  close(go[1]);
}

// The sender closes its end properly: its goodbyes complete the receives the receiver
// had posted, so its socket closing afterwards is no failure (without them the
// receiver reads EOF under a posted receive: "peer closed the connection").
TEST(NetSocketTransport, ClosedSenderSaysGoodbye) {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = sockCtx(&r1, &r0, 2, 1024);
  RecvSide recv;
  ConnDescriptor d;
  ASSERT_EQ(net().setupRecv(rctx, &recv, &d), ncclSuccess);
  pid_t child = forkChild([&] {
    PeerInfo c0 = makePeer(0, 1, 2, int(getpid()));
    SendSide send;  // destroyed on return: flush, then the goodbyes
    return net().connectSend(sockCtx(&c0, &r1, 2, 1024), d, &send) == ncclSuccess ? 0 : 2;
  });
  ASSERT_GT(child, 0);
  ASSERT_EQ(net().finishRecv(rctx, &recv), ncclSuccess);
  EXPECT_EQ(waitChild(child), 0);  // its socket is closed now
  std::string why;
  EXPECT_EQ(waitPeerFailure(recv.res.get(), &why, 1000), ncclSuccess) << why;
  EXPECT_EQ(recv.fifo.closed(), uint32_t(kFifoOpen));
}

TEST(NetSocketTransport, CheckPeerReportsAnExitedReceiver) {
  PeerInfo r0 = makePeer(0);
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  pid_t child = forkChild([&] {
    PeerInfo c1 = makePeer(1, 1, 2, int(getpid()));
    ConnectContext rctx = sockCtx(&c1, &r0, 2, 1024);
    RecvSide recv;
    ConnDescriptor d;
    if (net().setupRecv(rctx, &recv, &d) != ncclSuccess) return 2;
    if (!writeFull(toParent[1], &d, sizeof d)) return 3;
    if (net().finishRecv(rctx, &recv) != ncclSuccess) return 4;
    char go;
    return readFull(toChild[0], &go, 1) ? 0 : 5;
  });
  ASSERT_GT(child, 0);
  ConnDescriptor d;
  ASSERT_TRUE(readFull(toParent[0], &d, sizeof d));
  PeerInfo c1 = makePeer(1, 1, 2, int(child));
  SendSide send;
  ASSERT_EQ(net().connectSend(sockCtx(&r0, &c1, 2, 1024), d, &send), ncclSuccess);
  std::string why;
  EXPECT_EQ(send.res->checkPeer(&why), ncclSuccess) << why;
  ASSERT_TRUE(writeFull(toChild[1], "x", 1));
  EXPECT_EQ(waitPeerFailure(send.res.get(), &why, 10000), ncclRemoteError);
  EXPECT_NE(why.find("net connection to rank 1 (Socket net"), std::string::npos) << why;
  EXPECT_EQ(send.fifo.closed(), uint32_t(kFifoReceiverAborted));
  // Data written now fails fast instead of hanging.
  EXPECT_NE(produce(send.fifo, {100000}, nullptr, 10000), "");
  EXPECT_EQ(waitChild(child), 0);
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]}) close(fd);
}

TEST(NetSocketTransport, AnAbortedLocalFifoClosesTheSocket) {
  NetPair p;
  connectNet(&p, 2, 1024);
  p.send.fifo.close(kFifoSenderAborted);  // the executor gives up on this connection
  std::string why;
  EXPECT_EQ(waitPeerFailure(p.recv.res.get(), &why, 5000), ncclRemoteError);
  EXPECT_EQ(p.recv.fifo.closed(), uint32_t(kFifoSenderAborted));
  EXPECT_EQ(p.send.res->checkPeer(&why), ncclSuccess) << "our own abort is not the peer's fault";
}

TEST(NetSocketTransport, TheFirstCloseReasonStays) {
  // A comm that failed on a collective mismatch and is then aborted: its FIFOs keep
  // saying "mismatch", so its net proxy still delivers what it had published (and local
  // peers learn it was a mismatch) instead of dropping it as an abort.
  NetPair p;
  connectNet(&p, 2, 1024);
  p.send.fifo.close(kFifoMismatch);
  p.send.fifo.close(kFifoSenderAborted);
  EXPECT_EQ(p.send.fifo.closed(), uint32_t(kFifoMismatch));
  p.recv.fifo.close(kFifoMismatch);
  p.recv.fifo.close(kFifoReceiverAborted);
  EXPECT_EQ(p.recv.fifo.closed(), uint32_t(kFifoMismatch));
}

}  // namespace
}  // namespace braid
