// p2p between two forked processes on one GPU (CUDA IPC), the case NCCL refuses. The
// parent never touches CUDA (a process that initialised CUDA cannot fork CUDA users):
// a probe child tells whether a GPU is there, two more children are the ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/transports_dev/dev_test_util.h"
#include "transports/p2p/p2p_transport.h"

namespace braid {
namespace {

using namespace testing_util;
using namespace devtest;

/// "" if a forked child finds a usable GPU, else the reason.
std::string probeGpu() {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = forkChild([&] {
    close(fds[0]);
    std::string why = noCudaReason();
    writeFull(fds[1], why.data(), why.size());
    close(fds[1]);
    return 0;
  });
  close(fds[1]);
  std::string why;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) why.append(buf, size_t(n));
  close(fds[0]);
  if (waitChild(pid, 60000) != 0) return "the probe process failed";
  return why;
}

constexpr uint32_t kSlots = 4;
constexpr uint64_t kSlotBytes = 8192;
const std::vector<uint64_t> kSizes = {1, 8192, 8193, 50000, 7, 100000, 3};

TEST(P2pGpuProcesses, TwoProcessesOnOneGpu) {
  const std::string why = probeGpu();
  if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
  int toRecv[2], toSend[2], desc[2], done[2];
  ASSERT_EQ(pipe(toRecv), 0);
  ASSERT_EQ(pipe(toSend), 0);
  ASSERT_EQ(pipe(desc), 0);
  ASSERT_EQ(pipe(done), 0);
  // Rank 1 (receiver): owns the FIFO in its device memory.
  pid_t recvPid = forkChild([&] {
    pid_t senderPid = 0;
    if (!readFull(toRecv[0], &senderPid, sizeof senderPid)) return 2;
    PeerInfo r0 = gpuPeer(0, 0, /*process=*/7), r1 = gpuPeer(1, 0, /*process=*/8);
    r0.pid = int(senderPid);
    ConnectContext ctx = devCtx(&r1, &r0, kSlots, kSlotBytes);
    RecvSide recv;
    ConnDescriptor d;
    if (p2pTransport().setupRecv(ctx, &recv, &d) != ncclSuccess) {
      std::fprintf(stderr, "receiver: %s\n", ncclGetLastError(nullptr));
      return 3;
    }
    if (!writeFull(desc[1], &d, sizeof d)) return 4;
    if (p2pTransport().finishRecv(ctx, &recv) != ncclSuccess) return 5;
    std::string err = devConsume(recv.dev, totalOf(kSizes));
    if (!err.empty()) {
      std::fprintf(stderr, "receiver: %s\n", err.c_str());
      return 6;
    }
    uint64_t tail = 0;
    if (!readU64(recv.dev.tail, &tail) || tail == 0) return 7;
    // The sender closed its mapping and exits: the receiver notices.
    char c;
    if (!readFull(done[0], &c, 1)) return 8;
    std::string peerWhy;
    if (waitPeerFailure(recv.res.get(), &peerWhy, 20000) != ncclRemoteError) return 9;
    const std::string expect =
        "rank 0 (pid " + std::to_string(senderPid) + " on host testhost) exited";
    if (peerWhy != expect) {
      std::fprintf(stderr, "receiver: checkPeer said '%s'\n", peerWhy.c_str());
      return 10;
    }
    return 0;
  });
  // Rank 0 (sender): opens the receiver's FIFO through CUDA IPC.
  pid_t sendPid = forkChild([&] {
    pid_t rp = 0;
    if (!readFull(toSend[0], &rp, sizeof rp)) return 2;
    PeerInfo r0 = gpuPeer(0, 0, 7), r1 = gpuPeer(1, 0, 8);
    r1.pid = int(rp);
    ConnDescriptor d;
    if (!readFull(desc[0], &d, sizeof d)) return 3;
    {
      SendSide send;
      if (p2pTransport().connectSend(devCtx(&r0, &r1, kSlots, kSlotBytes), d, &send) !=
          ncclSuccess) {
        std::fprintf(stderr, "sender: %s\n", ncclGetLastError(nullptr));
        return 4;
      }
      if (send.dev.hostMem != 0 || !send.dev.valid()) return 5;
      std::string err = devProduce(send.dev, kSizes);
      if (!err.empty()) {
        std::fprintf(stderr, "sender: %s\n", err.c_str());
        return 6;
      }
      std::string peerWhy;
      if (send.res->checkPeer(&peerWhy) != ncclSuccess) return 7;
    }  // closes the IPC mapping
    char c = 1;
    return writeFull(done[1], &c, 1) ? 0 : 8;
  });
  ASSERT_GT(recvPid, 0);
  ASSERT_GT(sendPid, 0);
  writeFull(toRecv[1], &sendPid, sizeof sendPid);
  writeFull(toSend[1], &recvPid, sizeof recvPid);
  EXPECT_EQ(waitChild(sendPid, 60000), 0) << "sender";
  EXPECT_EQ(waitChild(recvPid, 60000), 0) << "receiver";
  for (int fd : {toRecv[0], toRecv[1], toSend[0], toSend[1], desc[0], desc[1], done[0], done[1]})
    close(fd);
}

}  // namespace
}  // namespace braid
