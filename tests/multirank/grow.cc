// ncclCommGetUniqueId / ncclCommGrow (NCCL 2.30): existing ranks (threads or processes)
// grow their communicator by new ranks that get the token out of band; the grown
// communicator runs checked collectives with the old rank numbers kept, and the old
// communicator stays usable. Argument errors and a grow without a token.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

/// An all-reduce of (tag + rank + i) over comm, every element checked; then an
/// all-gather of the ranks (each slot must hold its rank). Every rank must call it.
void checkComm(ncclComm_t comm, int expectRanks, int expectRank, int tag) {
  int rank = -1, n = 0;
  ASSERT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  ASSERT_EQ(n, expectRanks);
  ASSERT_EQ(rank, expectRank);
  const size_t count = 1001;
  std::vector<int64_t> send(count), recv(count, -1);
  for (size_t i = 0; i < count; ++i) send[i] = tag + rank + int64_t(i);
  MR_NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, ncclInt64, ncclSum, comm, nullptr));
  for (size_t i = 0; i < count; ++i) {
    const int64_t want = int64_t(n) * (tag + int64_t(i)) + int64_t(n) * (n - 1) / 2;
    ASSERT_EQ(recv[i], want) << "element " << i << " on rank " << rank << " of " << n;
  }
  std::vector<int32_t> ranks(size_t(n), -1);
  int32_t mine = rank;
  MR_NCCL_OK(ncclAllGather(&mine, ranks.data(), 1, ncclInt32, comm, nullptr));
  for (int i = 0; i < n; ++i) ASSERT_EQ(ranks[size_t(i)], i) << "slot " << i;
}

/// The out-of-band channel from the coordinator to the new ranks: a shared page, made
/// before the harness forks, so threads and processes alike can use it.
struct Mailbox {
  std::atomic<int> state;  // 0: nothing yet, 1: id ready, -1: the coordinator failed
  ncclUniqueId id;
};

class SharedMailbox {
 public:
  SharedMailbox() {
    void* p = mmap(nullptr, sizeof(Mailbox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    box_ = p == MAP_FAILED ? nullptr : new (p) Mailbox();
    if (box_) box_->state.store(0);
  }
  ~SharedMailbox() {
    if (box_) munmap(box_, sizeof(Mailbox));
  }
  Mailbox* get() const { return box_; }

 private:
  Mailbox* box_ = nullptr;
};

bool awaitId(Mailbox* box, ncclUniqueId* id) {
  const auto t0 = std::chrono::steady_clock::now();
  while (box->state.load(std::memory_order_acquire) == 0) {
    if (secondsSince(t0) > 60) return false;
    usleep(500);
  }
  if (box->state.load() != 1) return false;
  *id = box->id;
  return true;
}

/// Grows a communicator of `oldN` ranks to `total`: ranks [0, oldN) make the old one,
/// `coordinator` makes the token; ranks [oldN, total) join with it.
void growAndCheck(Launch how, int oldN, int total, int coordinator, bool nonblocking = false) {
  SharedMailbox mailbox;
  Mailbox* box = mailbox.get();
  ASSERT_NE(box, nullptr);
  RunOptions opts;
  opts.createComm = false;
  run(
      how, total,
      [&](ncclComm_t&, int rank, int) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        if (nonblocking) cfg.blocking = 0;
        ncclConfig_t* config = nonblocking ? &cfg : nullptr;
        ncclComm_t grown = nullptr;
        ncclResult_t r;
        if (rank < oldN) {
          ncclComm_t old = nullptr;
          MR_NCCL_OK(ncclCommInitRank(&old, oldN, sharedId(), rank));
          checkComm(old, oldN, rank, 10);
          ncclUniqueId id;
          memset(&id, 0, sizeof(id));
          if (rank == coordinator) {
            const ncclResult_t got = ncclCommGetUniqueId(old, &id);
            box->id = id;
            box->state.store(got == ncclSuccess ? 1 : -1, std::memory_order_release);
            MR_NCCL_OK(got);
          }
          r = ncclCommGrow(old, total, rank == coordinator ? &id : nullptr, -1, &grown, config);
          if (nonblocking) {
            ASSERT_TRUE(r == ncclInProgress || r == ncclSuccess) << ncclGetErrorString(r);
            do {
              ASSERT_EQ(ncclCommGetAsyncError(grown, &r), ncclSuccess);
            } while (r == ncclInProgress);
          }
          MR_NCCL_OK(r);
          checkComm(grown, total, rank, 100);
          checkComm(old, oldN, rank, 20);  // the old communicator still works
          MR_NCCL_OK(ncclCommDestroy(old));
        } else {
          ncclUniqueId id;
          ASSERT_TRUE(awaitId(box, &id)) << "rank " << rank << ": no token from the coordinator";
          r = ncclCommGrow(nullptr, total, &id, rank, &grown, config);
          if (nonblocking) {
            ASSERT_TRUE(r == ncclInProgress || r == ncclSuccess) << ncclGetErrorString(r);
            do {
              ASSERT_EQ(ncclCommGetAsyncError(grown, &r), ncclSuccess);
            } while (r == ncclInProgress);
          }
          MR_NCCL_OK(r);
          checkComm(grown, total, rank, 100);
        }
        MR_NCCL_OK(ncclCommDestroy(grown));
      },
      opts);
}

TEST(Grow, TwoToThreeThreads) { growAndCheck(Launch::kThreads, 2, 3, 0); }

TEST(Grow, TwoToFourThreadsCoordinatorNotRankZero) { growAndCheck(Launch::kThreads, 2, 4, 1); }

TEST(Grow, TwoToFourProcesses) { growAndCheck(Launch::kProcesses, 2, 4, 0); }

TEST(Grow, ThreeToFourProcessesOverSockets) {
  ScopedEnv env({{"BRAID_TRANSPORT", "socket"}});
  growAndCheck(Launch::kProcesses, 3, 4, 2);
}

TEST(Grow, NonblockingThreads) { growAndCheck(Launch::kThreads, 2, 3, 0, /*nonblocking=*/true); }

TEST(Grow, ArgumentErrors) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ncclComm_t out = nullptr;
  ncclUniqueId token;
  ASSERT_EQ(ncclCommGetUniqueId(comms[0], &token), ncclSuccess) << ncclGetLastError(nullptr);

