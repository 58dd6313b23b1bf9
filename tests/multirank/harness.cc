#include "tests/multirank/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace mr {
namespace {

ncclUniqueId g_id;

/// In a forked child: forwards every failed assertion to the parent through a pipe.
class PipeReporter : public ::testing::EmptyTestEventListener {
 public:
  explicit PipeReporter(int fd) : fd_(fd) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    failed_.store(true);
    std::ostringstream os;
    os << (r.file_name() ? r.file_name() : "?") << ":" << r.line_number() << ": "
       << r.summary() << "\n";
    writeAll(os.str());
  }
  void writeAll(const std::string& s) {
    const char* p = s.data();
    size_t left = s.size();
    while (left > 0) {
      ssize_t w = write(fd_, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      p += w;
      left -= size_t(w);
    }
  }
  bool failed() const { return failed_.load(); }

 private:
  int fd_;
  std::atomic<bool> failed_{false};
};

/// The unique id, made by child rank 0 after the fork and shared through a MAP_SHARED
/// page: the parent must not start threads (ncclGetUniqueId starts the bootstrap root)
/// before forking, or a child can inherit a lock held by one of them (e.g. malloc's
/// under ASan) and hang.
struct SharedId {
  std::atomic<int> state;  // 0: not yet, 1: ready, -1: rank 0 failed
  ncclUniqueId id;
};

bool receiveId(SharedId* shared, int rank) {
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&g_id);
    if (r == ncclSuccess) shared->id = g_id;
    shared->state.store(r == ncclSuccess ? 1 : -1, std::memory_order_release);
    if (r != ncclSuccess) ADD_FAILURE() << "ncclGetUniqueId: " << ncclGetLastError(nullptr);
    return r == ncclSuccess;
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (shared->state.load(std::memory_order_acquire) == 0) {
    if (secondsSince(t0) > 60) {
      ADD_FAILURE() << "rank " << rank << ": no unique id from rank 0 within 60 s";
      return false;
    }
    usleep(200);
  }
  g_id = shared->id;
  return shared->state.load() == 1;
}

[[noreturn]] void childMain(int rank, int nranks, int fd, SharedId* shared,
                            const RankBody& body, const RunOptions& opts) {
  auto* reporter = new PipeReporter(fd);
  ::testing::UnitTest::GetInstance()->listeners().Append(reporter);  // owned by gtest
  if (!receiveId(shared, rank)) {
    fflush(stdout);
    fflush(stderr);
    _exit(2);
  }
  ncclComm_t comm = nullptr;
  if (opts.createComm) {
    ncclResult_t r = ncclCommInitRank(&comm, nranks, g_id, rank);
    if (r != ncclSuccess) {
      ADD_FAILURE() << "rank " << rank << ": ncclCommInitRank failed: " << ncclGetErrorString(r)
                    << " - " << ncclGetLastError(nullptr);
      fflush(stdout);
      fflush(stderr);
      _exit(2);
    }
  }
  body(comm, rank, nranks);
  if (comm != nullptr) {
    ncclResult_t r = ncclCommDestroy(comm);
    EXPECT_EQ(r, ncclSuccess) << "rank " << rank << ": ncclCommDestroy";
  }
  fflush(stdout);
  fflush(stderr);
  _exit(reporter->failed() ? 1 : 0);
}

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void drain(int fd, std::string* out) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

std::vector<RankOutcome> runProcesses(int nranks, const RankBody& body, const RunOptions& opts) {
  std::vector<RankOutcome> out(static_cast<size_t>(nranks));
  void* page = mmap(nullptr, sizeof(SharedId), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    ADD_FAILURE() << "mmap: " << strerror(errno);
    return out;
  }
  auto* shared = new (page) SharedId();
  shared->state.store(0);
  std::vector<pid_t> pids(size_t(nranks), -1);
  std::vector<int> fds(size_t(nranks), -1);
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < nranks; ++i) {
    int p[2];
    if (pipe(p) != 0) {
      ADD_FAILURE() << "pipe: " << strerror(errno);
      break;
    }
    pid_t pid = fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << strerror(errno);
      close(p[0]);
      close(p[1]);
      break;
    }
    if (pid == 0) {
      close(p[0]);
      for (int j = 0; j < i; ++j) close(fds[size_t(j)]);
      childMain(i, nranks, p[1], shared, body, opts);
    }
    close(p[1]);
    setNonBlocking(p[0]);
    pids[size_t(i)] = pid;
    fds[size_t(i)] = p[0];
  }
  const auto t0 = std::chrono::steady_clock::now();
  int running = 0;
  for (pid_t pid : pids) running += pid > 0;
  bool hung = false;
  while (running > 0) {
    std::vector<pollfd> pfds;
    for (int fd : fds)
      if (fd >= 0) pfds.push_back({fd, POLLIN, 0});
    if (!pfds.empty()) poll(pfds.data(), pfds.size(), 20);
    else usleep(20000);
    for (int i = 0; i < nranks; ++i)
      if (fds[size_t(i)] >= 0) drain(fds[size_t(i)], &out[size_t(i)].messages);
    for (int i = 0; i < nranks; ++i) {
      pid_t& pid = pids[size_t(i)];
      if (pid <= 0) continue;
      int status = 0;
      pid_t w = waitpid(pid, &status, WNOHANG);
      if (w != pid) continue;
      RankOutcome& o = out[size_t(i)];
      o.exited = WIFEXITED(status);
      o.exitCode = o.exited ? WEXITSTATUS(status) : -1;
      o.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      pid = -1;
      --running;
    }
    if (running > 0 && secondsSince(t0) > opts.watchdogSeconds) {
      hung = true;
      std::ostringstream still;
      for (int i = 0; i < nranks; ++i)
        if (pids[size_t(i)] > 0) still << " " << i;
      ADD_FAILURE() << "HANG: process ranks" << still.str() << " of " << nranks
                    << " did not finish within " << opts.watchdogSeconds << " s; killed";
      for (pid_t pid : pids)
        if (pid > 0) kill(pid, SIGKILL);
      for (int i = 0; i < nranks; ++i)
        if (pids[size_t(i)] > 0) {
          int status = 0;
          waitpid(pids[size_t(i)], &status, 0);
          out[size_t(i)].signal = SIGKILL;
          pids[size_t(i)] = -1;
        }
      running = 0;
    }
  }
  for (int i = 0; i < nranks; ++i)
    if (fds[size_t(i)] >= 0) {
      drain(fds[size_t(i)], &out[size_t(i)].messages);
      close(fds[size_t(i)]);
    }
  munmap(page, sizeof(SharedId));
  if (!hung) {
    for (int i = 0; i < nranks; ++i) {
      const RankOutcome& o = out[size_t(i)];
      if (o.exited && o.exitCode == 0) continue;
      if (!o.exited && !opts.failOnSignal) continue;
      ADD_FAILURE() << "process rank " << i << " of " << nranks
                    << (o.exited ? " exited with status " + std::to_string(o.exitCode)
                                 : " was killed by signal " + std::to_string(o.signal))
                    << "; its failures:\n"
                    << o.messages;
    }
  }
  return out;
}

