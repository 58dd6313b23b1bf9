// Local transport: two ranks of one process share a heap FIFO.
#include <gtest/gtest.h>

#include <thread>

#include "tests/transports/transport_test_util.h"

namespace braid {
namespace {

using namespace testing_util;

struct LocalPair {
  PeerInfo r0 = makePeer(0);
  PeerInfo r1 = makePeer(1);
  RecvSide recv;
  SendSide send;
};

void connectLocal(LocalPair* p, uint32_t nslots, uint64_t slotBytes) {
  Transport& t = localTransport();
  ConnectContext rctx = makeCtx(&p->r1, &p->r0, nslots, slotBytes);
  ConnectContext sctx = makeCtx(&p->r0, &p->r1, nslots, slotBytes);
  ConnDescriptor d;
  ASSERT_EQ(t.setupRecv(rctx, &p->recv, &d), ncclSuccess);
  EXPECT_EQ(d.transport, uint32_t(TransportId::kLocal));
  ASSERT_EQ(t.connectSend(sctx, d, &p->send), ncclSuccess);
  ASSERT_EQ(t.finishRecv(rctx, &p->recv), ncclSuccess);
}

TEST(LocalTransport, CanConnectOnlyWithinOneProcess) {
  PeerInfo a = makePeer(0, 1, 7), b = makePeer(1, 1, 7), c = makePeer(2, 1, 8);
  EXPECT_TRUE(localTransport().canConnect(a, b));
  EXPECT_FALSE(localTransport().canConnect(a, c));
  EXPECT_EQ(localTransport().id(), TransportId::kLocal);
}

class LocalStream : public ::testing::TestWithParam<uint64_t> {};

TEST_P(LocalStream, EveryByteArrivesInTwoThreads) {
  const uint64_t slot = GetParam();
  LocalPair p;
  connectLocal(&p, 4, slot);
  EXPECT_TRUE(p.send.allowDirect);
  auto sizes = streamSizes(slot);
  std::string sendErr, recvErr;
  std::thread producer([&] { sendErr = produce(p.send.fifo, sizes); });
  recvErr = consume(p.recv.fifo, totalOf(sizes));
  producer.join();
  EXPECT_EQ(sendErr, "");
  EXPECT_EQ(recvErr, "");
}

INSTANTIATE_TEST_SUITE_P(SlotSizes, LocalStream, ::testing::Values(64, 1000, 64 << 10));

TEST(LocalTransport, DirectEntriesPointIntoTheSendersBuffer) {
  LocalPair p;
  connectLocal(&p, 2, 256);
  std::vector<char> src(100000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = char(patternByte(i));
  // A direct entry may be larger than a slot: it carries only a pointer.
  ASSERT_NE(p.send.fifo.acquire(), nullptr);
  p.send.fifo.commitDirect(src.data(), src.size());
  const char* got = nullptr;
  uint64_t n = p.recv.fifo.peek(&got);
  ASSERT_EQ(n, src.size());
  EXPECT_EQ(got, src.data());  // zero copy
  EXPECT_EQ(std::memcmp(got, src.data(), n), 0);
  EXPECT_FALSE(p.send.fifo.drained());
  p.recv.fifo.release(1000);  // partly consumed: still not drained
  EXPECT_FALSE(p.send.fifo.drained());
  n = p.recv.fifo.peek(&got);
  EXPECT_EQ(n, src.size() - 1000);
  EXPECT_EQ(got, src.data() + 1000);
  p.recv.fifo.release(n);
  EXPECT_TRUE(p.send.fifo.drained());
}

TEST(LocalTransport, EitherEndMayBeDestroyedFirst) {
  for (int senderFirst = 0; senderFirst < 2; ++senderFirst) {
    LocalPair p;
    connectLocal(&p, 2, 128);
    char* slot = p.send.fifo.acquire();
    ASSERT_NE(slot, nullptr);
    std::memset(slot, 7, 10);
    p.send.fifo.commit(10);
    if (senderFirst) p.send.res.reset();
    else p.recv.res.reset();
    // The surviving end still reaches valid memory (ASan would flag a use after free).
    const char* got = nullptr;
    EXPECT_EQ(p.recv.fifo.peek(&got), 10u);
    EXPECT_EQ(got[9], 7);
    p.recv.fifo.release(10);
    EXPECT_TRUE(p.send.fifo.drained());
  }
}

TEST(LocalTransport, ADescriptorIsAttachedOnlyOnce) {
  LocalPair p;
  PeerInfo r2 = makePeer(2);
  ConnectContext rctx = makeCtx(&p.r1, &p.r0, 2, 128);
  ConnDescriptor d;
  ASSERT_EQ(localTransport().setupRecv(rctx, &p.recv, &d), ncclSuccess);
  ASSERT_EQ(localTransport().connectSend(makeCtx(&p.r0, &p.r1, 2, 128), d, &p.send),
            ncclSuccess);
  SendSide second;
  EXPECT_NE(localTransport().connectSend(makeCtx(&r2, &p.r1, 2, 128), d, &second),
            ncclSuccess);
}

TEST(LocalTransport, ADescriptorFromAnotherProcessIsRefused) {
  LocalPair p;
  ConnDescriptor d;
  ASSERT_EQ(localTransport().setupRecv(makeCtx(&p.r1, &p.r0, 2, 128), &p.recv, &d),
            ncclSuccess);
  int64_t otherPid = int64_t(getpid()) + 1;
  std::memcpy(d.data + 8, &otherPid, sizeof otherPid);  // LocalDesc::pid follows magic
  EXPECT_EQ(localTransport().connectSend(makeCtx(&p.r0, &p.r1, 2, 128), d, &p.send),
            ncclInvalidUsage);
}

TEST(LocalTransport, AWrongDescriptorIsRefused) {
  LocalPair p;
  ConnDescriptor d;
  d.transport = uint32_t(TransportId::kShm);
  EXPECT_NE(localTransport().connectSend(makeCtx(&p.r0, &p.r1, 2, 128), d, &p.send),
            ncclSuccess);
}

}  // namespace
}  // namespace braid
