// API errors: every bad input returns the right NCCL code and ncclGetLastError names the
// problem. Also: abort from another thread while a collective waits, unique ids of
// another job, misuse of PreMulSum ops and of ncclConfig_t.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

/// The code, and the text both of the thread's last error and of the comm's.
#define EXPECT_NCCL_ERROR(call, code, comm, text)               \
  do {                                                          \
    EXPECT_EQ((call), (code)) << #call;                         \
    EXPECT_TRUE(mentions(ncclGetLastError(nullptr), text)) << #call; \
    if ((comm) != nullptr) {                                    \
      EXPECT_TRUE(mentions(ncclGetLastError(comm), text)) << #call; \
    }                                                           \
  } while (0)

/// Two ready communicators of one job, driven from the test's thread (argument checks
/// fail before any communication).
class ApiErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ncclCommInitAll(comms_, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    comm_ = comms_[0];
  }
  void TearDown() override {
    for (ncclComm_t c : comms_) {
      if (c) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
      }
    }
  }
  ncclComm_t comms_[2] = {nullptr, nullptr};
  ncclComm_t comm_ = nullptr;
  float buf_[64] = {};
  float out_[64] = {};
};

TEST_F(ApiErrors, NullComm) {
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, out_, 4, ncclFloat32, ncclSum, nullptr, nullptr),
                    ncclInvalidArgument, nullptr, "comm is NULL");
  EXPECT_NCCL_ERROR(ncclSend(buf_, 4, ncclFloat32, 0, nullptr, nullptr), ncclInvalidArgument,
                    nullptr, "ncclSend");
  int n = 0;
  EXPECT_NCCL_ERROR(ncclCommCount(nullptr, &n), ncclInvalidArgument, nullptr, "comm is NULL");
}

TEST_F(ApiErrors, DestroyedAndAbortedComms) {
  ncclComm_t destroyed = comms_[0], aborted = comms_[1];
  ASSERT_EQ(ncclCommDestroy(destroyed), ncclSuccess);
  ASSERT_EQ(ncclCommAbort(aborted), ncclSuccess);
  comms_[0] = comms_[1] = nullptr;  // TearDown must not destroy them again
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, out_, 4, ncclFloat32, ncclSum, destroyed, nullptr),
                    ncclInvalidArgument, nullptr, "was destroyed");
  EXPECT_NCCL_ERROR(ncclBroadcast(buf_, out_, 4, ncclFloat32, 0, aborted, nullptr),
                    ncclInvalidArgument, nullptr, "was destroyed");
  int n = 0;
  EXPECT_NCCL_ERROR(ncclCommCount(destroyed, &n), ncclInvalidArgument, nullptr, "was destroyed");
  EXPECT_NCCL_ERROR(ncclCommDestroy(destroyed), ncclInvalidArgument, nullptr, "was destroyed");
}

// Handles that were never communicators: nothing is read through them (UBSan's vptr
// check and ASan watch that under the sanitizer builds), every call says so.
TEST_F(ApiErrors, HandlesNeverCreated) {
  alignas(64) unsigned char zeros[4096] = {};
  alignas(64) unsigned char ones[4096];
  std::memset(ones, 0xff, sizeof ones);
  const ncclComm_t fakes[] = {reinterpret_cast<ncclComm_t>(zeros),
                              reinterpret_cast<ncclComm_t>(ones),
                              reinterpret_cast<ncclComm_t>(uintptr_t(0x10)),  // unmapped
                              reinterpret_cast<ncclComm_t>(reinterpret_cast<char*>(comm_) + 8)};
  for (ncclComm_t fake : fakes) {
    EXPECT_NCCL_ERROR(ncclAllReduce(buf_, out_, 4, ncclFloat32, ncclSum, fake, nullptr),
                      ncclInvalidArgument, nullptr, "is not a valid communicator");
    int n = 0;
    EXPECT_NCCL_ERROR(ncclCommCount(fake, &n), ncclInvalidArgument, nullptr,
                      "is not a valid communicator");
    EXPECT_NCCL_ERROR(ncclCommDestroy(fake), ncclInvalidArgument, nullptr,
                      "is not a valid communicator");
    ncclResult_t async = ncclSuccess;
    EXPECT_NCCL_ERROR(ncclCommGetAsyncError(fake, &async), ncclInvalidArgument, nullptr,
                      "is not a valid communicator");
    EXPECT_NE(ncclGetLastError(fake), nullptr);  // the thread's message, not a read of *fake
  }
  // The real ones still work.
  MR_NCCL_OK(ncclGroupStart());
  for (ncclComm_t c : comms_)
    MR_NCCL_OK(ncclAllReduce(buf_, out_, 4, ncclFloat32, ncclSum, c, nullptr));
  MR_NCCL_OK(ncclGroupEnd());
}

