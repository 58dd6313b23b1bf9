// Shm transport: a POSIX shared memory segment per connection, in one process and
// across fork().
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <thread>

#include "tests/transports/transport_test_util.h"
#include "src/os/process.h"
#include "transports/shm/shm_transport.h"

namespace braid {
namespace {

using namespace testing_util;

std::string segmentName(const ConnDescriptor& d) {
  ShmDescriptor s;
  std::memcpy(&s, d.data, sizeof s);
  return s.name;
}
bool segmentExists(const std::string& name, struct stat* st = nullptr) {
  struct stat tmp;
  return ::stat(("/dev/shm" + name).c_str(), st ? st : &tmp) == 0;
}

TEST(ShmTransport, CanConnectOnlyOnOneHost) {
  PeerInfo a = makePeer(0, 5, 1), b = makePeer(1, 5, 2), c = makePeer(2, 6, 3);
  EXPECT_TRUE(shmTransport().canConnect(a, b));
  EXPECT_FALSE(shmTransport().canConnect(a, c));
}

TEST(ShmTransport, SegmentIsPrivateAndGoneOnceBothSidesMappedIt) {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = makeCtx(&r1, &r0, 4, 4096), sctx = makeCtx(&r0, &r1, 4, 4096);
  RecvSide recv;
  SendSide send;
  ConnDescriptor d;
  ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
  const std::string name = segmentName(d);
  ASSERT_EQ(name.rfind("/braid-", 0), 0u) << name;
  struct stat st;
  ASSERT_TRUE(segmentExists(name, &st)) << name;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(shmTransport().connectSend(sctx, d, &send), ncclSuccess);
  EXPECT_FALSE(segmentExists(name)) << name << " still in /dev/shm after connectSend";
  ASSERT_EQ(shmTransport().finishRecv(rctx, &recv), ncclSuccess);
  EXPECT_FALSE(send.allowDirect);
  std::string why;
  EXPECT_EQ(send.res->checkPeer(&why), ncclSuccess) << why;
  EXPECT_EQ(recv.res->checkPeer(&why), ncclSuccess) << why;
}

TEST(ShmTransport, ReceiverUnlinksWhenTheSenderNeverComes) {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = makeCtx(&r1, &r0, 2, 1024, /*timeoutMs=*/200);
  {
    RecvSide recv;
    ConnDescriptor d;
    ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
    const std::string name = segmentName(d);
    EXPECT_TRUE(segmentExists(name));
    EXPECT_NE(shmTransport().finishRecv(rctx, &recv), ncclSuccess);  // times out
    EXPECT_FALSE(segmentExists(name)) << name;
  }
  {
    RecvSide recv;
    ConnDescriptor d;
    ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
    const std::string name = segmentName(d);
    recv.res.reset();  // destroyed without finishRecv
    EXPECT_FALSE(segmentExists(name)) << name;
  }
}

TEST(ShmTransport, WaitingForTheSenderHonoursTheAbortFlag) {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  std::atomic<bool> abortFlag{false};
  ConnectContext rctx = makeCtx(&r1, &r0, 2, 1024, /*timeoutMs=*/60000);
  rctx.abortFlag = &abortFlag;
  RecvSide recv;
  ConnDescriptor d;
  ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abortFlag = true;
  });
  auto t0 = Clock::now();
  EXPECT_NE(shmTransport().finishRecv(rctx, &recv), ncclSuccess);
  aborter.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(segmentExists(segmentName(d)));
}

class ShmStream : public ::testing::TestWithParam<uint64_t> {};

TEST_P(ShmStream, EveryByteArrivesInTwoThreads) {
  const uint64_t slot = GetParam();
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = makeCtx(&r1, &r0, 4, slot), sctx = makeCtx(&r0, &r1, 4, slot);
  RecvSide recv;
  SendSide send;
  ConnDescriptor d;
  ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
  ASSERT_EQ(shmTransport().connectSend(sctx, d, &send), ncclSuccess);
  ASSERT_EQ(shmTransport().finishRecv(rctx, &recv), ncclSuccess);
  auto sizes = streamSizes(slot);
  std::string sendErr, recvErr;
  std::thread producer([&] { sendErr = produce(send.fifo, sizes); });
  recvErr = consume(recv.fifo, totalOf(sizes));
  producer.join();
  EXPECT_EQ(sendErr, "");
  EXPECT_EQ(recvErr, "");
}

INSTANTIATE_TEST_SUITE_P(SlotSizes, ShmStream, ::testing::Values(64, 1000, 128 << 10));

TEST(ShmTransport, EveryByteArrivesAcrossFork) {
  const uint64_t slot = 8192 + 8;
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = makeCtx(&r1, &r0, 4, slot);
  RecvSide recv;
  ConnDescriptor d;
  ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
  auto sizes = streamSizes(slot);
  pid_t child = forkChild([&] {
    PeerInfo c0 = makePeer(0, 1, 2, int(getpid()));
    ConnectContext sctx = makeCtx(&c0, &r1, 4, slot);
    SendSide send;
    if (shmTransport().connectSend(sctx, d, &send) != ncclSuccess) return 2;
    std::string err = produce(send.fifo, sizes);
    if (!err.empty()) {
      std::fprintf(stderr, "child: %s\n", err.c_str());
      return 3;
    }
    return 0;
  });
  ASSERT_GT(child, 0);
  ASSERT_EQ(shmTransport().finishRecv(rctx, &recv), ncclSuccess);
  EXPECT_FALSE(segmentExists(segmentName(d)));
  EXPECT_EQ(consume(recv.fifo, totalOf(sizes)), "");
  EXPECT_EQ(waitChild(child), 0);
}

