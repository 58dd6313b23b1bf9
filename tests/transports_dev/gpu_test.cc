// Device connections on a GPU, one process: p2p between two threads, and shm /
// net (over Socket) in device mode (registered host FIFOs), with the kernels' protocol
// played through the DevConn addresses by synchronous copies. Skipped without CUDA.
#include <gtest/gtest.h>

#include <thread>

#include "tests/transports_dev/dev_test_util.h"
#include "transports/p2p/p2p_transport.h"

namespace braid {
namespace {

using namespace testing_util;
using namespace devtest;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = noCudaReason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
    dev_ = 0;
  }
  int dev_ = 0;
};

const std::vector<uint64_t> kSizes = {1, 7, 4096, 4097, 30000, 64, 12345};
constexpr uint32_t kSlots = 4;
constexpr uint64_t kSlotBytes = 4096;

uint64_t slotsFor(const std::vector<uint64_t>& sizes, uint64_t slot) {
  uint64_t n = 0;
  for (uint64_t s : sizes) n += (s + slot - 1) / slot;
  return n;
}

/// Connects send/recv with `t` (setupRecv on one thread, connectSend on another).
void connectPair(Transport& t, const ConnectContext& rctx, const ConnectContext& sctx,
                 RecvSide* recv, SendSide* send) {
  ConnDescriptor d;
  ncclResult_t rs = ncclInternalError, ss = ncclInternalError, rf = ncclInternalError;
  std::thread rt([&] { rs = t.setupRecv(rctx, recv, &d); });
  rt.join();
  ASSERT_EQ(rs, ncclSuccess) << ncclGetLastError(nullptr);
  std::thread st([&] { ss = t.connectSend(sctx, d, send); });
  st.join();
  ASSERT_EQ(ss, ncclSuccess) << ncclGetLastError(nullptr);
  rf = t.finishRecv(rctx, recv);
  ASSERT_EQ(rf, ncclSuccess) << ncclGetLastError(nullptr);
}

TEST_F(Gpu, P2pBetweenTwoThreadsOfOneProcess) {
  PeerInfo r0 = gpuPeer(0, dev_, 7), r1 = gpuPeer(1, dev_, 7);
  ASSERT_TRUE(p2pTransport().canConnect(r0, r1));
  RecvSide recv;
  SendSide send;
  ASSERT_NO_FATAL_FAILURE(connectPair(p2pTransport(), devCtx(&r1, &r0, kSlots, kSlotBytes),
                                      devCtx(&r0, &r1, kSlots, kSlotBytes), &recv, &send));
  ASSERT_TRUE(recv.dev.valid());
  ASSERT_TRUE(send.dev.valid());
  EXPECT_EQ(send.dev.data, recv.dev.data) << "one process: the receiver's pointer as is";
  EXPECT_EQ(send.dev.hostMem, 0u);
  EXPECT_FALSE(recv.fifo.valid()) << "device memory has no host view";
  int where = -1;
  EXPECT_EQ(cudart::pointerKind(recv.dev.data, &where), MemKind::kDevice);
  EXPECT_EQ(where, dev_);
  uint64_t tail = 99, head = 99;
  ASSERT_TRUE(readU64(recv.dev.tail, &tail) && readU64(recv.dev.head, &head));
  EXPECT_EQ(tail, 0u);
  EXPECT_EQ(head, 0u);
  std::string sendErr, recvErr;
  std::thread st([&] { sendErr = devProduce(send.dev, kSizes); });
  recvErr = devConsume(recv.dev, totalOf(kSizes));
  st.join();
  EXPECT_EQ(sendErr, "");
  EXPECT_EQ(recvErr, "");
  ASSERT_TRUE(readU64(recv.dev.tail, &tail) && readU64(send.dev.head, &head));
  EXPECT_EQ(tail, slotsFor(kSizes, kSlotBytes));
  EXPECT_EQ(head, tail);
  std::string why;
  EXPECT_EQ(send.res->checkPeer(&why), ncclSuccess) << why;
  EXPECT_EQ(recv.res->checkPeer(&why), ncclSuccess) << why;
  send = SendSide{};  // close before free
  recv = RecvSide{};
}

TEST_F(Gpu, ShmDeviceModeWritesReachTheOtherEnd) {
  PeerInfo r0 = gpuPeer(0, dev_, 7), r1 = gpuPeer(1, dev_, 8);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "device writes, host reads" : "host writes, device reads");
    RecvSide recv;
    SendSide send;
    ASSERT_NO_FATAL_FAILURE(connectPair(shmTransport(), devCtx(&r1, &r0, kSlots, kSlotBytes),
                                        devCtx(&r0, &r1, kSlots, kSlotBytes), &recv, &send));
    ASSERT_TRUE(send.dev.valid() && recv.dev.valid());
    EXPECT_EQ(send.dev.hostMem, 1u);
    EXPECT_EQ(recv.dev.hostMem, 1u);
    EXPECT_EQ(send.remoteDirect, nullptr);
    std::string sendErr, recvErr;
    std::thread st([&] {
      sendErr = round == 0 ? devProduce(send.dev, kSizes) : produce(send.fifo, kSizes, nullptr, 20000);
    });
    recvErr = round == 0 ? consume(recv.fifo, totalOf(kSizes), nullptr, 20000)
                         : devConsume(recv.dev, totalOf(kSizes));
    st.join();
    EXPECT_EQ(sendErr, "");
    EXPECT_EQ(recvErr, "");
  }
}

TEST_F(Gpu, NetDeviceModeMovesDeviceWritesThroughTheProxy) {
  PeerInfo r0 = gpuPeer(0, dev_, 7), r1 = gpuPeer(1, dev_, 8);
  RecvSide recv;
  SendSide send;
  ASSERT_NO_FATAL_FAILURE(connectPair(netTransport(),
                                      devCtx(&r1, &r0, kSlots, kSlotBytes),
                                      devCtx(&r0, &r1, kSlots, kSlotBytes), &recv, &send));
  ASSERT_TRUE(send.dev.valid() && recv.dev.valid());
  EXPECT_EQ(send.dev.hostMem, 1u);
  EXPECT_EQ(recv.dev.hostMem, 1u);
  std::string sendErr, recvErr;
  std::thread st([&] { sendErr = devProduce(send.dev, kSizes); });
  recvErr = devConsume(recv.dev, totalOf(kSizes));
  st.join();
  EXPECT_EQ(sendErr, "");
  EXPECT_EQ(recvErr, "");
}

}  // namespace
}  // namespace braid
