// Braid host streams (include/braid/braid.h): ops passed a host stream are queued and
// run in order on the stream's thread; the caller returns at once and waits with
// braidHostStreamSynchronize.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "nccl.h"
#include "tests/multirank/data.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

double hv(int r, int k, size_t i) { return double((r * 37 + k * 11 + int64_t(i)) % 1000); }

/// Several kinds of op queued on one host stream; all correct after synchronize.
void queuedOps(ncclComm_t comm, int rank, int n) {
  braidHostStream_t hs = nullptr;
  MR_NCCL_OK(braidHostStreamCreate(&hs));
  const cudaStream_t s = braidHostStreamAsCuda(hs);
  const size_t count = 4099;
  TypedBuffer arIn(ncclFloat32, count), arOut(ncclFloat32, count), ag(ncclFloat32, count * n),
      bc(ncclFloat32, count), p2p(ncclFloat32, count);
  for (size_t i = 0; i < count; ++i) {
    arIn.set(i, hv(rank, 0, i));
    bc.set(i, rank == 0 ? hv(0, 1, i) : -1);
  }
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  MR_NCCL_OK(ncclAllReduce(arIn.data(), arOut.data(), count, ncclFloat32, ncclSum, comm, s));
  MR_NCCL_OK(ncclAllGather(arIn.data(), ag.data(), count, ncclFloat32, comm, s));
  MR_NCCL_OK(ncclBroadcast(bc.data(), bc.data(), count, ncclFloat32, 0, comm, s));
  MR_NCCL_OK(ncclGroupStart());
  MR_NCCL_OK(ncclSend(arIn.data(), count, ncclFloat32, next, comm, s));
  MR_NCCL_OK(ncclRecv(p2p.data(), count, ncclFloat32, prev, comm, s));
  MR_NCCL_OK(ncclGroupEnd());
  MR_NCCL_OK(braidHostStreamSynchronize(hs));
  EXPECT_EQ(braidHostStreamQuery(hs), ncclSuccess);
  EXPECT_TRUE(checkElements("allreduce", count, [&](size_t i, double* g, double* w) {
    *g = arOut.get(i);
    *w = 0;
    for (int r = 0; r < n; ++r) *w += hv(r, 0, i);
  }));
  EXPECT_TRUE(checkElements("allgather", count * n, [&](size_t j, double* g, double* w) {
    *g = ag.get(j);
    *w = hv(int(j / count), 0, j % count);
  }));
  EXPECT_TRUE(checkElements("broadcast", count, [&](size_t i, double* g, double* w) {
    *g = bc.get(i);
    *w = hv(0, 1, i);
  }));
  EXPECT_TRUE(checkElements("recv", count, [&](size_t i, double* g, double* w) {
    *g = p2p.get(i);
    *w = hv(prev, 0, i);
  }));
  MR_NCCL_OK(braidHostStreamDestroy(hs));
}

TEST(HostStream, SeveralQueuedOpsThreads) { run(Launch::kInitAll, 3, queuedOps); }

TEST(HostStream, SeveralQueuedOpsProcesses) {
  ScopedEnv env({{"BRAID_TRANSPORT", "shm"}});
  run(Launch::kProcesses, 3, queuedOps);
}

// Rank 1 joins only after rank 0 has enqueued, returned and seen ncclInProgress: so
// rank 0's call cannot have waited for the collective.
TEST(HostStream, CallerReturnsBeforeCompletion) {
  std::atomic<bool> rank0Returned{false};
  run(Launch::kInitAll, 2, [&](ncclComm_t& comm, int rank, int n) {
    braidHostStream_t hs = nullptr;
    MR_NCCL_OK(braidHostStreamCreate(&hs));
    const size_t count = 100000;
    std::vector<float> in(count, float(rank + 1)), out(count, 0);
    if (rank == 0) {
      struct Release {  // rank 1 must not wait forever if an assertion returns early
        std::atomic<bool>& flag;
        ~Release() { flag.store(true); }
      } release{rank0Returned};
      const auto t0 = std::chrono::steady_clock::now();
      MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm,
                               braidHostStreamAsCuda(hs)));
      EXPECT_LT(secondsSince(t0), 2.0) << "the enqueueing call waited";
      EXPECT_EQ(braidHostStreamQuery(hs), ncclInProgress)
          << "the all-reduce cannot have completed: rank 1 has not joined yet";
    } else {
      while (!rank0Returned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm,
                               braidHostStreamAsCuda(hs)));
    }
    MR_NCCL_OK(braidHostStreamSynchronize(hs));
    EXPECT_EQ(out[0], float(n * (n + 1) / 2));
    EXPECT_EQ(out[count - 1], float(n * (n + 1) / 2));
    MR_NCCL_OK(braidHostStreamDestroy(hs));
  });
}

