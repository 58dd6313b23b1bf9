// Multi-rank test harness: runs one body on N ranks through the public NCCL API only.
//
//   Launch::kInitAll      threads of this process, comms from ncclCommInitAll
//   Launch::kThreads      threads of this process, each calling ncclCommInitRank with
//                         one shared ncclGetUniqueId
//   Launch::kProcesses    forked processes: the parent (the gtest main thread) calls
//                         ncclGetUniqueId, forks N children; each child calls
//                         ncclCommInitRank, runs the body and reports its gtest failures
//                         through a pipe and its exit status
//
// Every launch has a hang watchdog: a run that does not finish in time fails the test
// with a message naming the ranks still running (threads cannot be cancelled, so a
// hung thread run aborts the test process after printing that message).
//
// Environment: ScopedEnv sets variables for a scope and restores them; the library
// reads them at communicator init, so set them before launching.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "nccl.h"

namespace mr {

/// Success when `text` (an ncclGetLastError message) contains `what`; else a failure that
/// quotes both.
inline ::testing::AssertionResult mentions(const char* text, const std::string& what) {
  if (text != nullptr && std::string(text).find(what) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "last error \"" << (text ? text : "(null)")
                                       << "\" does not mention \"" << what << "\"";
}

/// Sets environment variables for its lifetime (nullptr value: unset), then restores.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars);
  ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::string& name, const char* value);
  struct Saved {
    std::string name;
    bool had;
    std::string value;
  };
  std::vector<Saved> saved_;
};

enum class Launch { kInitAll, kThreads, kProcesses };
const char* launchName(Launch l);

/// The body every rank runs; comm is the rank's communicator (destroyed afterwards by
/// the harness unless the body sets it to nullptr, e.g. after ncclCommAbort).
using RankBody = std::function<void(ncclComm_t& comm, int rank, int nranks)>;

struct RunOptions {
  int watchdogSeconds = 120;
  /// Processes: also fail the test (instead of only reporting) when a child dies from
  /// a signal. Fault tests that kill a rank on purpose turn this off.
  bool failOnSignal = true;
  /// Create the communicators (false: body gets comm == nullptr and a shared id through
  /// sharedId(), and creates its own).
  bool createComm = true;
};

/// What one process rank did (Launch::kProcesses).
struct RankOutcome {
  bool exited = false;  ///< exited normally (else: killed by `signal`)
  int exitCode = -1;
  int signal = 0;
  std::string messages;  ///< gtest failure text the child reported
};

/// Runs body on nranks ranks. Failures inside the body (EXPECT/ASSERT) fail the test.
/// For processes, returns each rank's outcome (empty for thread launches).
std::vector<RankOutcome> run(Launch how, int nranks, const RankBody& body,
                             const RunOptions& opts = RunOptions());

/// The unique id of the current run (valid inside a body of a kThreads/kProcesses run).
const ncclUniqueId& sharedId();

/// Runs `fn` on n threads (index 0..n-1) with a hang watchdog; no communicators.
void runThreads(int n, const std::function<void(int)>& fn, int watchdogSeconds = 120);

/// Seconds since `t0`.
inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Environment for small FIFOs: NCCL_BUFFSIZE=4096, BRAID_FIFO_SLOTS=4 (1 KiB slots),
/// and the given transport ("auto" leaves the choice to the library).
std::vector<std::pair<std::string, std::string>> smallFifoEnv(const std::string& transport);
constexpr size_t kSmallSlotBytes = 1024;
constexpr size_t kSmallFifoBytes = 4096;

}  // namespace mr

/// Asserts an NCCL call succeeded, printing the code and ncclGetLastError text.
#define MR_NCCL_OK(call)                                                                   \
  do {                                                                                     \
    ncclResult_t mr_r_ = (call);                                                           \
    ASSERT_EQ(mr_r_, ncclSuccess) << #call << ": " << ncclGetErrorString(mr_r_) << " - "   \
                                  << ncclGetLastError(nullptr);                            \
  } while (0)
