// The free collective mismatch check (BRAID_CHECK unset: docs/reliability.md): one rank
// calls another count, datatype, op, broadcast root or collective than the others.
//
// On one host (the flag board, also where NCCL_ALGO / BRAID_TRANSPORT send the data
// another way): every rank fails with ncclInvalidUsage within a second, the same message
// names the ranks on each side and both calls, nothing moved and the communicator works
// afterwards. Inline, single-copy and plan sizes, mixed paths (the odd rank's size takes
// another path), 2, 3, 4 and 8 ranks, threads and processes.
//
// Without a board (ranks on different hosts: NCCL_HOSTID per process over sockets;
// BRAID_BOARD=0 over shared memory or in one process): the tags travel with the data.
// Collectives whose every rank receives (all-reduce, all-gather, the odd collective)
// fail on every rank within a second, the detecting ranks naming both calls; a
// mismatched broadcast root is found at the latest by the next call. BRAID_CHECK=0
// turns the check off (and the mismatched count then goes unnoticed).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kWithin = 5.0;  // sanitizers slow every step, not the detection
#else
constexpr double kWithin = 1.0;
#endif

enum class Kind { kCount, kType, kOp, kRoot, kColl };
const Kind kAllKinds[] = {Kind::kCount, Kind::kType, Kind::kOp, Kind::kRoot, Kind::kColl};

const char* kindName(Kind k) {
  switch (k) {
    case Kind::kCount: return "count";
    case Kind::kType: return "datatype";
    case Kind::kOp: return "op";
    case Kind::kRoot: return "root";
    default: return "collective";
  }
}

/// Element counts that take each board path: inline (one phase), single copy, plan
/// (above the copy limit of threads, 4 MiB, and of processes, 1 MiB).
const size_t kInline = 8, kCopy = 64 << 10, kPlan = (5 << 20) / 4;

/// The call every rank but the odd one makes, and the odd one's, as text (the library's
/// own words, which the messages must contain).
std::string callText(Kind k, bool odd, size_t count, int nranks) {
  const std::string n = std::to_string(count);
  switch (k) {
    case Kind::kCount:
      return "ncclAllReduce(count " + (odd ? std::to_string(count / 2) : n) + ", float, sum)";
    case Kind::kType:
      return "ncclAllReduce(count " + n + (odd ? ", int32, sum)" : ", float, sum)");
    case Kind::kOp: return "ncclAllReduce(count " + n + (odd ? ", float, max)" : ", float, sum)");
    case Kind::kRoot:
      return "ncclBroadcast(count " + n + ", float, root " + (odd ? "1)" : "0)");
    default:
      return odd ? "ncclAllGather(count " + std::to_string(count / size_t(nranks)) + ", float)"
                 : "ncclAllReduce(count " + n + ", float, sum)";
  }
}

/// Makes this rank's call of case k: the odd rank's version where `odd`.
ncclResult_t call(Kind k, bool odd, size_t count, std::vector<float>& buf, ncclComm_t comm) {
  float* b = buf.data();
  switch (k) {
    case Kind::kCount:
      return ncclAllReduce(b, b, odd ? count / 2 : count, ncclFloat, ncclSum, comm, nullptr);
    case Kind::kType:
      return ncclAllReduce(b, b, count, odd ? ncclInt32 : ncclFloat, ncclSum, comm, nullptr);
    case Kind::kOp:
      return ncclAllReduce(b, b, count, ncclFloat, odd ? ncclMax : ncclSum, comm, nullptr);
    case Kind::kRoot:
      return ncclBroadcast(b, b, count, ncclFloat, odd ? 1 : 0, comm, nullptr);
    default: {
      if (!odd) return ncclAllReduce(b, b, count, ncclFloat, ncclSum, comm, nullptr);
      int n = 0;
      ncclCommCount(comm, &n);
      const size_t part = count / size_t(n);
      // In place: this rank's part sits at its own offset of the result.
      int rank = 0;
      ncclCommUserRank(comm, &rank);
      return ncclAllGather(b + part * size_t(rank), b, part, ncclFloat, comm, nullptr);
    }
  }
}