// Each queued op reads the previous one's output: a reordering or overlap of queued
// ops gives wrong values.
TEST(HostStream, QueuedOpsRunInOrder) {
  ScopedEnv env(smallFifoEnv("local"));
  run(Launch::kInitAll, 3, [](ncclComm_t& comm, int rank, int n) {
    braidHostStream_t hs = nullptr;
    MR_NCCL_OK(braidHostStreamCreate(&hs));
    const cudaStream_t s = braidHostStreamAsCuda(hs);
    const size_t count = 5000;
    constexpr int kSteps = 6;
    std::vector<std::vector<int64_t>> bufs(kSteps + 1, std::vector<int64_t>(count, 0));
    for (size_t i = 0; i < count; ++i) bufs[0][i] = int64_t(i % 13) + rank;
    for (int k = 0; k < kSteps; ++k)
      MR_NCCL_OK(ncclAllReduce(bufs[size_t(k)].data(), bufs[size_t(k) + 1].data(), count,
                               ncclInt64, ncclSum, comm, s));
    MR_NCCL_OK(braidHostStreamSynchronize(hs));
    for (size_t i = 0; i < count; i += 7) {
      int64_t want = 0;
      for (int r = 0; r < n; ++r) want += int64_t(i % 13) + r;
      for (int k = 1; k < kSteps; ++k) want *= n;
      ASSERT_EQ(bufs[kSteps][i], want) << "element " << i;
    }
    MR_NCCL_OK(braidHostStreamDestroy(hs));
  });
}

// A host function runs after the work queued before it and before the work queued after
// it: it sees the first all-reduce's result and the second has not yet overwritten it.
TEST(HostStream, HostFuncRunsInStreamOrder) {
  run(Launch::kInitAll, 2, [](ncclComm_t& comm, int rank, int n) {
    braidHostStream_t hs = nullptr;
    MR_NCCL_OK(braidHostStreamCreate(&hs));
    const cudaStream_t s = braidHostStreamAsCuda(hs);
    const size_t count = 70000;
    std::vector<float> buf(count, 1.0f);
    struct Probe {
      const float* buf;
      size_t count;
      float first = -1, last = -1;
    } probe{buf.data(), count};
    auto look = [](void* p) {
      auto* pr = static_cast<Probe*>(p);
      pr->first = pr->buf[0];
      pr->last = pr->buf[pr->count - 1];
    };
    MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, s));
    MR_NCCL_OK(braidHostStreamLaunchHostFunc(hs, look, &probe));
    MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, s));
    MR_NCCL_OK(braidHostStreamSynchronize(hs));
    EXPECT_EQ(probe.first, float(n));
    EXPECT_EQ(probe.last, float(n));
    EXPECT_EQ(buf[0], float(n * n));
    EXPECT_EQ(braidHostStreamLaunchHostFunc(hs, nullptr, nullptr), ncclInvalidArgument);
    MR_NCCL_OK(braidHostStreamDestroy(hs));
  });
}

TEST(HostStream, NotAStream) {
  int x = 0;
  EXPECT_EQ(braidHostStreamSynchronize(reinterpret_cast<braidHostStream_t>(&x)),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("host stream"), std::string::npos)
      << ncclGetLastError(nullptr);
}

}  // namespace
}  // namespace mr
