// Issue order, stream joins and failure hand-back: regressions found in review.
//  - a communicator's work runs in the order it was issued, whatever stream or thread;
//  - a group naming a host stream and the null stream is one unit on one comm;
//  - ncclCommSplit waits for work queued on the parent before using its bootstrap;
//  - a PreMulSum op is captured when the call is made (destroy/reuse cannot change it);
//  - a send that failed with zero-copy data pending never lets the peer read the
//    buffer the failed call handed back.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "braid/braid.h"
#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

constexpr size_t kN = 1024;

struct Stream {
  braidHostStream_t s = nullptr;
  Stream() { EXPECT_EQ(braidHostStreamCreate(&s), ncclSuccess); }
  ~Stream() { EXPECT_EQ(braidHostStreamDestroy(s), ncclSuccess); }
  cudaStream_t cuda() const { return braidHostStreamAsCuda(s); }
};

/// Two pairs of thread-rank comms: `c` under test, `d` to keep a stream busy.
struct TwoJobs {
  ncclComm_t c[2] = {nullptr, nullptr};
  ncclComm_t d[2] = {nullptr, nullptr};
  TwoJobs() {
    EXPECT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(ncclCommInitAll(d, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  ~TwoJobs() {
    if (late_.joinable()) late_.join();
    for (ncclComm_t x : {c[0], c[1], d[0], d[1]}) {
      if (x) {
        EXPECT_EQ(ncclCommDestroy(x), ncclSuccess);
      }
    }
  }
  /// Keeps rank r's host stream busy for ~0.3 s: queues a recv on `d` whose sender
  /// (rank 1-r, on a thread of ours) comes late. Call once per test.
  void keepBusy(int r, const Stream& s) {
    EXPECT_EQ(ncclRecv(in_.data(), kN, ncclFloat, 1 - r, d[r], s.cuda()), ncclSuccess);
    late_ = std::thread([this, r] {
      usleep(300000);
      EXPECT_EQ(ncclSend(out_.data(), kN, ncclFloat, r, d[1 - r], nullptr), ncclSuccess);
    });
  }

 private:
  std::vector<float> in_ = std::vector<float>(kN), out_ = std::vector<float>(kN);
  std::thread late_;
};

TEST(Ordering, HostStreamThenInlineRunInIssueOrder) {
  TwoJobs j;
  std::vector<float> a[2] = {std::vector<float>(kN, 1), std::vector<float>(kN, 1)};
  std::vector<float> b[2] = {std::vector<float>(kN, 100), std::vector<float>(kN, 100)};
  // Rank 1's stream is busy: its queued all-reduce A must still run before its inline
  // all-reduce B, as on rank 0.
  auto rank = [&](int r) {
    Stream hs;
    if (r == 1) j.keepBusy(1, hs);
    EXPECT_EQ(ncclAllReduce(a[r].data(), a[r].data(), kN, ncclFloat, ncclSum, j.c[r], hs.cuda()),
              ncclSuccess);
    EXPECT_EQ(ncclAllReduce(b[r].data(), b[r].data(), kN, ncclFloat, ncclSum, j.c[r], nullptr),
              ncclSuccess);
    EXPECT_EQ(braidHostStreamSynchronize(hs.s), ncclSuccess);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(a[r][0], 2.f) << "rank " << r;
    EXPECT_EQ(b[r][0], 200.f) << "rank " << r;
  }
}

TEST(Ordering, GroupAcrossHostAndNullStreamIsOneUnit) {
  ScopedEnv env({{"BRAID_TIMEOUT_MS", "20000"}});  // a deadlock fails instead of hanging
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  const size_t n = 1 << 20;  // larger than a FIFO: send and recv must run together
  auto rank = [&](int r) {
    std::vector<float> s(n, float(r + 1)), d(n, 0);
    Stream hs;
    ncclGroupStart();
    ncclSend(s.data(), n, ncclFloat, 1 - r, c[r], hs.cuda());
    ncclRecv(d.data(), n, ncclFloat, 1 - r, c[r], nullptr);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);  // has a null-stream op: done on return
    EXPECT_EQ(d[0], float(2 - r));
    EXPECT_EQ(d[n - 1], float(2 - r));
    EXPECT_EQ(braidHostStreamSynchronize(hs.s), ncclSuccess);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (ncclComm_t x : c) EXPECT_EQ(ncclCommDestroy(x), ncclSuccess);
}

TEST(Ordering, SplitWaitsForWorkQueuedOnTheParent) {
  ScopedEnv env({{"BRAID_BOOTSTRAP_TIMEOUT_MS", "20000"}});  // a deadlock fails, not hangs
  TwoJobs j;
  std::vector<float> a[2] = {std::vector<float>(kN, 1), std::vector<float>(kN, 2)};
  auto rank = [&](int r) {
    Stream hs;
    if (r == 1) j.keepBusy(1, hs);
    EXPECT_EQ(ncclAllReduce(a[r].data(), a[r].data(), kN, ncclFloat, ncclSum, j.c[r], hs.cuda()),
              ncclSuccess);
    ncclComm_t child = nullptr;
    EXPECT_EQ(ncclCommSplit(j.c[r], 0, 0, &child, nullptr), ncclSuccess)
        << ncclGetLastError(j.c[r]);
    EXPECT_EQ(braidHostStreamSynchronize(hs.s), ncclSuccess);
    int n = 0;
    if (child) {
      EXPECT_EQ(ncclCommCount(child, &n), ncclSuccess);
      EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    }
    EXPECT_EQ(n, 2);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(a[0][0], 3.f);
  EXPECT_EQ(a[1][0], 3.f);
}

TEST(Ordering, PreMulSumOpIsCapturedAtTheCall) {
  TwoJobs j;
  std::vector<float> a0(kN, 1), a1(kN, 1);
  std::thread other([&] {
    float two = 2;
    ncclRedOp_t op;
    EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat, ncclScalarHostImmediate, j.c[1]),
              ncclSuccess);
    EXPECT_EQ(ncclAllReduce(a1.data(), a1.data(), kN, ncclFloat, op, j.c[1], nullptr), ncclSuccess);
  });
  Stream hs;
  j.keepBusy(0, hs);
  float two = 2, five = 5;
  ncclRedOp_t op, op2;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat, ncclScalarHostImmediate, j.c[0]),
            ncclSuccess);
  EXPECT_EQ(ncclAllReduce(a0.data(), a0.data(), kN, ncclFloat, op, j.c[0], hs.cuda()), ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(op, j.c[0]), ncclSuccess);  // legal once the call returned
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op2, &five, ncclFloat, ncclScalarHostImmediate, j.c[0]),
            ncclSuccess);  // may reuse the handle
  EXPECT_EQ(braidHostStreamSynchronize(hs.s), ncclSuccess);
  other.join();
  EXPECT_EQ(a0[0], 4.f) << "2*1 + 2*1";
  EXPECT_EQ(a1[0], 4.f);
}