/// A correct all-reduce of `count` floats on comm, data checked.
void expectWorks(ncclComm_t comm, int rank, int nranks, size_t count) {
  std::vector<float> v(count, float(rank + 1));
  MR_NCCL_OK(ncclAllReduce(v.data(), v.data(), count, ncclFloat, ncclSum, comm, nullptr));
  const float want = float(nranks * (nranks + 1) / 2);
  EXPECT_EQ(v.front(), want);
  EXPECT_EQ(v.back(), want);
}

/// On one host: every kind at every size fails every rank alike, and the comm goes on.
void boardCases(Launch how, int nranks, int odd,
                std::vector<std::pair<std::string, std::string>> env = {}) {
  env.push_back({"BRAID_TIMEOUT_MS", "20000"});
  ScopedEnv scoped(env);
  RunOptions opts;
  opts.watchdogSeconds = 240;
  run(how, nranks, [&](ncclComm_t& comm, int rank, int n) {
    std::vector<float> buf(kPlan, 1.0f);
    expectWorks(comm, rank, n, 1024);
    for (size_t count : {kInline, kCopy, kPlan}) {
      for (Kind k : kAllKinds) {
        SCOPED_TRACE(std::string(kindName(k)) + " mismatch, count " + std::to_string(count));
        const bool isOdd = rank == odd;
        const auto t0 = std::chrono::steady_clock::now();
        const ncclResult_t r = call(k, isOdd, count, buf, comm);
        const double s = secondsSince(t0);
        EXPECT_EQ(r, ncclInvalidUsage) << ncclGetErrorString(r);
        EXPECT_LT(s, kWithin);
        const std::string text = ncclGetLastError(comm);
        EXPECT_TRUE(mentions(text.c_str(), "collective mismatch"));
        EXPECT_TRUE(mentions(text.c_str(), callText(k, false, count, n)));
        EXPECT_TRUE(mentions(text.c_str(), callText(k, true, count, n)));
        EXPECT_TRUE(mentions(text.c_str(), (odd == 0 ? "but rank 0 called"
                                                     : "but rank " + std::to_string(odd) +
                                                           " called")));
        // Nothing moved: the communicator is fine and the next collective is right.
        ncclResult_t async = ncclInternalError;
        MR_NCCL_OK(ncclCommGetAsyncError(comm, &async));
        EXPECT_EQ(async, ncclSuccess);
        expectWorks(comm, rank, n, count);
      }
    }
  }, opts);
}

TEST(Mismatch, BoardThreads2) { boardCases(Launch::kThreads, 2, 1); }
TEST(Mismatch, BoardThreads3OddRankZero) { boardCases(Launch::kThreads, 3, 0); }
TEST(Mismatch, BoardThreads8) { boardCases(Launch::kThreads, 8, 5); }
TEST(Mismatch, BoardInitAll4) { boardCases(Launch::kInitAll, 4, 2); }
TEST(Mismatch, BoardProcesses2) { boardCases(Launch::kProcesses, 2, 1); }
TEST(Mismatch, BoardProcesses4) { boardCases(Launch::kProcesses, 4, 2); }
// The data goes through the net transport (or a forced algorithm); the board only compares.
TEST(Mismatch, SocketsOneHostProcesses3) {
  boardCases(Launch::kProcesses, 3, 2, {{"BRAID_TRANSPORT", "socket"}});
}
TEST(Mismatch, ForcedRingThreads4) {
  boardCases(Launch::kThreads, 4, 3, {{"NCCL_ALGO", "Ring"}});
}

ncclComm_t splitOff(ncclComm_t parent, int rank);

/// Checks that v (sampled, and its last element) holds the sum over the ranks of
/// scale * (rank + 1).
void expectSum(const std::vector<float>& v, int nranks, float scale) {
  const float want = scale * float(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < v.size(); i += v.size() / 7 + 1) ASSERT_EQ(v[i], want) << "element " << i;
  ASSERT_EQ(v.back(), want);
}

