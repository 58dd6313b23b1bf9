// Fault tests over forked processes: a rank killed with SIGKILL in the middle of a loop
// of large all-reduces (the others must fail fast, naming a rank, not hang), and a rank
// that stays alive but never joins a collective (BRAID_TIMEOUT_MS).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

/// A flag in memory shared by the test process and the children it forks.
class SharedFlag {
 public:
  SharedFlag() {
    void* p = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    flag_ = p == MAP_FAILED ? nullptr : new (p) std::atomic<int>(0);
  }
  ~SharedFlag() {
    if (flag_) munmap(flag_, sizeof(std::atomic<int>));
  }
  bool ok() const { return flag_ != nullptr; }
  void set() { flag_->store(1); }
  /// Waits until set, at most `seconds`.
  void wait(double seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    while (flag_->load() == 0 && secondsSince(t0) < seconds)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

 private:
  std::atomic<int>* flag_ = nullptr;
};

bool namesARank(const std::string& text) {
  for (size_t p = text.find("rank "); p != std::string::npos; p = text.find("rank ", p + 1))
    if (p + 5 < text.size() && isdigit(static_cast<unsigned char>(text[p + 5]))) return true;
  return false;
}

constexpr int kVictim = 1;
constexpr int kKillAt = 3;

class KilledRank : public ::testing::TestWithParam<const char*> {};

TEST_P(KilledRank, SurvivorsFailFastNamingARank) {
  // "shm_cma": single-copy reads, so the victim may die while it is reading (pinning)
  // a survivor's buffer; the survivor must not wait for an unpin that never comes.
  // "board": the flag board's single copy (every rank reads the others' buffers).
  const std::string mode = GetParam();
  const bool cma = mode == "shm_cma";
  ScopedEnv env({{"BRAID_TRANSPORT", cma ? "shm" : mode == "board" ? "auto" : mode},
                 {"BRAID_BOARD_COPY_MAX_BYTES", "16777216"},
                 {"BRAID_BOARD_CMA_MAX_BYTES", "16777216"},
                 {"BRAID_SHM_CMA", cma ? "1" : "0"},
                 {"BRAID_CMA_MIN_BYTES", "4096"},
                 {"BRAID_TIMEOUT_MS", "20000"},
                 {"BRAID_PEER_CHECK_MS", "100"}});
  RunOptions opts;
  opts.watchdogSeconds = 60;
  opts.failOnSignal = false;
  auto outcomes = run(
      Launch::kProcesses, 3,
      [](ncclComm_t& comm, int rank, int) {
        const size_t count = 1 << 20;  // 4 MiB per rank: each all-reduce takes a while
        std::vector<float> in(count, 1.0f), out(count, 0.0f);
        for (int it = 0; it < 1000; ++it) {
          if (rank == kVictim && it == kKillAt) {
            // Die while this all-reduce is streaming.
            std::thread([] {
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              raise(SIGKILL);
            }).detach();
          }
          const auto t0 = std::chrono::steady_clock::now();
          ncclResult_t r =
              ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
          const double took = secondsSince(t0);
          if (r == ncclSuccess) {
            ASSERT_EQ(out[count - 1], 3.0f) << "iteration " << it;
            continue;
          }
          const std::string text = ncclGetLastError(comm);
          EXPECT_TRUE(r == ncclRemoteError || r == ncclSystemError)
              << "rank " << rank << ": " << ncclGetErrorString(r) << " - " << text;
          EXPECT_LT(took, 10.0) << "rank " << rank << " took " << took << " s to notice";
          // A survivor may still be finishing the iteration before: the victim completed
          // it once its last data was in its own FIFO, and dies before its proxy has
          // delivered all of it (completion is not delivery, as in NCCL).
          EXPECT_GE(it, kKillAt - 1) << "failed before the victim died: " << text;
          EXPECT_TRUE(namesARank(text)) << "error text names no rank: " << text;
          // The communicator is unusable now; ncclCommAbort is the way out.
          EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
          comm = nullptr;
          return;
        }
        ADD_FAILURE() << "rank " << rank << ": every all-reduce succeeded";
      },
      opts);
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_FALSE(outcomes[kVictim].exited);
  EXPECT_EQ(outcomes[kVictim].signal, SIGKILL);
  for (int r = 0; r < 3; ++r) {
    if (r == kVictim) continue;
    EXPECT_TRUE(outcomes[size_t(r)].exited && outcomes[size_t(r)].exitCode == 0)
        << "survivor rank " << r << ":\n" << outcomes[size_t(r)].messages;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, KilledRank, ::testing::Values("shm", "shm_cma", "socket", "board"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

/// Rank 1 stays alive but never joins rank 0's all-reduce; rank 0 must fail with
/// ncclSystemError within ~5 s (BRAID_TIMEOUT_MS=2000), naming rank 1.
void neverJoins(ncclComm_t& comm, int rank, SharedFlag* done) {
  const size_t count = 10000;
  std::vector<int32_t> in(count, 1), out(count, 0);
  // Warm up: connections exist, so the wait is in the collective itself.
  MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr));
  if (rank == 1) {
    done->wait(30);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    comm = nullptr;
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr);
  const double took = secondsSince(t0);
  const std::string text = ncclGetLastError(comm);
  done->set();
  EXPECT_EQ(r, ncclSystemError) << ncclGetErrorString(r) << " - " << text;
  EXPECT_GE(took, 1.5) << "gave up before BRAID_TIMEOUT_MS";
  EXPECT_LT(took, 5.0);
  EXPECT_NE(text.find("rank 1"), std::string::npos) << "does not name rank 1: " << text;
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  comm = nullptr;
}

/// neverJoins on two ranks of `launch` over `transport`.
void neverJoinsOver(Launch launch, const char* transport) {
  SharedFlag done;
  ASSERT_TRUE(done.ok());
  ScopedEnv env({{"BRAID_TRANSPORT", transport}, {"BRAID_TIMEOUT_MS", "2000"}});
  RunOptions opts;
  opts.watchdogSeconds = 60;
  run(launch, 2, [&](ncclComm_t& comm, int rank, int) { neverJoins(comm, rank, &done); }, opts);
}

TEST(Timeout, RankNeverJoinsProcesses) { neverJoinsOver(Launch::kProcesses, "shm"); }

// The same on the flag board (inline phase and single copy).
TEST(Timeout, RankNeverJoinsBoardProcesses) { neverJoinsOver(Launch::kProcesses, "auto"); }

TEST(Timeout, RankNeverJoinsThreads) { neverJoinsOver(Launch::kThreads, "socket"); }

}  // namespace
}  // namespace mr