// A send to itself or a receive from itself alone (one-rank communicator, or outside a
// group) could only wait for its partner until the timeout: refused at once. Paired in a
// group they run.
TEST(SelfSendRecv, UnpairedIsRefusedPairedRuns) {
  ncclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> a(256, 3.0f), b(256, 0.0f);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NCCL_ERROR(ncclRecv(b.data(), 256, ncclFloat, 0, comm, nullptr), ncclInvalidUsage,
                    comm, "must be in the same group");
  EXPECT_NCCL_ERROR(ncclSend(a.data(), 256, ncclFloat, 0, comm, nullptr), ncclInvalidUsage,
                    comm, "1 send(s) to this rank itself but 0 receive(s)");
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclRecv(b.data(), 256, ncclFloat, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclRecv(b.data(), 256, ncclFloat, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclSend(a.data(), 256, ncclFloat, 0, comm, nullptr), ncclSuccess);
  EXPECT_NCCL_ERROR(ncclGroupEnd(), ncclInvalidUsage, comm,
                    "1 send(s) to this rank itself but 2 receive(s)");
  EXPECT_LT(secondsSince(t0), 1.0);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclRecv(b.data(), 256, ncclFloat, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclSend(a.data(), 256, ncclFloat, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(b[0], 3.0f);
  EXPECT_EQ(b[255], 3.0f);
  // The refusals left nothing behind: the communicator is fine.
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(ApiErrors, NullBuffers) {
  EXPECT_NCCL_ERROR(ncclAllReduce(nullptr, out_, 4, ncclFloat32, ncclSum, comm_, nullptr),
                    ncclInvalidArgument, comm_, "sendbuff");
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, nullptr, 4, ncclFloat32, ncclSum, comm_, nullptr),
                    ncclInvalidArgument, comm_, "recvbuff");
  EXPECT_NCCL_ERROR(ncclAllGather(buf_, nullptr, 4, ncclFloat32, comm_, nullptr),
                    ncclInvalidArgument, comm_, "recvbuff");
  EXPECT_NCCL_ERROR(ncclRecv(nullptr, 4, ncclFloat32, 1, comm_, nullptr), ncclInvalidArgument,
                    comm_, "recvbuff");
  // Rank 0 is the root of this broadcast: it must pass a send buffer.
  EXPECT_NCCL_ERROR(ncclBroadcast(nullptr, out_, 4, ncclFloat32, 0, comm_, nullptr),
                    ncclInvalidArgument, comm_, "sendbuff");
}

TEST_F(ApiErrors, MisalignedBuffer) {
  char* p = reinterpret_cast<char*>(buf_) + 1;
  EXPECT_NCCL_ERROR(ncclAllReduce(p, out_, 4, ncclFloat32, ncclSum, comm_, nullptr),
                    ncclInvalidArgument, comm_, "aligned");
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, reinterpret_cast<char*>(out_) + 2, 4, ncclFloat32,
                                  ncclSum, comm_, nullptr),
                    ncclInvalidArgument, comm_, "recvbuff");
}

TEST_F(ApiErrors, InvalidDatatype) {
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, out_, 4, ncclNumTypes, ncclSum, comm_, nullptr),
                    ncclInvalidArgument, comm_, "datatype");
  EXPECT_NCCL_ERROR(ncclBroadcast(buf_, out_, 4, ncclDataType_t(-1), 0, comm_, nullptr),
                    ncclInvalidArgument, comm_, "datatype");
}

