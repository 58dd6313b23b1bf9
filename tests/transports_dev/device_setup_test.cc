// Device connections on a machine without CUDA: every transport's setup fails with a
// message naming the ranks and CUDA's reason, releases what it made, and host-mode
// connections keep working afterwards. (With CUDA these tests skip: the GPU tests
// cover device setup there.)
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "tests/transports_dev/dev_test_util.h"
#include "transports/p2p/p2p_transport.h"

namespace braid {
namespace {

using namespace testing_util;
using namespace devtest;

std::string lastMsg() { return ncclGetLastError(nullptr); }

/// This process's segments in /dev/shm.
std::set<std::string> mySegments() {
  std::set<std::string> out;
  const std::string prefix = "braid-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

class NoCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudart::available())
      GTEST_SKIP() << "CUDA is usable here: device setup is covered by the GPU tests";
  }
};

/// Streams checked bytes through a connected pair (two threads).
void expectStream(SendSide& send, RecvSide& recv) {
  const std::vector<uint64_t> sizes = {1, 4096, 5000, 12345, 3};
  std::string sendErr, recvErr;
  std::thread t([&] { sendErr = produce(send.fifo, sizes, nullptr, 20000); });
  recvErr = consume(recv.fifo, totalOf(sizes), nullptr, 20000);
  t.join();
  EXPECT_EQ(sendErr, "");
  EXPECT_EQ(recvErr, "");
}

TEST(P2pSetup, RefusesHostConnections) {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext ctx = makeCtx(&r1, &r0, 4, 4096);
  RecvSide recv;
  ConnDescriptor d;
  EXPECT_EQ(p2pTransport().setupRecv(ctx, &recv, &d), ncclInternalError);
  EXPECT_NE(lastMsg().find("CUDA executor only"), std::string::npos) << lastMsg();
  EXPECT_FALSE(recv.res);
}

TEST_F(NoCuda, P2pSetupRecvFailsWithTheRanksAndTheReason) {
  PeerInfo r0 = gpuPeer(0, 0, 7), r1 = gpuPeer(1, 0, 8);
  ConnectContext ctx = devCtx(&r1, &r0, 4, 4096);
  RecvSide recv;
  ConnDescriptor d;
  EXPECT_EQ(p2pTransport().setupRecv(ctx, &recv, &d), ncclSystemError);
  const std::string msg = lastMsg();
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA is not usable"), std::string::npos) << msg;
  EXPECT_FALSE(recv.res);
  EXPECT_FALSE(recv.dev.valid());
}

TEST_F(NoCuda, P2pConnectSendFailsCleanly) {
  PeerInfo r0 = gpuPeer(0, 0, 7), r1 = gpuPeer(1, 0, 8);
  P2pDescriptor pd;
  pd.magic = P2pDescriptor::kMagic;
  pd.processHash = 8;
  pd.devPtr = 0x7f0000100000ull;
  pd.nslots = 4;
  pd.slotBytes = 4096;
  pd.creatorRank = 1;
  pd.creatorPid = 1;
  pd.ipcValid = 1;
  ConnDescriptor d;
  encodeP2pDescriptor(pd, &d);
  SendSide send;
  EXPECT_EQ(p2pTransport().connectSend(devCtx(&r0, &r1, 4, 4096), d, &send), ncclSystemError);
  EXPECT_NE(lastMsg().find("rank 0"), std::string::npos) << lastMsg();
  EXPECT_FALSE(send.res);
  EXPECT_FALSE(send.dev.valid());
  // A geometry mismatch is reported before CUDA is touched.
  EXPECT_EQ(p2pTransport().connectSend(devCtx(&r0, &r1, 8, 4096), d, &send), ncclInvalidUsage);
  EXPECT_NE(lastMsg().find("NCCL_BUFFSIZE"), std::string::npos) << lastMsg();
}

