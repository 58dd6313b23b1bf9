// Helpers for the bootstrap tests: ranks as threads, environment overrides, fd counts.
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/root.h"
#include "src/config/error.h"
#include "src/net/socket.h"

namespace braid {
namespace testing_bs {

/// Sets an environment variable for the scope of the object (restores the old value).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    hadOld_ = old != nullptr;
    if (old) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (hadOld_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool hadOld_ = false;
};

/// Result of one rank run as a thread.
struct RankResult {
  ncclResult_t res = ncclSuccess;
  std::string error;  // lastError() of that thread when res != ncclSuccess
};

/// Runs fn(rank) on nranks threads; returns each rank's result and error text.
inline std::vector<RankResult> runThreads(int nranks,
                                          const std::function<ncclResult_t(int)>& fn) {
  std::vector<RankResult> out(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      ncclResult_t res = fn(r);
      out[size_t(r)].res = res;
      if (res != ncclSuccess) out[size_t(r)].error = lastError(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

inline int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

/// Open file descriptors of this process.
inline int countFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

/// Waits until at most `expected` root threads run (true) or timeoutMs passes (false).
inline bool waitRootsAtMost(int expected, int timeoutMs) {
  int64_t end = nowMs() + timeoutMs;
  while (bootstrapRootsRunning() > expected) {
    if (nowMs() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// True once nothing listens at `addr` any more (the root there exited), within timeoutMs.
inline bool rootGone(const char* addr, int timeoutMs) {
  SockAddr a;
  if (!SockAddr::parse(addr, &a)) return false;
  int64_t end = nowMs() + timeoutMs;
  for (;;) {
    int fd = ::socket(a.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&a.ss), a.len);
    int err = rc == 0 ? 0 : errno;
    ::close(fd);
    if (err == ECONNREFUSED) return true;
    if (nowMs() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Fill pattern of a message from `from` to `to` with `tag`.
inline std::vector<char> pattern(int from, int to, uint32_t tag, size_t bytes) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = char((from * 131 + to * 31 + int(tag) * 7 + int(i)) & 0xff);
  return v;
}

/// A port that was free a moment ago on 127.0.0.1.
int freeLoopbackPort();

/// The body of one rank of a full exercise (allGather, barrier, shuffled tagged
/// messages); returns the first failure. Used by threads and by child processes.
ncclResult_t exerciseRank(Bootstrap* b, unsigned seed);

}  // namespace testing_bs
}  // namespace braid