TEST_F(ApiErrors, InvalidOp) {
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, out_, 4, ncclFloat32, ncclRedOp_t(99), comm_, nullptr),
                    ncclInvalidArgument, comm_, "op 99");
  EXPECT_NCCL_ERROR(ncclReduce(buf_, out_, 4, ncclFloat32, ncclNumOps, 0, comm_, nullptr),
                    ncclInvalidArgument, comm_, "op");
}

TEST_F(ApiErrors, RootAndPeerOutOfRange) {
  EXPECT_NCCL_ERROR(ncclBroadcast(buf_, out_, 4, ncclFloat32, 2, comm_, nullptr),
                    ncclInvalidArgument, comm_, "root 2");
  EXPECT_NCCL_ERROR(ncclReduce(buf_, out_, 4, ncclFloat32, ncclSum, -1, comm_, nullptr),
                    ncclInvalidArgument, comm_, "root -1");
  EXPECT_NCCL_ERROR(ncclGather(buf_, out_, 4, ncclFloat32, 5, comm_, nullptr),
                    ncclInvalidArgument, comm_, "root 5");
  EXPECT_NCCL_ERROR(ncclSend(buf_, 4, ncclFloat32, 2, comm_, nullptr), ncclInvalidArgument, comm_,
                    "peer 2");
  EXPECT_NCCL_ERROR(ncclRecv(out_, 4, ncclFloat32, -3, comm_, nullptr), ncclInvalidArgument,
                    comm_, "peer -3");
}

TEST_F(ApiErrors, CountOverflow) {
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, out_, SIZE_MAX, ncclFloat32, ncclSum, comm_, nullptr),
                    ncclInvalidArgument, comm_, "overflow");
  // Per-rank count times nranks overflows.
  EXPECT_NCCL_ERROR(ncclAllGather(buf_, out_, SIZE_MAX / 2 + 1, ncclInt8, comm_, nullptr),
                    ncclInvalidArgument, comm_, "overflow");
}

TEST_F(ApiErrors, ErrorsInsideAGroupFailTheGroup) {
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buf_, out_, 4, ncclNumTypes, ncclSum, comm_, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(ncclGroupEnd(), ncclSuccess) << "a group holding an invalid op must fail";
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the group must be closed";
}

TEST_F(ApiErrors, PreMulSumWithAnotherDatatype) {
  float scalar = 2;
  ncclRedOp_t op;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm_),
            ncclSuccess);
  int32_t ibuf[4] = {}, iout[4] = {};
  EXPECT_NCCL_ERROR(ncclAllReduce(ibuf, iout, 4, ncclInt32, op, comm_, nullptr),
                    ncclInvalidArgument, comm_, "datatype");
  EXPECT_EQ(ncclRedOpDestroy(op, comm_), ncclSuccess);
  // A destroyed op is no longer usable.
  EXPECT_NCCL_ERROR(ncclAllReduce(buf_, out_, 4, ncclFloat32, op, comm_, nullptr),
                    ncclInvalidArgument, comm_, "op");
  EXPECT_NCCL_ERROR(ncclRedOpDestroy(op, comm_), ncclInvalidArgument, comm_, "ncclRedOpDestroy");
}