/// Ranks may group the same calls differently (as in NCCL): plan-sized all-reduces in
/// one group on rank 0, one call at a time on the others; then across two comms (rank
/// 0 groups a call on each, the others call them in turn). The checks are per call, so
/// nothing is refused and nothing waits.
void groupedDifferently(Launch how, int nranks) {
  ScopedEnv scoped({{"BRAID_TIMEOUT_MS", "20000"}});
  RunOptions opts;
  opts.watchdogSeconds = 240;
  run(how, nranks, [&](ncclComm_t& comm, int rank, int n) {
    ncclComm_t other = splitOff(comm, rank);
    ASSERT_NE(other, nullptr);
    std::vector<float> a(kPlan), b(kPlan), c(kInline);
    auto ar = [](std::vector<float>& v, ncclComm_t on) {
      return ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat, ncclSum, on, nullptr);
    };
    auto fill = [rank](std::vector<float>& v, int scale) {
      std::fill(v.begin(), v.end(), float(scale * (rank + 1)));
    };
    // Rank 0 makes these all-reduces in one group, the others one call at a time.
    using Call = std::pair<std::vector<float>*, ncclComm_t>;
    auto groupedOnRankZero = [&](std::initializer_list<Call> calls) {
      if (rank == 0) MR_NCCL_OK(ncclGroupStart());
      for (const Call& k : calls) MR_NCCL_OK(ar(*k.first, k.second));
      if (rank == 0) MR_NCCL_OK(ncclGroupEnd());
    };
    for (int round = 0; round < 3; ++round) {  // round 0 also makes the connections
      SCOPED_TRACE("round " + std::to_string(round));
      fill(a, 1);
      fill(b, 2);
      fill(c, 3);
      groupedOnRankZero({{&a, comm}, {&c, comm}, {&b, comm}});
      expectSum(a, n, 1);
      expectSum(b, n, 2);
      expectSum(c, n, 3);
      if (round == 0) {  // the second comm's connections, made alike by every rank
        MR_NCCL_OK(ar(b, other));
        continue;
      }
      fill(a, 1);
      fill(b, 2);
      groupedOnRankZero({{&a, comm}, {&b, other}});
      expectSum(a, n, 1);
      expectSum(b, n, 2);
    }
    // A mismatch inside a group is found at its call: the calls before it ran.
    fill(a, 1);
    MR_NCCL_OK(ncclGroupStart());
    MR_NCCL_OK(ar(a, comm));
    MR_NCCL_OK(ncclAllReduce(b.data(), b.data(), rank == n - 1 ? kPlan / 2 : kPlan, ncclFloat,
                             ncclSum, comm, nullptr));
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT_TRUE(mentions(ncclGetLastError(comm), "collective mismatch"));
    EXPECT_TRUE(mentions(ncclGetLastError(comm), "ncclAllReduce(count " + std::to_string(kPlan / 2)));
    expectSum(a, n, 1);
    expectWorks(comm, rank, n, kPlan);
    EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
  }, opts);
}

TEST(Mismatch, GroupedDifferentlyRunsThreads3) { groupedDifferently(Launch::kThreads, 3); }
TEST(Mismatch, GroupedDifferentlyRunsProcesses2) { groupedDifferently(Launch::kProcesses, 2); }

// A group {send to 1, all-reduce} on rank 0 against {all-reduce, receive from 0} on rank
// 1: Braid runs a group's calls in call order, so rank 1's all-reduce meets the send's
// data. Refused on both ranks (the receiver names the send), never run with wrong data
// and never left waiting (docs/reliability.md: put the calls in the same order).
TEST(Mismatch, SendBeforeCollectiveAgainstCollectiveFirst) {
  ScopedEnv env({{"BRAID_TIMEOUT_MS", "20000"}});
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int rank, int) {
    std::vector<float> a(kPlan, float(rank + 1)), m(1000, 7.0f);
    const auto t0 = std::chrono::steady_clock::now();
    MR_NCCL_OK(ncclGroupStart());
    if (rank == 0) {
      MR_NCCL_OK(ncclSend(m.data(), m.size(), ncclFloat, 1, comm, nullptr));
      MR_NCCL_OK(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat, ncclSum, comm, nullptr));
    } else {
      MR_NCCL_OK(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat, ncclSum, comm, nullptr));
      MR_NCCL_OK(ncclRecv(m.data(), m.size(), ncclFloat, 0, comm, nullptr));
    }
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT_LT(secondsSince(t0), kWithin);
    EXPECT_TRUE(mentions(ncclGetLastError(comm),
                         rank == 1 ? "rank 0 sent data of ncclSend/ncclRecv of 4000 bytes but "
                                     "this rank called collective #0 ncclAllReduce"
                                   : "that rank found a collective mismatch"));
  });
}

enum class NoBoard { kHosts, kShm, kLocal };