TEST_F(NoCuda, ShmDeviceSetupFailsAndLeavesNothingBehind) {
  PeerInfo r0 = gpuPeer(0, 0, 7), r1 = gpuPeer(1, 0, 8);
  const std::set<std::string> before = mySegments();
  {
    RecvSide recv;
    ConnDescriptor d;
    EXPECT_EQ(shmTransport().setupRecv(devCtx(&r1, &r0, 4, 4096), &recv, &d), ncclSystemError);
    const std::string msg = lastMsg();
    EXPECT_NE(msg.find("shm transport: rank 1 <- rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
    EXPECT_FALSE(recv.res);
    EXPECT_FALSE(recv.fifo.valid());
  }
  EXPECT_EQ(mySegments(), before);

  // A device sender against a host receiver: the sender fails, and the receiver's
  // wait ends at once instead of at its timeout.
  {
    RecvSide recv;
    SendSide send;
    ConnDescriptor d;
    ConnectContext rctx = makeCtx(&r1, &r0, 4, 4096, /*timeoutMs=*/60000);
    ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
    EXPECT_EQ(shmTransport().connectSend(devCtx(&r0, &r1, 4, 4096), d, &send), ncclSystemError);
    EXPECT_NE(lastMsg().find("shm transport: rank 0 -> rank 1"), std::string::npos) << lastMsg();
    EXPECT_FALSE(send.res);
    const auto t0 = Clock::now();
    EXPECT_EQ(shmTransport().finishRecv(rctx, &recv), ncclSystemError);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
    EXPECT_NE(lastMsg().find("rank 0 could not attach"), std::string::npos) << lastMsg();
  }
  EXPECT_EQ(mySegments(), before);

  // Host mode is untouched.
  RecvSide recv;
  SendSide send;
  ConnDescriptor d;
  ConnectContext rctx = makeCtx(&r1, &r0, 4, 4096);
  ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
  ASSERT_EQ(shmTransport().connectSend(makeCtx(&r0, &r1, 4, 4096), d, &send), ncclSuccess);
  ASSERT_EQ(shmTransport().finishRecv(rctx, &recv), ncclSuccess);
  EXPECT_FALSE(send.dev.valid());
  EXPECT_FALSE(recv.dev.valid());
  expectStream(send, recv);
}

TEST_F(NoCuda, NetDeviceSetupFailsAndHostModeStillWorks) {
  PeerInfo r0 = gpuPeer(0, 0, 7), r1 = gpuPeer(1, 0, 8);
  {
    RecvSide recv;
    ConnDescriptor d;
    EXPECT_EQ(netTransport().setupRecv(devCtx(&r1, &r0, 4, 4096), &recv, &d),
              ncclSystemError);
    EXPECT_NE(lastMsg().find("net: rank 1 <- rank 0"), std::string::npos) << lastMsg();
    EXPECT_FALSE(recv.res);
  }
  {
    // The device sender fails before connecting: the receiver sees no connection.
    RecvSide recv;
    SendSide send;
    ConnDescriptor d;
    ConnectContext rctx = makeCtx(&r1, &r0, 4, 4096, /*timeoutMs=*/300);
    ASSERT_EQ(netTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
    EXPECT_EQ(netTransport().connectSend(devCtx(&r0, &r1, 4, 4096), d, &send),
              ncclSystemError);
    EXPECT_NE(lastMsg().find("net: rank 0 -> rank 1"), std::string::npos) << lastMsg();
    EXPECT_FALSE(send.res);
    EXPECT_NE(netTransport().finishRecv(rctx, &recv), ncclSuccess);
    EXPECT_NE(lastMsg().find("did not connect"), std::string::npos) << lastMsg();
  }
  RecvSide recv;
  SendSide send;
  ConnDescriptor d;
  ConnectContext rctx = makeCtx(&r1, &r0, 4, 4096);
  ASSERT_EQ(netTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
  ASSERT_EQ(netTransport().connectSend(makeCtx(&r0, &r1, 4, 4096), d, &send), ncclSuccess);
  ASSERT_EQ(netTransport().finishRecv(rctx, &recv), ncclSuccess);
  EXPECT_FALSE(send.dev.valid());
  EXPECT_FALSE(recv.dev.valid());
  expectStream(send, recv);
}

}  // namespace
}  // namespace braid
