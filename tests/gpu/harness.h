// The GPU suite's process harness: whether a CUDA device is usable, and worker
// processes (this test binary re-executed with --braid-gpu-worker) that play ranks.
//
// Workers are started with fork + exec, so the parent may have touched CUDA (the device
// probe) and started threads (ncclGetUniqueId's bootstrap root): the child runs nothing
// but async-signal-safe calls before exec. Each worker gets the communicator's unique id
// through a pipe (--idfd), may report progress bytes through another (--statusfd), and
// writes its stdout/stderr to a log file the parent shows when something fails. Every
// wait has a deadline; workers still running then are killed.
#ifndef BRAID_TESTS_GPU_HARNESS_H_
#define BRAID_TESTS_GPU_HARNESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "nccl.h"

namespace braid_gpu {

/// "" when the CUDA runtime sees at least one device, else why not (cudaGetErrorString
/// of cudaGetDeviceCount's error, or "no device"). Cached.
std::string noDeviceReason();

/// Skips the calling test unless a CUDA device is usable.
#define BRAID_GPU_REQUIRE_DEVICE()                                  \
  do {                                                              \
    const std::string braidGpuWhy_ = ::braid_gpu::noDeviceReason(); \
    if (!braidGpuWhy_.empty()) {                                    \
      GTEST_SKIP() << "no CUDA device: " << braidGpuWhy_;           \
    }                                                               \
  } while (0)

/// The first argument that turns this binary into a worker.
constexpr const char* kWorkerFlag = "--braid-gpu-worker";

/// A set of worker processes, killed (SIGKILL) and reaped by the destructor if still
/// running.
class WorkerSet {
 public:
  WorkerSet() = default;
  ~WorkerSet();
  WorkerSet(const WorkerSet&) = delete;
  WorkerSet& operator=(const WorkerSet&) = delete;

  /// Starts one worker per argument list (after kWorkerFlag). Each also gets
  /// "--idfd N --statusfd M"; the id (when given) is written into its pipe.
  /// False with *error on failure (workers already started keep running).
  bool start(const std::vector<std::vector<std::string>>& args, const ncclUniqueId* id,
             std::string* error);
  /// Waits up to timeoutMs for worker i to write one status byte. False on timeout or EOF.
  bool waitStatus(size_t i, int timeoutMs);
  /// True while worker i has not ended (reaps it when it has).
  bool running(size_t i);
  /// Sends `sig` to worker i (marked as expected to die by that signal).
  void kill(size_t i, int sig);
  /// Waits for worker i to end (up to timeoutMs; then SIGKILL). True when it exited 0.
  bool wait(size_t i, int timeoutMs, std::string* report);
  /// Waits for every worker (a shared deadline of timeoutMs). True when each exited 0
  /// or died of the signal kill() sent it. *report: statuses and failed workers' logs.
  bool waitAll(int timeoutMs, std::string* report);
  /// The log (stdout + stderr) worker i wrote so far.
  std::string log(size_t i) const;
  size_t size() const { return workers_.size(); }

 private:
  struct Worker {
    pid_t pid = -1;
    int statusFd = -1;
    std::string logPath;
    int expectSignal = 0;
    bool done = false;
    int status = 0;
  };
  /// One line about worker i's end ("" when it ended as expected).
  std::string describe(size_t i) const;
  bool reap(size_t i, bool block);
  std::vector<Worker> workers_;
};

/// Runs one worker per argument list with a fresh unique id and waits (timeoutMs).
/// True when all exited 0; *report says what went wrong otherwise.
bool runWorkers(const std::vector<std::vector<std::string>>& args, int timeoutMs,
                std::string* report);

/// Argument list helper: {"--mode", mode} followed by "--key value" pairs.
std::vector<std::string> workerArgs(const std::string& mode,
                                    const std::vector<std::pair<std::string, std::string>>& kv);

}  // namespace braid_gpu

#endif  // BRAID_TESTS_GPU_HARNESS_H_