TEST(InitErrors, BadRankCounts) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument, nullptr, "nranks");
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 2, id, 2), ncclInvalidArgument, nullptr, "rank 2");
  EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument, nullptr, "rank -1");
  EXPECT_NCCL_ERROR(ncclCommInitAll(&c, 0, nullptr), ncclInvalidArgument, nullptr, "ndev");
  // The id is still good: a valid 1-rank communicator from it works.
  ASSERT_EQ(ncclCommInitRank(&c, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(InitErrors, WrongConfigMagic) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678;
  ncclComm_t c = nullptr;
  EXPECT_NCCL_ERROR(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument, nullptr,
                    "NCCL_CONFIG_INITIALIZER");
  ncclConfig_t good = NCCL_CONFIG_INITIALIZER;
  ASSERT_EQ(ncclCommInitRankConfig(&c, 1, id, 0, &good), ncclSuccess) << ncclGetLastError(nullptr);
  ncclComm_t sub = nullptr;
  EXPECT_NCCL_ERROR(ncclCommSplit(c, 0, 0, &sub, &cfg), ncclInvalidArgument, c,
                    "NCCL_CONFIG_INITIALIZER");
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// A rank whose id carries another job's secret is refused by the root, naming the other
// job; the job itself is unharmed and the rank can still join with the right id.
TEST(InitErrors, UniqueIdOfAnotherJob) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclUniqueId forged = id;
  // Braid's id layout (src/bootstrap/wire.h IdLayout): bytes 8..15 hold the secret.
  for (int i = 8; i < 16; ++i) forged.internal[i] = char(~forged.internal[i]);
  ncclComm_t good = nullptr;
  ncclResult_t goodResult = ncclInternalError;
  std::thread rank0([&] { goodResult = ncclCommInitRank(&good, 2, id, 0); });
  ncclComm_t bad = nullptr;
  EXPECT_NCCL_ERROR(ncclCommInitRank(&bad, 2, forged, 1), ncclInvalidArgument, nullptr,
                    "another job");
  ncclComm_t late = nullptr;
  EXPECT_EQ(ncclCommInitRank(&late, 2, id, 1), ncclSuccess) << ncclGetLastError(nullptr);
  rank0.join();
  EXPECT_EQ(goodResult, ncclSuccess);
  if (good) {
    EXPECT_EQ(ncclCommDestroy(good), ncclSuccess);
  }
  if (late) {
    EXPECT_EQ(ncclCommDestroy(late), ncclSuccess);
  }
}

// Ranks given ids of two different jobs each wait at their own root: a bounded error
// that says what to check, not a hang.
TEST(InitErrors, RanksGivenDifferentIds) {
  ScopedEnv env({{"BRAID_BOOTSTRAP_TIMEOUT_MS", "1500"}});
  ncclUniqueId ids[2];
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  std::vector<ncclResult_t> res(2, ncclSuccess);
  std::vector<std::string> text(2);
  const auto t0 = std::chrono::steady_clock::now();
  runThreads(2, [&](int r) {
    ncclComm_t c = nullptr;
    res[size_t(r)] = ncclCommInitRank(&c, 2, ids[r], r);
    text[size_t(r)] = ncclGetLastError(nullptr);
    if (c) ncclCommDestroy(c);
  });
  EXPECT_LT(secondsSince(t0), 20.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(res[size_t(r)], ncclSuccess) << "rank " << r;
    EXPECT_TRUE(mentions(text[size_t(r)].c_str(), "unique id")) << "rank " << r;
  }
}

/// ncclCommAbort from another thread ends a collective waiting for a peer that never
/// arrives; `warm`: the connections exist already (the wait is in the executor), else
/// the wait is in connection setup.
void abortWhileWaiting(bool warm) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> a(50000, 1), b(50000, 0);
  if (warm) {
    runThreads(2, [&](int r) {
      std::vector<float> x(50000, 1), y(50000, 0);
      EXPECT_EQ(ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat32, ncclSum, comms[r],
                              nullptr),
                ncclSuccess);
    });
  }
  std::atomic<bool> returned{false};
  ncclResult_t result = ncclSuccess;
  std::string text;
  double waited = 0;
  std::thread waiter([&] {
    const auto t0 = std::chrono::steady_clock::now();
    result = ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comms[0], nullptr);
    waited = secondsSince(t0);
    text = ncclGetLastError(nullptr);  // the comm may be gone: the thread's last error
    returned.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load()) << "the all-reduce returned without its peer";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  const double abortTook = secondsSince(t0);
  waiter.join();
  EXPECT_LT(abortTook, 5.0) << "ncclCommAbort took too long";
  EXPECT_LT(waited, 6.0) << "the waiting call did not return promptly after the abort";
  EXPECT_NE(result, ncclSuccess);
  EXPECT_TRUE(mentions(text.c_str(), "abort")) << "waiting call's error";
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
}

TEST(AbortErrors, AbortFromAnotherThreadWhileWaitingInCollective) { abortWhileWaiting(true); }
TEST(AbortErrors, AbortFromAnotherThreadWhileWaitingForConnection) { abortWhileWaiting(false); }

}  // namespace
}  // namespace mr
