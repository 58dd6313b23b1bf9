// Waiting in the kernel (src/exec/wake.h, BRAID_SLEEP): a rank that waits long enough
// sleeps on its wake word and every publication it waits for wakes it.
//
// Missed wakes: the tests run with BRAID_SPIN_US=0 and BRAID_SLEEP=2 (sleep at once:
// every wait sleeps, so every path that should ring is exercised) and a peer check
// interval of ten minutes, which is also the longest sleep; a wake that some path forgot
// to ring leaves a rank asleep for that long, and the harness's watchdog fails the run.
// Sleeping, not napping, with the default policy (BRAID_SLEEP=1: yields, 16 naps, then
// sleep): a rank that waits 100 ms for a late peer counts its thread's voluntary context
// switches; naps of 20 us all along would make about a thousand, the default under 200.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

/// The calling thread's voluntary context switches so far (-1: unknown).
long voluntarySwitches() {
  std::ifstream f("/proc/thread-self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
  return -1;
}

std::vector<std::pair<std::string, std::string>> sleepEnv(const char* transport,
                                                          const char* mode = "2") {
  // No single copy on the board (inline stays): messages above the inline size run as
  // FIFO plans, whose head, tail and close rings are what most paths need.
  return {{"BRAID_SPIN_US", "0"},
          {"BRAID_BOARD_COPY_MAX_BYTES", "0"},
          {"BRAID_SLEEP", mode},
          {"BRAID_PEER_CHECK_MS", "600000"},
          {"BRAID_TIMEOUT_MS", "0"},
          {"BRAID_TRANSPORT", transport}};
}

float expectedSum(int n, size_t i) { return float(n * (n + 1) / 2) + float(n) * float(i % 5); }

/// One round of every kind of wait: board inline, FIFO plans with their board check
/// phase (shm or local; single copy is off), a rooted collective and a ring of sends and
/// receives. Rank `late` arrives
/// after a pause now and then, so the others are asleep when it publishes.
void mixedRound(ncclComm_t comm, int rank, int n, int round, int late) {
  static const size_t kCounts[] = {2, 4096, 96 * 1024};
  const size_t count = kCounts[size_t(round) % 3];
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = float(rank + 1) + float(i % 5);
  if (rank == late && round % 7 == 0) usleep(2000);
  MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(out[i], expectedSum(n, i)) << "round " << round << " count " << count;
  const int root = round % n;
  std::vector<int> b(257, rank == root ? round : -1);
  if (rank == (late + 1) % n && round % 5 == 0) usleep(1000);
  MR_NCCL_OK(ncclBroadcast(b.data(), b.data(), b.size(), ncclInt32, root, comm, nullptr));
  ASSERT_EQ(b[256], round);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<char> s(70000, char(rank)), r(70000, -1);
  MR_NCCL_OK(ncclGroupStart());
  MR_NCCL_OK(ncclSend(s.data(), s.size(), ncclInt8, next, comm, nullptr));
  MR_NCCL_OK(ncclRecv(r.data(), r.size(), ncclInt8, prev, comm, nullptr));
  MR_NCCL_OK(ncclGroupEnd());
  ASSERT_EQ(r[69999], char(prev));
}

class Sleep : public ::testing::TestWithParam<Launch> {};

TEST_P(Sleep, NoWakeIsMissed) {
  const Launch how = GetParam();
  ScopedEnv env(sleepEnv("auto"));
  RunOptions opts;
  opts.watchdogSeconds = 90;  // a missed wake sleeps for ten minutes
  run(how, 4, [&](ncclComm_t& comm, int rank, int n) {
    for (int round = 0; round < 120; ++round) {
      mixedRound(comm, rank, n, round, round % n);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }, opts);
}

// With small FIFOs every large message fills them: senders sleep until the receiver
// frees slots (head), receivers until the sender fills one (tail).
TEST_P(Sleep, FullFifosWakeTheSender) {
  ScopedEnv fifo(smallFifoEnv("auto"));
  ScopedEnv env(sleepEnv("auto"));
  RunOptions opts;
  opts.watchdogSeconds = 90;
  run(GetParam(), 3, [&](ncclComm_t& comm, int rank, int n) {
    for (int round = 0; round < 20; ++round) {
      const size_t count = 200000;
      std::vector<float> in(count), out(count, -1.0f);
      for (size_t i = 0; i < count; ++i) in[i] = float(rank + 1) + float(i % 5);
      if (rank == round % n) usleep(3000);
      MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      for (size_t i = 0; i < count; i += 997) ASSERT_EQ(out[i], expectedSum(n, i));
      // Sends of many slots: the sender sleeps on a full FIFO until the receiver frees one.
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      std::vector<char> s(100000, char(rank + round)), r(100000, -1);
      if (rank == (round + 1) % n) usleep(2000);
      MR_NCCL_OK(ncclGroupStart());
      MR_NCCL_OK(ncclSend(s.data(), s.size(), ncclInt8, next, comm, nullptr));
      MR_NCCL_OK(ncclRecv(r.data(), r.size(), ncclInt8, prev, comm, nullptr));
      MR_NCCL_OK(ncclGroupEnd());
      ASSERT_EQ(r[99999], char(prev + round));
    }
  }, opts);
}

TEST_P(Sleep, LateRankFindsTheOthersAsleep) {
  ScopedEnv env(sleepEnv("auto", "1"));
  run(GetParam(), 2, [&](ncclComm_t& comm, int rank, int n) {
    for (const size_t count : {size_t(1), size_t(200000)}) {  // board inline, FIFO plan
      std::vector<float> in(count, float(rank + 1)), out(count, 0.0f);
      MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      if (rank == 1) usleep(100000);
      const long before = voluntarySwitches();
      MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      const long switches = voluntarySwitches() - before;
      EXPECT_EQ(out[count - 1], float(n * (n + 1) / 2));
      if (rank == 0 && before >= 0) {
        EXPECT_LT(switches, 200) << "rank 0 waited 100 ms for rank 1 (" << count
                                 << " floats) and switched " << switches
                                 << " times: it napped instead of sleeping";
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Launches, Sleep, ::testing::Values(Launch::kThreads, Launch::kProcesses),
                         [](const ::testing::TestParamInfo<Launch>& info) {
                           return std::string(launchName(info.param));
                         });

// One thread, one group, two communicators: the waiter sleeps on both wake words
// (futex_waitv) and a publication on either wakes it.
TEST(SleepMany, GroupOverTwoCommsThreads) {
  ScopedEnv env(sleepEnv("auto"));
  RunOptions opts;
  opts.watchdogSeconds = 90;
  run(Launch::kThreads, 2, [&](ncclComm_t& comm, int rank, int n) {
    ncclComm_t other = nullptr;
    MR_NCCL_OK(ncclCommSplit(comm, 0, rank, &other, nullptr));
    for (int round = 0; round < 40; ++round) {
      const size_t count = round % 2 ? 3 : 100000;
      std::vector<float> a(count, float(rank + 1)), b(count, float(10 * (rank + 1))), x(count),
          y(count);
      if (rank == round % n) usleep(2000);
      MR_NCCL_OK(ncclGroupStart());
      MR_NCCL_OK(ncclAllReduce(a.data(), x.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      MR_NCCL_OK(ncclAllReduce(b.data(), y.data(), count, ncclFloat32, ncclSum, other, nullptr));
      MR_NCCL_OK(ncclGroupEnd());
      ASSERT_EQ(x[count - 1], 3.0f);
      ASSERT_EQ(y[count - 1], 30.0f);
    }
    EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
  }, opts);
}

// A rank asleep in a collective whose peer never comes: ncclCommAbort from another
// thread wakes it (the peer check would only come after ten minutes).
TEST(SleepAbort, AbortWakesTheSleeperThreads) {
  ScopedEnv env(sleepEnv("auto"));
  RunOptions opts;
  opts.watchdogSeconds = 60;
  run(Launch::kThreads, 2, [&](ncclComm_t& comm, int rank, int n) {
    float x = 1, y = 0;
    MR_NCCL_OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr));
    ASSERT_EQ(y, float(n));
    if (rank == 1) {  // never joins the next one, and stays until rank 0 is done
      usleep(3000000);
      return;
    }
    std::thread aborter([comm] {
      usleep(200000);
      ncclCommAbort(comm);
    });
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr);
    const double took = secondsSince(t0);
    aborter.join();
    comm = nullptr;
    EXPECT_NE(r, ncclSuccess);
    EXPECT_LT(took, 2.5) << "the abort did not wake the sleeping rank";
  }, opts);
}

}  // namespace
}  // namespace mr
