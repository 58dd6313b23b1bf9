// ncclCommSuspend / ncclCommResume / ncclCommMemStats (NCCL 2.30) on real ranks:
// NCCL_SUSPEND_MEM releases the connections' memory (MemStats drops to 0 and comes
// back after resume and the next collective), operations on a suspended communicator
// fail with ncclInvalidUsage, resume makes it usable again (data checked); flags 0
// refuses work but keeps the memory; argument and state errors; ranks disagreeing on
// the flags.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

uint64_t memStat(ncclComm_t comm, ncclCommMemStat_t which) {
  uint64_t v = 12345;
  EXPECT_EQ(ncclCommMemStats(comm, which, &v), ncclSuccess) << ncclGetLastError(comm);
  return v;
}

/// An all-reduce of (tag + rank + i), every element checked. Every rank must call it.
void checkAllReduce(ncclComm_t comm, int tag) {
  int rank = -1, n = 0;
  ASSERT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  const size_t count = 3000;
  std::vector<float> send(count), recv(count, -1.f);
  for (size_t i = 0; i < count; ++i) send[i] = float(tag + rank + int(i % 97));
  MR_NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr));
  for (size_t i = 0; i < count; ++i) {
    const float want = float(n * (tag + int(i % 97)) + n * (n - 1) / 2);
    ASSERT_EQ(recv[i], want) << "element " << i << " on rank " << rank << " of " << n;
  }
}

void suspendMemAndResume(ncclComm_t comm) {
  checkAllReduce(comm, 1);  // connections are made on first use
  const uint64_t before = memStat(comm, ncclStatGpuMemSuspend);
  EXPECT_GT(before, 0u) << "a communicator that ran an all-reduce holds FIFO memory";
  EXPECT_EQ(memStat(comm, ncclStatGpuMemTotal), before + memStat(comm, ncclStatGpuMemPersist));
  EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspended), 0u);

  MR_NCCL_OK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspended), 1u);
  const uint64_t during = memStat(comm, ncclStatGpuMemSuspend);
  EXPECT_LT(during, before);
  EXPECT_EQ(during, 0u) << "every connection is released";
  EXPECT_EQ(memStat(comm, ncclStatGpuMemTotal), memStat(comm, ncclStatGpuMemPersist));

  // Work on a suspended communicator is refused, with the call named.
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  EXPECT_EQ(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "ncclAllReduce"));
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "suspended"));
  EXPECT_EQ(ncclBroadcast(x, y, 4, ncclFloat32, 0, comm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "ncclCommSuspend"));
  ncclComm_t sub = nullptr;
  EXPECT_EQ(ncclCommSplit(comm, 0, 0, &sub, nullptr), ncclInvalidUsage);
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess) << "queries still work";

  MR_NCCL_OK(ncclCommResume(comm));
  EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspended), 0u);
  checkAllReduce(comm, 2);  // connections made again
  EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspend), before)
      << "the same connections as before the suspend";
  checkAllReduce(comm, 3);
  EXPECT_EQ(ncclCommResume(comm), ncclInvalidUsage);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "not suspended"));
}

// The flag board (on by default between ranks of one host) runs these all-reduces
// without FIFO connections: off here, since FIFO memory is what suspend releases.
TEST(Suspend, MemReleasedAndRestoredThreads) {
  ScopedEnv env({{"BRAID_BOARD", "0"}});
  run(Launch::kThreads, 3, [](ncclComm_t& comm, int, int) { suspendMemAndResume(comm); });
}

TEST(Suspend, MemReleasedAndRestoredInitAll) {
  // One process, ranks as threads sharing memory directly (the local transport).
  ScopedEnv env({{"BRAID_BOARD", "0"}});
  run(Launch::kInitAll, 4, [](ncclComm_t& comm, int, int) { suspendMemAndResume(comm); });
}

TEST(Suspend, MemReleasedAndRestoredProcessesShm) {
  ScopedEnv env({{"BRAID_TRANSPORT", "shm"}});
  run(Launch::kProcesses, 2, [](ncclComm_t& comm, int, int) { suspendMemAndResume(comm); });
}

TEST(Suspend, MemReleasedAndRestoredProcessesSockets) {
  ScopedEnv env({{"BRAID_TRANSPORT", "socket"}});
  run(Launch::kProcesses, 3, [](ncclComm_t& comm, int, int) { suspendMemAndResume(comm); });
}

TEST(Suspend, TwiceInARow) {
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int, int) {
    for (int round = 0; round < 2; ++round) {
      checkAllReduce(comm, 10 + round);
      MR_NCCL_OK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
      EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspend), 0u);
      MR_NCCL_OK(ncclCommResume(comm));
    }
    checkAllReduce(comm, 20);
  });
}

TEST(Suspend, WithoutMemFlagKeepsMemory) {
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int, int) {
    checkAllReduce(comm, 5);
    const uint64_t before = memStat(comm, ncclStatGpuMemSuspend);
    MR_NCCL_OK(ncclCommSuspend(comm, 0));
    EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspended), 1u);
    EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspend), before);
    int x = 1, y = 0;
    EXPECT_EQ(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr), ncclInvalidUsage);
    MR_NCCL_OK(ncclCommResume(comm));
    checkAllReduce(comm, 6);
  });
}

TEST(Suspend, RanksMustPassTheSameFlags) {
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int rank, int) {
    checkAllReduce(comm, 8);
    EXPECT_EQ(ncclCommSuspend(comm, rank == 0 ? NCCL_SUSPEND_MEM : 0), ncclInvalidUsage);
    EXPECT_TRUE(mentions(ncclGetLastError(comm), "same flags"));
    EXPECT_EQ(memStat(comm, ncclStatGpuMemSuspended), 0u) << "not suspended";
    checkAllReduce(comm, 9);
  });
}

TEST(Suspend, ArgumentErrors) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommSuspend(comm, 0x2), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "unknown flags 0x2"));
  EXPECT_EQ(ncclCommSuspend(nullptr, NCCL_SUSPEND_MEM), ncclInvalidArgument);
  EXPECT_EQ(ncclCommResume(nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommResume(comm), ncclInvalidUsage);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "ncclCommResume"));
  uint64_t v = 0;
  EXPECT_EQ(ncclCommMemStats(comm, ncclStatGpuMemTotal, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "value is NULL"));
  EXPECT_EQ(ncclCommMemStats(comm, ncclCommMemStat_t(7), &v), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "unknown stat 7"));
  EXPECT_EQ(ncclCommMemStats(nullptr, ncclStatGpuMemTotal, &v), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
  EXPECT_TRUE(mentions(ncclGetLastError(comm), "ncclGroupStart"));
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  // A one-rank communicator suspends and resumes on its own.
  MR_NCCL_OK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  MR_NCCL_OK(ncclCommResume(comm));
  checkAllReduce(comm, 4);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Destroying a suspended communicator is allowed (nothing left to resume for).
TEST(Suspend, DestroyWhileSuspended) {
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int, int) {
    checkAllReduce(comm, 1);
    MR_NCCL_OK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    comm = nullptr;
  });
}

}  // namespace
}  // namespace mr