void runThreadRanks(Launch how, int nranks, const RankBody& body, const RunOptions& opts) {
  std::vector<ncclComm_t> comms(size_t(nranks), nullptr);
  if (opts.createComm && how == Launch::kInitAll) {
    ncclResult_t r = ncclCommInitAll(comms.data(), nranks, nullptr);
    ASSERT_EQ(r, ncclSuccess) << "ncclCommInitAll(" << nranks
                              << "): " << ncclGetLastError(nullptr);
  } else {
    ncclResult_t r = ncclGetUniqueId(&g_id);
    ASSERT_EQ(r, ncclSuccess) << "ncclGetUniqueId: " << ncclGetLastError(nullptr);
  }
  runThreads(
      nranks,
      [&](int rank) {
        ncclComm_t& comm = comms[size_t(rank)];
        if (opts.createComm && how == Launch::kThreads) {
          ncclResult_t r = ncclCommInitRank(&comm, nranks, g_id, rank);
          ASSERT_EQ(r, ncclSuccess) << "rank " << rank << ": ncclCommInitRank: "
                                    << ncclGetLastError(nullptr);
        }
        body(comm, rank, nranks);
      },
      opts.watchdogSeconds);
  for (int i = 0; i < nranks; ++i)
    if (comms[size_t(i)] != nullptr) {
      ncclResult_t r = ncclCommDestroy(comms[size_t(i)]);
      EXPECT_EQ(r, ncclSuccess) << "ncclCommDestroy rank " << i;
    }
}

}  // namespace

ScopedEnv::ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
  for (const auto& v : vars) set(v.first, v.second);
}

ScopedEnv::ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& v : vars) set(v.first, v.second.c_str());
}

void ScopedEnv::set(const std::string& name, const char* value) {
  const char* old = getenv(name.c_str());
  saved_.push_back({name, old != nullptr, old ? old : ""});
  if (value) setenv(name.c_str(), value, 1);
  else unsetenv(name.c_str());
}

ScopedEnv::~ScopedEnv() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->had) setenv(it->name.c_str(), it->value.c_str(), 1);
    else unsetenv(it->name.c_str());
  }
}

const char* launchName(Launch l) {
  switch (l) {
    case Launch::kInitAll: return "InitAll";
    case Launch::kThreads: return "Threads";
    case Launch::kProcesses: return "Procs";
  }
  return "?";
}

const ncclUniqueId& sharedId() { return g_id; }

void runThreads(int n, const std::function<void(int)>& fn, int watchdogSeconds) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<bool> done;
  };
  auto shared = std::make_shared<Shared>();
  shared->done.assign(size_t(n), false);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&fn, shared, i] {
      fn(i);
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->done[size_t(i)] = true;
      shared->cv.notify_all();
    });
  {
    std::unique_lock<std::mutex> lock(shared->mu);
    bool ok = shared->cv.wait_for(lock, std::chrono::seconds(watchdogSeconds), [&] {
      for (bool d : shared->done)
        if (!d) return false;
      return true;
    });
    if (!ok) {
      std::ostringstream still;
      for (int i = 0; i < n; ++i)
        if (!shared->done[size_t(i)]) still << " " << i;
      const std::string msg = "HANG: thread ranks" + still.str() + " of " +
                              std::to_string(n) + " did not finish within " +
                              std::to_string(watchdogSeconds) + " s";
      ADD_FAILURE() << msg;
      fprintf(stderr, "%s; aborting the test process\n", msg.c_str());
      fflush(stdout);
      fflush(stderr);
      abort();
    }
  }
  for (auto& t : threads) t.join();
}

std::vector<RankOutcome> run(Launch how, int nranks, const RankBody& body,
                             const RunOptions& opts) {
  if (how == Launch::kProcesses) return runProcesses(nranks, body, opts);
  runThreadRanks(how, nranks, body, opts);
  return {};
}

std::vector<std::pair<std::string, std::string>> smallFifoEnv(const std::string& transport) {
  return {{"NCCL_BUFFSIZE", std::to_string(kSmallFifoBytes)},
          {"BRAID_FIFO_SLOTS", "4"},
          {"BRAID_TRANSPORT", transport}};
}

}  // namespace mr