  EXPECT_EQ(ncclCommGetUniqueId(comms[0], nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "uniqueId is NULL"));
  EXPECT_EQ(ncclCommGetUniqueId(nullptr, &token), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGrow(comms[0], 3, &token, -1, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "newcomm is NULL"));
  // Existing ranks.
  EXPECT_EQ(ncclCommGrow(comms[0], 2, &token, -1, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "must be larger"));
  EXPECT_EQ(ncclCommGrow(comms[0], 3, &token, 0, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(comms[0]), "rank -1"));
  ncclComm_t single = nullptr;
  ASSERT_EQ(ncclCommInitAll(&single, 1, nullptr), ncclSuccess);
  ncclUniqueId foreign;
  ASSERT_EQ(ncclCommGetUniqueId(single, &foreign), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(comms[0], 3, &foreign, -1, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "another communicator"));
  ncclUniqueId plain;
  ASSERT_EQ(ncclGetUniqueId(&plain), ncclSuccess);
  EXPECT_EQ(ncclCommGrow(comms[0], 3, &plain, -1, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "not made by ncclCommGetUniqueId"));
  // New ranks.
  EXPECT_EQ(ncclCommGrow(nullptr, 3, nullptr, 2, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "not NULL"));
  EXPECT_EQ(ncclCommGrow(nullptr, 3, &token, -1, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "must pass its rank"));
  EXPECT_EQ(ncclCommGrow(nullptr, 3, &token, 3, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "out of range"));
  EXPECT_EQ(ncclCommGrow(nullptr, 3, &token, 1, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "taken by the existing"));
  EXPECT_EQ(ncclCommGrow(nullptr, 2, &token, 1, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "must be larger"));
  EXPECT_EQ(ncclCommGrow(nullptr, 0, &token, 0, &out, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommGrow(nullptr, 3, &plain, 2, &out, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "not made by ncclCommGetUniqueId"));
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.maxP2pPeers = 0;
  EXPECT_EQ(ncclCommGrow(nullptr, 3, &token, 2, &out, &bad), ncclInvalidArgument);
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "maxP2pPeers"));
  EXPECT_EQ(out, nullptr);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(single), ncclSuccess);
}

// The existing ranks must agree: none with the token is a usage error on every rank,
// and so is a different nRanks; the old communicator stays usable.
TEST(Grow, ExistingRanksMustAgree) {
  run(Launch::kThreads, 3, [](ncclComm_t& comm, int rank, int n) {
    ncclComm_t out = reinterpret_cast<ncclComm_t>(uintptr_t(1));
    EXPECT_EQ(ncclCommGrow(comm, n + 1, nullptr, -1, &out, nullptr), ncclInvalidUsage);
    EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "passed the unique id"));
    EXPECT_EQ(out, nullptr);
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (rank == 0) MR_NCCL_OK(ncclCommGetUniqueId(comm, &id));
    EXPECT_EQ(ncclCommGrow(comm, rank == 1 ? n + 2 : n + 1, rank == 0 ? &id : nullptr, -1, &out,
                           nullptr),
              ncclInvalidUsage);
    EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "same nRanks"));
    checkComm(comm, n, rank, 7);
  });
}

}  // namespace
}  // namespace mr