TEST(ShmTransport, CheckPeerReportsAnExitedSender) {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  ConnectContext rctx = makeCtx(&r1, &r0, 2, 1024);
  RecvSide recv;
  ConnDescriptor d;
  ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
  pid_t child = forkChild([&] {
    PeerInfo c0 = makePeer(0, 1, 2, int(getpid()));
    SendSide send;
    return shmTransport().connectSend(makeCtx(&c0, &r1, 2, 1024), d, &send) == ncclSuccess
               ? 0 : 2;
  });
  ASSERT_GT(child, 0);
  ASSERT_EQ(shmTransport().finishRecv(rctx, &recv), ncclSuccess);
  // Not reaped yet: a zombie counts as exited.
  std::string why;
  EXPECT_EQ(waitPeerFailure(recv.res.get(), &why, 10000), ncclRemoteError);
  EXPECT_NE(why.find("rank 0 (pid " + std::to_string(child) + ") on this host exited"),
            std::string::npos) << why;
  EXPECT_EQ(waitChild(child), 0);
  EXPECT_EQ(recv.res->checkPeer(&why), ncclRemoteError);  // and after it was reaped
}

TEST(ShmTransport, CheckPeerReportsAnExitedReceiver) {
  PeerInfo r0 = makePeer(0);
  int toParent[2];
  ASSERT_EQ(pipe(toParent), 0);
  int toChild[2];
  ASSERT_EQ(pipe(toChild), 0);
  pid_t child = forkChild([&] {
    PeerInfo c1 = makePeer(1, 1, 2, int(getpid()));
    ConnectContext rctx = makeCtx(&c1, &r0, 2, 1024);
    RecvSide recv;
    ConnDescriptor d;
    if (shmTransport().setupRecv(rctx, &recv, &d) != ncclSuccess) return 2;
    if (!writeFull(toParent[1], &d, sizeof d)) return 3;
    if (shmTransport().finishRecv(rctx, &recv) != ncclSuccess) return 4;
    char go;
    return readFull(toChild[0], &go, 1) ? 0 : 5;
  });
  ASSERT_GT(child, 0);
  ConnDescriptor d;
  ASSERT_TRUE(readFull(toParent[0], &d, sizeof d));
  PeerInfo c1 = makePeer(1, 1, 2, int(child));
  SendSide send;
  ASSERT_EQ(shmTransport().connectSend(makeCtx(&r0, &c1, 2, 1024), d, &send), ncclSuccess);
  std::string why;
  EXPECT_EQ(send.res->checkPeer(&why), ncclSuccess) << why;
  ASSERT_TRUE(writeFull(toChild[1], "x", 1));
  EXPECT_EQ(waitPeerFailure(send.res.get(), &why, 10000), ncclRemoteError);
  EXPECT_NE(why.find("rank 1 (pid " + std::to_string(child) + ") on this host exited"),
            std::string::npos) << why;
  EXPECT_EQ(waitChild(child), 0);
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]}) close(fd);
}

TEST(ShmTransport, PeersInAnotherPidNamespaceAreNotDeclaredDead) {
  pid_t gone = forkChild([] { return 0; });
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitChild(gone), 0);
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  RecvSide recv;
  SendSide send;
  ConnDescriptor d;
  ASSERT_EQ(shmTransport().setupRecv(makeCtx(&r1, &r0, 2, 1024), &recv, &d), ncclSuccess);
  ShmDescriptor s;
  std::memcpy(&s, d.data, sizeof s);
  ASSERT_NE(s.creatorPidNs, 0u);
  s.creatorPid = gone;  // a pid that means nothing here...
  s.creatorPidNs += 1;  // ...because it is from another namespace
  std::memcpy(d.data, &s, sizeof s);
  ASSERT_EQ(shmTransport().connectSend(makeCtx(&r0, &r1, 2, 1024), d, &send), ncclSuccess);
  std::string why;
  EXPECT_EQ(send.res->checkPeer(&why), ncclSuccess) << why;
  RecvSide recv2;
  SendSide send2;
  ASSERT_EQ(shmTransport().setupRecv(makeCtx(&r1, &r0, 2, 1024), &recv2, &d), ncclSuccess);
  ShmDescriptor s2;
  std::memcpy(&s2, d.data, sizeof s2);
  s2.creatorPid = gone;
  s2.creatorStart = 0;
  std::memcpy(d.data, &s2, sizeof s2);
  ASSERT_EQ(shmTransport().connectSend(makeCtx(&r0, &r1, 2, 1024), d, &send2), ncclSuccess);
  EXPECT_EQ(send2.res->checkPeer(&why), ncclRemoteError);
}

TEST(ShmTransport, ProcessAliveTellsLiveDeadAndReusedPids) {
  EXPECT_TRUE(processAlive(getpid(), processStartTime(getpid())));
  EXPECT_NE(processStartTime(getpid()), 0u);
  EXPECT_FALSE(processAlive(getpid(), processStartTime(getpid()) + 1));  // "reused" pid
  pid_t child = forkChild([] { return 0; });
  ASSERT_GT(child, 0);
  EXPECT_EQ(waitChild(child), 0);
  EXPECT_FALSE(processAlive(child, 0));
}

}  // namespace
}  // namespace braid