TEST(Ordering, FailedZeroCopySendIsNeverReadAfterwards) {
  // Settings are read at init: a short timeout, and the zero-copy (local) transport.
  ScopedEnv env({{"BRAID_TRANSPORT", "local"}, {"BRAID_TIMEOUT_MS", "300"}});
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  const size_t n = 1 << 20;
  {  // connect both directions first (zero-copy needs the local transport's connection)
    std::vector<float> w0(n, 1), w1(n, 1), r0(n), r1(n);
    auto warm = [&](int r, std::vector<float>& s, std::vector<float>& d) {
      ncclGroupStart();
      ncclSend(s.data(), n, ncclFloat, 1 - r, c[r], nullptr);
      ncclRecv(d.data(), n, ncclFloat, 1 - r, c[r], nullptr);
      EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    };
    std::thread a(warm, 0, std::ref(w0), std::ref(r0)), b(warm, 1, std::ref(w1), std::ref(r1));
    a.join();
    b.join();
  }
  auto* sbuf = static_cast<float*>(malloc(n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) sbuf[i] = 42.f;
  std::vector<float> rbuf(n, 0);
  ncclResult_t sent = ncclSuccess, received = ncclSuccess;
  std::thread s([&] {
    sent = ncclSend(sbuf, n, ncclFloat, 1, c[0], nullptr);  // the receiver comes too late
    for (size_t i = 0; i < n; ++i) sbuf[i] = -7.f;           // the user reuses its buffer
    free(sbuf);                                               // ...or frees it
  });
  std::thread r([&] {
    usleep(1500000);
    received = ncclRecv(rbuf.data(), n, ncclFloat, 0, c[1], nullptr);
  });
  s.join();
  r.join();
  EXPECT_NE(sent, ncclSuccess) << "the send should have timed out";
  if (received == ncclSuccess) {
    EXPECT_EQ(rbuf[0], 42.f);  // a completed recv holds the sent data, never the reuse
    EXPECT_EQ(rbuf[n - 1], 42.f);
  }
  for (ncclComm_t x : c) EXPECT_EQ(ncclCommAbort(x), ncclSuccess);
}

TEST(Ordering, AbortingANonblockingSplitChildIsPrompt) {
  // The parent's bootstrap would wait this long for rank 1, which never joins the split.
  ScopedEnv env({{"BRAID_BOOTSTRAP_TIMEOUT_MS", "20000"}});
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t child = nullptr;
  EXPECT_EQ(ncclCommSplit(c[0], 0, 0, &child, &cfg), ncclInProgress);
  ASSERT_NE(child, nullptr);
  usleep(100000);  // the split is now waiting in the parent's allgather
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(child), ncclSuccess);
  EXPECT_LT(secondsSince(t0), 5.0) << "aborting the child must stop its wait on the parent";
  for (ncclComm_t x : c) EXPECT_EQ(ncclCommAbort(x), ncclSuccess);
}

}  // namespace
}  // namespace mr
