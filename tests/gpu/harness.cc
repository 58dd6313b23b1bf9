// The GPU suite's process harness (see harness.h).
#include "tests/gpu/harness.h"

#include <cuda_runtime.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace braid_gpu {
namespace {

using Clock = std::chrono::steady_clock;

int msLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

std::string selfExe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

bool writeAll(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string noDeviceReason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return std::string(cudaGetErrorString(e));
    if (n <= 0) return std::string("cudaGetDeviceCount reports no device");
    return std::string();
  }();
  return reason;
}

std::vector<std::string> workerArgs(const std::string& mode,
                                    const std::vector<std::pair<std::string, std::string>>& kv) {
  std::vector<std::string> a{"--mode", mode};
  for (const auto& p : kv) {
    a.push_back("--" + p.first);
    a.push_back(p.second);
  }
  return a;
}

WorkerSet::~WorkerSet() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (!w.done && w.pid > 0) {
      ::kill(w.pid, SIGKILL);
      reap(i, true);
    }
    if (w.statusFd >= 0) close(w.statusFd);
    if (!w.logPath.empty()) unlink(w.logPath.c_str());
  }
}

bool WorkerSet::start(const std::vector<std::vector<std::string>>& args, const ncclUniqueId* id,
                      std::string* error) {
  const std::string exe = selfExe();
  if (exe.empty()) {
    *error = "cannot read /proc/self/exe";
    return false;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  for (const std::vector<std::string>& a : args) {
    int idPipe[2], statusPipe[2];
    if (pipe2(idPipe, O_CLOEXEC) != 0) {
      *error = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    if (pipe2(statusPipe, O_CLOEXEC) != 0) {
      *error = std::string("pipe: ") + std::strerror(errno);
      close(idPipe[0]);
      close(idPipe[1]);
      return false;
    }
    char logPath[] = "/tmp/braid-gpu-worker-XXXXXX";
    const int logFd = mkostemp(logPath, O_CLOEXEC);
    if (logFd < 0) {
      *error = std::string("mkstemp: ") + std::strerror(errno);
      for (int fd : {idPipe[0], idPipe[1], statusPipe[0], statusPipe[1]}) close(fd);
      return false;
    }
    // The child's ends become fds 3 (id) and 4 (status); everything is prepared here,
    // so the child only calls dup2/execv/_exit.
    std::vector<std::string> full{exe, kWorkerFlag};
    full.insert(full.end(), a.begin(), a.end());
    for (const char* s : {"--idfd", "3", "--statusfd", "4"}) full.emplace_back(s);
    std::vector<char*> argv;
    for (std::string& s : full) argv.push_back(&s[0]);
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      *error = std::string("fork: ") + std::strerror(errno);
      for (int fd : {idPipe[0], idPipe[1], statusPipe[0], statusPipe[1], logFd}) close(fd);
      unlink(logPath);
      return false;
    }
    if (pid == 0) {
      // dup2 clears close-on-exec on the new descriptors. Move the sources above 4 first
      // so no dup2 overwrites one not yet moved.
      const int a0 = fcntl(idPipe[0], F_DUPFD_CLOEXEC, 10);
      const int a1 = fcntl(statusPipe[1], F_DUPFD_CLOEXEC, 10);
      const int a2 = fcntl(logFd, F_DUPFD_CLOEXEC, 10);
      if (a0 < 0 || a1 < 0 || a2 < 0 || dup2(a0, 3) < 0 || dup2(a1, 4) < 0 || dup2(a2, 1) < 0 ||
          dup2(a2, 2) < 0) {
        _exit(126);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(idPipe[0]);
    close(statusPipe[1]);
    close(logFd);
    Worker w;
    w.pid = pid;
    w.statusFd = statusPipe[0];
    w.logPath = logPath;
    workers_.push_back(w);
    ncclUniqueId none;
    std::memset(&none, 0, sizeof(none));
    const bool sent = writeAll(idPipe[1], id != nullptr ? id : &none, sizeof(ncclUniqueId));
    close(idPipe[1]);
    if (!sent) {
      *error = "could not hand the unique id to worker " + std::to_string(workers_.size() - 1);
      return false;
    }
  }
  return true;
}

bool WorkerSet::waitStatus(size_t i, int timeoutMs) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    pollfd p{workers_[i].statusFd, POLLIN, 0};
    const int r = poll(&p, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    char c;
    const ssize_t n = read(workers_[i].statusFd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    return n == 1;
  }
}

bool WorkerSet::running(size_t i) { return !reap(i, false); }

void WorkerSet::kill(size_t i, int sig) {
  Worker& w = workers_[i];
  if (w.done || w.pid <= 0) return;
  w.expectSignal = sig;
  ::kill(w.pid, sig);
}

bool WorkerSet::reap(size_t i, bool block) {
  Worker& w = workers_[i];
  if (w.done) return true;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(w.pid, &status, block ? 0 : WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == w.pid) {
      w.done = true;
      w.status = status;
      return true;
    }
    if (r < 0) {  // not our child any more: count it as gone
      w.done = true;
      w.status = 255 << 8;
      return true;
    }
    return false;
  }
}

std::string WorkerSet::describe(size_t i) const {
  const Worker& w = workers_[i];
  std::ostringstream o;
  if (!w.done) {
    o << "worker " << i << " (pid " << w.pid << ") did not finish in time: killed";
  } else if (WIFEXITED(w.status)) {
    if (WEXITSTATUS(w.status) == 0 && w.expectSignal == 0) return "";
    o << "worker " << i << " exited with status " << WEXITSTATUS(w.status);
    if (w.expectSignal != 0) o << " (expected to die of signal " << w.expectSignal << ")";
  } else if (WIFSIGNALED(w.status)) {
    if (WTERMSIG(w.status) == w.expectSignal) return "";
    o << "worker " << i << " died of signal " << WTERMSIG(w.status) << " ("
      << strsignal(WTERMSIG(w.status)) << ")";
  } else {
    o << "worker " << i << " ended with wait status " << w.status;
  }
  return o.str();
}

std::string WorkerSet::log(size_t i) const {
  std::ifstream f(workers_[i].logPath);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  constexpr size_t kMax = 6000;
  if (s.size() > kMax) {
    s = "...[" + std::to_string(s.size() - kMax) + " bytes]..." + s.substr(s.size() - kMax);
  }
  return s;
}

bool WorkerSet::wait(size_t i, int timeoutMs, std::string* report) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  while (!reap(i, false) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string line = describe(i);
  if (!workers_[i].done) {
    ::kill(workers_[i].pid, SIGKILL);
    reap(i, true);
  }
  if (line.empty()) return true;
  *report += line + "\n--- worker " + std::to_string(i) + " log ---\n" + log(i) + "\n";
  return false;
}

bool WorkerSet::waitAll(int timeoutMs, std::string* report) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    bool all = true;
    bool failed = false;
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (!reap(i, false)) {
        all = false;
      } else if (!describe(i).empty()) {
        failed = true;
      }
    }
    // One failed worker usually leaves its peers waiting: give them a moment to notice,
    // then stop waiting for the whole deadline.
    if (all || Clock::now() >= deadline) break;
    if (failed) {
      const Clock::time_point grace = Clock::now() + std::chrono::seconds(5);
      if (grace < deadline) {
        bool rest = false;
        while (!rest && Clock::now() < grace) {
          rest = true;
          for (size_t i = 0; i < workers_.size(); ++i) rest = reap(i, false) && rest;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bool ok = true;
  bool stillRunning = false;
  for (const Worker& w : workers_) stillRunning = stillRunning || !w.done;
  if (stillRunning && Clock::now() < deadline) {
    *report += "(workers still running 5 s after a peer failed were killed)\n";
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    const std::string line = describe(i);
    if (!workers_[i].done) {
      ::kill(workers_[i].pid, SIGKILL);
      reap(i, true);
    }
    if (line.empty()) continue;
    ok = false;
    *report += line + "\n--- worker " + std::to_string(i) + " log ---\n" + log(i) + "\n";
  }
  return ok;
}

bool runWorkers(const std::vector<std::vector<std::string>>& args, int timeoutMs,
                std::string* report) {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    *report =
        std::string("ncclGetUniqueId: ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
    return false;
  }
  WorkerSet set;
  std::string error;
  if (!set.start(args, &id, &error)) {
    *report = "starting workers: " + error + "\n";
    set.waitAll(1000, report);
    return false;
  }
  return set.waitAll(timeoutMs, report);
}

}  // namespace braid_gpu