/// Runs body on ranks that share no board: every process its own NCCL_HOSTID (sockets
/// between them), or BRAID_BOARD=0 (shared-memory FIFOs, or FIFOs in one process).
void runNoBoard(NoBoard where, int nranks, const RankBody& body) {
  std::vector<std::pair<std::string, std::string>> env = {{"BRAID_TIMEOUT_MS", "20000"}};
  if (where != NoBoard::kHosts) env.push_back({"BRAID_BOARD", "0"});
  ScopedEnv scoped(env);
  RunOptions opts;
  opts.watchdogSeconds = 240;
  if (where == NoBoard::kLocal) return (void)run(Launch::kThreads, nranks, body, opts);
  if (where == NoBoard::kShm) return (void)run(Launch::kProcesses, nranks, body, opts);
  opts.createComm = false;
  run(Launch::kProcesses, nranks,
      [&](ncclComm_t& comm, int rank, int n) {
        const std::string host = "mismatch-node-" + std::to_string(rank);
        setenv("NCCL_HOSTID", host.c_str(), 1);  // this child only
        MR_NCCL_OK(ncclCommInitRank(&comm, n, sharedId(), rank));
        body(comm, rank, n);
      },
      opts);
}

/// A fresh communicator for one case (a failed one is aborted afterwards).
ncclComm_t splitOff(ncclComm_t parent, int rank) {
  ncclComm_t c = nullptr;
  EXPECT_EQ(ncclCommSplit(parent, 0, rank, &c, nullptr), ncclSuccess) << ncclGetLastError(parent);
  return c;
}

