// Communicator lifecycle and queries: split, shrink, revoke, nonblocking init,
// finalize, memory and registration, windows, version, scalable init.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "nccl.h"
#include "tests/multirank/data.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

/// An all-reduce of (tag + rank) over comm, checked: every rank must call it.
void checkAllReduce(ncclComm_t comm, int tag) {
  int rank = -1, n = 0;
  ASSERT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  const size_t count = 777;
  std::vector<int64_t> send(count), recv(count, -1);
  for (size_t i = 0; i < count; ++i) send[i] = tag + rank + int64_t(i);
  MR_NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, ncclInt64, ncclSum, comm, nullptr));
  for (size_t i = 0; i < count; ++i) {
    int64_t want = int64_t(n) * (tag + int64_t(i)) + int64_t(n) * (n - 1) / 2;
    ASSERT_EQ(recv[i], want) << "element " << i << " on rank " << rank << " of " << n;
  }
}

bool contains(const char* text, const std::string& what) {
  return text != nullptr && std::string(text).find(what) != std::string::npos;
}

TEST(Comms, VersionIsNcclVersionCode) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
}

TEST(Comms, CountUserRankCuDevice) {
  run(Launch::kInitAll, 3, [](ncclComm_t& comm, int rank, int n) {
    int count = 0, user = -1, dev = -7;
    MR_NCCL_OK(ncclCommCount(comm, &count));
    MR_NCCL_OK(ncclCommUserRank(comm, &user));
    MR_NCCL_OK(ncclCommCuDevice(comm, &dev));
    EXPECT_EQ(count, n);
    EXPECT_EQ(user, rank);
    EXPECT_EQ(dev, rank) << "ncclCommInitAll with a NULL devlist uses devices 0..n-1";
  });
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int rank, int n) {
    int count = 0, user = -1, dev = -7;
    MR_NCCL_OK(ncclCommCount(comm, &count));
    MR_NCCL_OK(ncclCommUserRank(comm, &user));
    MR_NCCL_OK(ncclCommCuDevice(comm, &dev));
    EXPECT_EQ(count, n);
    EXPECT_EQ(user, rank);
  });
}