/// Counters every rank (thread or forked process) can add to: shared anonymous memory.
class SharedCounters {
 public:
  explicit SharedCounters(size_t n) : n_(n) {
    void* p = mmap(nullptr, n * sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    c_ = p == MAP_FAILED ? nullptr : new (p) std::atomic<int>[n]();
  }
  ~SharedCounters() {
    if (c_) munmap(c_, n_ * sizeof(std::atomic<int>));
  }
  std::atomic<int>& operator[](size_t i) { return c_[i]; }
  bool ok() const { return c_ != nullptr; }

 private:
  size_t n_;
  std::atomic<int>* c_;
};

/// Without a board: kinds where every rank receives fail every rank at the call, and
/// some rank (a receiver of the odd rank's data) names both calls. Two ranks with a
/// small message: both do (each receives the other's first slot).
void fifoCases(NoBoard where, int nranks, int odd) {
  const Kind kinds[] = {Kind::kCount, Kind::kType, Kind::kOp, Kind::kColl};
  const size_t counts[] = {kInline, kPlan};
  SharedCounters named(8);  // per case: ranks whose message named both calls
  ASSERT_TRUE(named.ok());
  runNoBoard(where, nranks, [&](ncclComm_t& comm, int rank, int n) {
    std::vector<float> buf(kPlan, 1.0f);
    size_t index = 0;
    for (size_t count : counts) {
      for (Kind k : kinds) {
        SCOPED_TRACE(std::string(kindName(k)) + " mismatch, count " + std::to_string(count));
        ncclComm_t c = splitOff(comm, rank);
        ASSERT_NE(c, nullptr);
        expectWorks(c, rank, n, 256);  // connections made before the clock starts
        const auto t0 = std::chrono::steady_clock::now();
        const ncclResult_t r = call(k, rank == odd, count, buf, c);
        const double s = secondsSince(t0);
        EXPECT_NE(r, ncclSuccess);
        EXPECT_LT(s, kWithin);
        const std::string text = ncclGetLastError(c);
        const bool both = text.find(callText(k, false, count, n)) != std::string::npos &&
                          text.find(callText(k, true, count, n)) != std::string::npos;
        if (n == 2 && count == kInline) {
          EXPECT_EQ(r, ncclInvalidUsage);
          EXPECT_TRUE(both) << text;
          EXPECT_TRUE(mentions(text.c_str(), "collective mismatch: rank " +
                                                 std::to_string(1 - rank) + " sent data of"));
        }
        if (both) named[index].fetch_add(1);
        ++index;
        // The communicator failed (data had started to move): it says so from now on.
        ncclResult_t async = ncclSuccess;
        MR_NCCL_OK(ncclCommGetAsyncError(c, &async));
        EXPECT_NE(async, ncclSuccess);
        EXPECT_NE(ncclAllReduce(buf.data(), buf.data(), 4, ncclFloat, ncclSum, c, nullptr),
                  ncclSuccess);
        EXPECT_EQ(ncclCommAbort(c), ncclSuccess);
      }
    }
    expectWorks(comm, rank, n, 1024);  // the parent was never touched
  });
  for (size_t i = 0; i < 8; ++i)
    EXPECT_GE(named[i].load(), 1) << kindName(kinds[i % 4]) << " mismatch, count "
                                  << counts[i / 4] << ": no rank named both calls";
}

TEST(Mismatch, HostsProcesses2) { fifoCases(NoBoard::kHosts, 2, 1); }
TEST(Mismatch, HostsProcesses4) { fifoCases(NoBoard::kHosts, 4, 2); }
TEST(Mismatch, NoBoardShmProcesses3) { fifoCases(NoBoard::kShm, 3, 0); }
TEST(Mismatch, NoBoardLocalThreads5) { fifoCases(NoBoard::kLocal, 5, 3); }

/// A broadcast whose roots differ moves data that nobody receives at the call (each side
/// only sends): without a board it is found at the latest by the next call, which then
/// names the broadcast.
void rootCase(NoBoard where, int nranks) {
  runNoBoard(where, nranks, [&](ncclComm_t& comm, int rank, int n) {
    std::vector<float> buf(kInline, 1.0f);
    ncclComm_t c = splitOff(comm, rank);
    ASSERT_NE(c, nullptr);
    expectWorks(c, rank, n, 256);
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = call(Kind::kRoot, rank == n - 1, kInline, buf, c);
    std::string text = r == ncclSuccess ? "" : ncclGetLastError(c);
    if (r == ncclSuccess) {
      r = ncclAllReduce(buf.data(), buf.data(), kInline, ncclFloat, ncclSum, c, nullptr);
      if (r != ncclSuccess) text = ncclGetLastError(c);
    }
    EXPECT_NE(r, ncclSuccess) << "rank " << rank << " saw no error in two calls";
    EXPECT_LT(secondsSince(t0), kWithin);
    if (n == 2) {
      EXPECT_TRUE(mentions(text.c_str(), "ncclBroadcast(count 8, float, root ")) << text;
    }
    EXPECT_EQ(ncclCommAbort(c), ncclSuccess);
  });
}

TEST(Mismatch, RootFoundByTheNextCallHosts2) { rootCase(NoBoard::kHosts, 2); }
TEST(Mismatch, RootFoundByTheNextCallLocal2) { rootCase(NoBoard::kLocal, 2); }

// A receive of another size than the send: the receiver finds it on the first slot.
TEST(Mismatch, SendRecvSizes) {
  ScopedEnv env({{"BRAID_TIMEOUT_MS", "20000"}});
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int rank, int) {
    std::vector<float> buf(100, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    if (rank == 0) {
      // Done once its bytes are in the FIFO, or (a zero-copy entry, read from this
      // buffer) failed when the receiver found the mismatch instead of reading them.
      const ncclResult_t r = ncclSend(buf.data(), 100, ncclFloat, 1, comm, nullptr);
      if (r != ncclSuccess) {
        EXPECT_EQ(r, ncclInvalidUsage);
        EXPECT_TRUE(mentions(ncclGetLastError(comm), "rank 1 closed: that rank found a collective mismatch"));
      }
      EXPECT_LT(secondsSince(t0), kWithin);
      return;
    }
    EXPECT_EQ(ncclRecv(buf.data(), 50, ncclFloat, 0, comm, nullptr), ncclInvalidUsage);
    EXPECT_LT(secondsSince(t0), kWithin);
    EXPECT_TRUE(mentions(ncclGetLastError(comm),
                         "rank 0 sent data of ncclSend/ncclRecv of 400 bytes but this rank "
                         "called ncclSend/ncclRecv of 200 bytes"));
  });
}

// BRAID_CHECK=0: no tags, no check phases: the odd count goes unnoticed (as before the
// check existed), proving the tests above test the check.
TEST(Mismatch, CheckOffLetsItThrough) {
  ScopedEnv env({{"BRAID_CHECK", "0"}, {"BRAID_TIMEOUT_MS", "20000"}});
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int rank, int) {
    std::vector<float> buf(kInline, 1.0f);
    MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), rank == 1 ? 4 : kInline, ncclFloat, ncclSum,
                             comm, nullptr));
  });
}

}  // namespace
}  // namespace mr