TEST(Comms, SplitByColorWithReversedKeys) {
  run(Launch::kThreads, 5, [](ncclComm_t& comm, int rank, int n) {
    // Rank 4 opts out; the others split into even and odd, ordered by descending rank.
    const int color = rank == 4 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t sub = reinterpret_cast<ncclComm_t>(uintptr_t(1));
    MR_NCCL_OK(ncclCommSplit(comm, color, -rank, &sub, nullptr));
    if (color == NCCL_SPLIT_NOCOLOR) {
      EXPECT_EQ(sub, nullptr) << "NCCL_SPLIT_NOCOLOR must give a NULL communicator";
      checkAllReduce(comm, 200);  // the parent stays usable for every rank
      return;
    }
    ASSERT_NE(sub, nullptr);
    std::vector<int> members;
    for (int r = n - 1; r >= 0; --r)
      if (r != 4 && r % 2 == color) members.push_back(r);
    int count = 0, user = -1;
    MR_NCCL_OK(ncclCommCount(sub, &count));
    MR_NCCL_OK(ncclCommUserRank(sub, &user));
    EXPECT_EQ(count, int(members.size()));
    EXPECT_EQ(user, int(std::find(members.begin(), members.end(), rank) - members.begin()));
    // The new order, seen through an all-gather of parent ranks.
    std::vector<int32_t> ranks(members.size(), -1);
    int32_t mine = rank;
    MR_NCCL_OK(ncclAllGather(&mine, ranks.data(), 1, ncclInt32, sub, nullptr));
    for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(ranks[i], members[i]) << "slot " << i;
    checkAllReduce(sub, 100);
    // The parent still works alongside the child.
    checkAllReduce(comm, 200);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(Comms, SplitOverProcesses) {
  ScopedEnv env({{"BRAID_TRANSPORT", "shm"}});
  run(Launch::kProcesses, 4, [](ncclComm_t& comm, int rank, int) {
    ncclComm_t sub = nullptr;
    MR_NCCL_OK(ncclCommSplit(comm, rank / 2, rank, &sub, nullptr));
    ASSERT_NE(sub, nullptr);
    int user = -1;
    MR_NCCL_OK(ncclCommUserRank(sub, &user));
    EXPECT_EQ(user, rank % 2);
    checkAllReduce(sub, 5);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(Comms, NonblockingInitThenPoll) {
  run(
      Launch::kThreads, 3,
      [](ncclComm_t& comm, int rank, int n) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclResult_t r = ncclCommInitRankConfig(&comm, n, sharedId(), rank, &cfg);
        ASSERT_TRUE(r == ncclInProgress || r == ncclSuccess)
            << ncclGetErrorString(r) << " - " << ncclGetLastError(nullptr);
        ASSERT_NE(comm, nullptr);
        ncclResult_t async = ncclInProgress;
        const auto t0 = std::chrono::steady_clock::now();
        do {
          MR_NCCL_OK(ncclCommGetAsyncError(comm, &async));
          if (async == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } while (async == ncclInProgress && secondsSince(t0) < 60);
        ASSERT_EQ(async, ncclSuccess) << ncclGetLastError(comm);
        checkAllReduce(comm, 9);
        r = ncclCommFinalize(comm);
        ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetLastError(comm);
        do {
          MR_NCCL_OK(ncclCommGetAsyncError(comm, &async));
        } while (async == ncclInProgress && secondsSince(t0) < 60);
        EXPECT_EQ(async, ncclSuccess);
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
        comm = nullptr;
      },
      RunOptions{120, true, /*createComm=*/false});
}

TEST(Comms, FinalizeThenDestroy) {
  run(Launch::kInitAll, 2, [](ncclComm_t& comm, int, int) {
    checkAllReduce(comm, 1);
    EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess) << ncclGetLastError(comm);
    // New work on a finalized communicator is refused.
    int32_t x = 1;
    EXPECT_NE(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    comm = nullptr;
  });
}

TEST(Comms, ShrinkExcludingARank) {
  run(Launch::kThreads, 4, [](ncclComm_t& comm, int rank, int) {
    checkAllReduce(comm, 3);
    if (rank == 2) return;  // the excluded rank takes no part
    int exclude[1] = {2};
    ncclComm_t small = nullptr;
    MR_NCCL_OK(ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_DEFAULT));
    ASSERT_NE(small, nullptr);
    int count = 0, user = -1;
    MR_NCCL_OK(ncclCommCount(small, &count));
    MR_NCCL_OK(ncclCommUserRank(small, &user));
    EXPECT_EQ(count, 3);
    EXPECT_EQ(user, rank < 2 ? rank : rank - 1);
    checkAllReduce(small, 40);
    EXPECT_EQ(ncclCommDestroy(small), ncclSuccess);
  });
}

TEST(Comms, RevokeThenCollectivesFail) {
  run(Launch::kInitAll, 3, [](ncclComm_t& comm, int, int) {
    checkAllReduce(comm, 2);
    MR_NCCL_OK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    int32_t x = 1;
    ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr);
    EXPECT_NE(r, ncclSuccess);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "revoked")) << ncclGetLastError(comm);
  });
}

TEST(Comms, MemAllocRegisterAndWindows) {
  // Host memory from ncclMemAlloc is what this test writes to; with a GPU it returns
  // device memory (tests/cuda_api and tests/gpu cover that).
  if (access("/dev/nvidiactl", F_OK) == 0)
    GTEST_SKIP() << "a GPU driver is present: ncclMemAlloc returns device memory there";
  run(Launch::kInitAll, 2, [](ncclComm_t& comm, int rank, int n) {
    const size_t count = 10000, bytes = count * sizeof(float);
    void* buf = nullptr;
    MR_NCCL_OK(ncclMemAlloc(&buf, bytes));
    ASSERT_NE(buf, nullptr);
    float* f = static_cast<float*>(buf);
    for (size_t i = 0; i < count; ++i) f[i] = float(rank + 1);

    void* handle = nullptr;
    MR_NCCL_OK(ncclCommRegister(comm, buf, bytes, &handle));
    EXPECT_NE(handle, nullptr);
    ncclWindow_t win = nullptr;
    MR_NCCL_OK(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    EXPECT_NE(win, nullptr);

    MR_NCCL_OK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, nullptr));
    for (size_t i = 0; i < count; i += 997) EXPECT_EQ(f[i], float(n * (n + 1) / 2));

    // A symmetric window must be NCCL_WIN_REQUIRED_ALIGNMENT-aligned.
    ncclWindow_t bad = nullptr;
    EXPECT_EQ(ncclCommWindowRegister(comm, f + 1, bytes - 4, &bad, NCCL_WIN_COLL_SYMMETRIC),
              ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "align")) << ncclGetLastError(comm);

    MR_NCCL_OK(ncclCommWindowDeregister(comm, win));
    MR_NCCL_OK(ncclCommDeregister(comm, handle));
    uint64_t notAHandle[8] = {};
    EXPECT_EQ(ncclCommDeregister(comm, notAHandle), ncclInvalidArgument);
    MR_NCCL_OK(ncclMemFree(buf));
  });
}

TEST(Comms, InitRankScalable) {
  run(
      Launch::kThreads, 4,
      [&](ncclComm_t& comm, int rank, int n) {
        ncclUniqueId ids[1] = {sharedId()};
        MR_NCCL_OK(ncclCommInitRankScalable(&comm, n, rank, 1, ids, nullptr));
        checkAllReduce(comm, 11);
      },
      RunOptions{120, true, /*createComm=*/false});
}

}  // namespace
}  // namespace mr
