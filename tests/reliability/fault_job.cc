#include "tests/reliability/fault_job.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "nccl.h"

namespace fault {
namespace {

constexpr int kMaxRanks = 8;
constexpr int kIterations = 8;
constexpr int kFaultIteration = 2;
constexpr size_t kBufferFloats = size_t(2) << 20;  // 8 MiB: a call takes a while

enum RankState { kRunning = 0, kFailed = 1, kCompleted = 2, kWrong = 3 };

struct RankSlot {
  std::atomic<int> state{kRunning};
  std::atomic<int64_t> errorNs{0};
  char message[400] = {};
};

/// Shared by the driver and the ranks of one job.
struct JobShared {
  std::atomic<int> idState{0};  // 0 not yet, 1 ready, -1 failed
  ncclUniqueId id;
  std::atomic<int64_t> faultNs{0};     // when the fault was injected (steady clock)
  std::atomic<int> phaseReached{0};    // rank 0 reached the fault iteration / warm-up done
  RankSlot ranks[kMaxRanks];
};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Resets every established TCP connection of this process: connect(AF_UNSPEC) makes
/// the kernel abort the connection (RST to the peer, ECONNRESET/ENOTCONN here).
int resetSockets() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  std::vector<int> fds;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') fds.push_back(std::atoi(e->d_name));
  closedir(d);
  int reset = 0;
  for (int fd : fds) {
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    socklen_t plen = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) continue;
    linger lg{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    sockaddr unspec{};
    unspec.sa_family = AF_UNSPEC;
    if (connect(fd, &unspec, sizeof unspec) == 0) ++reset;
  }
  return reset;
}

/// The buffers and the call of one collective; values are small integers (exact).
class Coll {
 public:
  Coll(const std::string& name, int rank, int n) : name_(name), rank_(rank), n_(n) {
    const size_t block = kBufferFloats / size_t(n);
    send_.assign(kBufferFloats, float(rank + 1));
    recv_.assign(kBufferFloats, -1.0f);
    if (name == "allgather") {
      count_ = block;
      send_.resize(block);
    } else if (name == "reducescatter" || name == "alltoall") {
      count_ = block;
      if (name == "reducescatter") recv_.resize(block);
    } else {
      count_ = kBufferFloats;
    }
  }
  ncclResult_t issue(ncclComm_t comm, ncclRedOp_t sum = ncclSum) {
    float* s = send_.data();
    float* r = recv_.data();
    if (name_ == "allreduce") return ncclAllReduce(s, r, count_, ncclFloat32, sum, comm, nullptr);
    if (name_ == "allgather") return ncclAllGather(s, r, count_, ncclFloat32, comm, nullptr);
    if (name_ == "reducescatter")
      return ncclReduceScatter(s, r, count_, ncclFloat32, sum, comm, nullptr);
    if (name_ == "broadcast") return ncclBroadcast(s, r, count_, ncclFloat32, 0, comm, nullptr);
    if (name_ == "alltoall") return ncclAlltoAll(s, r, count_, ncclFloat32, comm, nullptr);
    if (name_ == "sendrecv") {
      ncclResult_t a = ncclGroupStart();
      if (a == ncclSuccess) a = ncclSend(s, count_, ncclFloat32, (rank_ + 1) % n_, comm, nullptr);
      if (a == ncclSuccess)
        a = ncclRecv(r, count_, ncclFloat32, (rank_ + n_ - 1) % n_, comm, nullptr);
      const ncclResult_t b = ncclGroupEnd();
      return a != ncclSuccess ? a : b;
    }
    return ncclInvalidArgument;
  }
  /// Whether every output element is right.
  bool right() const {
    const float total = float(n_ * (n_ + 1) / 2);
    for (size_t i = 0; i < recv_.size(); ++i) {
      float want;
      if (name_ == "allreduce" || name_ == "reducescatter") want = total;
      else if (name_ == "allgather" || name_ == "alltoall") want = float(i / count_ + 1);
      else if (name_ == "broadcast") want = 1;
      else want = float((rank_ + n_ - 1) % n_ + 1);
      if (recv_[i] != want) return false;
    }
    return true;
  }

 private:
  std::string name_;
  int rank_, n_;
  size_t count_ = 0;
  std::vector<float> send_, recv_;
};

/// Faults injected by the victim rank itself.
bool rankFault(const std::string& kind) {
  return kind == "kill" || kind == "stop" || kind == "reset";
}

/// Faults after which the victim is not a survivor.
bool victimGone(const std::string& kind) { return kind == "kill" || kind == "stop"; }

[[noreturn]] void finish(JobShared* sh, int rank, RankState st, ncclComm_t comm,
                         const std::string& text) {
  RankSlot& slot = sh->ranks[rank];
  if (st == kFailed) slot.errorNs.store(nowNs());
  std::snprintf(slot.message, sizeof slot.message, "%s", text.c_str());
  slot.state.store(st);
  // A communicator with a failed or dead peer is left through abort, never destroy.
  if (comm) ncclCommAbort(comm);
  std::fflush(nullptr);
  _exit(0);
}

/// The fault itself, inside the victim: SIGKILL or a reset of its connections.
void injectInRank(const FaultSpec& f, JobShared* sh) {
  if (f.kind == "kill") {
    sh->faultNs.store(nowNs());
    raise(SIGKILL);
  }
  if (f.kind == "stop") {  // alive but silent: only BRAID_TIMEOUT_MS can tell
    sh->faultNs.store(nowNs());
    raise(SIGSTOP);
  }
  if (f.kind == "reset") {
    sh->faultNs.store(nowNs());
    resetSockets();
  }
}

[[noreturn]] void rankMain(const FaultSpec& f, int rank, JobShared* sh) {
  if (f.kind == "switch") {  // two "nodes" of two ranks
    const std::string host = "fault-node-" + std::to_string(rank / 2);
    setenv("NCCL_HOSTID", host.c_str(), 1);
  }
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&sh->id);
    sh->idState.store(r == ncclSuccess ? 1 : -1);
  }
  const int64_t t0 = nowNs();
  while (sh->idState.load() == 0 && nowNs() - t0 < int64_t(60e9)) usleep(500);
  if (sh->idState.load() != 1) finish(sh, rank, kFailed, nullptr, "no unique id");
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, f.nranks, sh->id, rank);
  if (r != ncclSuccess)
    finish(sh, rank, kFailed, nullptr,
           std::string("ncclCommInitRank: ") + ncclGetErrorString(r) + " - " +
               ncclGetLastError(nullptr));
  Coll coll(f.kind == "switch" ? "allreduce" : f.coll, rank, f.nranks);
  const bool victim = rank == f.victim && rankFault(f.kind);
  // Phase "setup": die while the first call makes its connections (segments half made).
  if (victim && f.phase == "setup")
    std::thread([&f, sh] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      injectInRank(f, sh);
    }).detach();
  // Warm-up: every connection of this collective exists before the fault.
  r = coll.issue(comm);
  if (r != ncclSuccess)
    finish(sh, rank, kFailed, comm,
           std::string("warm-up: ") + ncclGetErrorString(r) + " - " + ncclGetLastError(comm));
  if (!coll.right()) finish(sh, rank, kWrong, comm, "warm-up result wrong");
  if (f.kind == "unlink-mid") {
    // New connections after the driver started removing segments: a duplicate
    // communicator whose connections are made now.
    if (rank == 0) sh->phaseReached.store(1);
    while (sh->phaseReached.load() < 2 && nowNs() - t0 < int64_t(60e9)) usleep(500);
    ncclComm_t dup = nullptr;
    r = ncclCommSplit(comm, 0, rank, &dup, nullptr);
    if (r != ncclSuccess)
      finish(sh, rank, kFailed, comm,
             std::string("ncclCommSplit: ") + ncclGetErrorString(r) + " - " +
                 ncclGetLastError(comm));
    ncclCommAbort(comm);
    comm = dup;
  }
  for (int it = 0; it < kIterations; ++it) {
    if (it == kFaultIteration && rank == 0) sh->phaseReached.store(3);  // switch: kill now
    if (victim && it == kFaultIteration) {
      if (f.phase == "before") injectInRank(f, sh);
      if (f.phase == "mid")
        std::thread([&f, sh] {
          std::this_thread::sleep_for(std::chrono::milliseconds(3));
          injectInRank(f, sh);
        }).detach();
    }
    r = coll.issue(comm);
    if (r != ncclSuccess)
      finish(sh, rank, kFailed, comm,
             std::string(ncclGetErrorString(r)) + " - " + ncclGetLastError(comm));
    if (!coll.right()) finish(sh, rank, kWrong, comm, "result wrong");
    if (victim && it == kFaultIteration && f.phase == "after") injectInRank(f, sh);
  }
  finish(sh, rank, kCompleted, comm, "");
}

/// braid-switch as a child listening on loopback; address() empty if it did not start.
class SwitchChild {
 public:
  explicit SwitchChild(const std::string& bin) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
      execl(bin.c_str(), bin.c_str(), "--listen", "127.0.0.1:0", "--quiet",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    char line[256];
    const std::string tag = "listening on ";
    while (out && fgets(line, sizeof line, out)) {
      const std::string s = line;
      const size_t at = s.find(tag);
      if (at == std::string::npos) continue;
      address_ = s.substr(at + tag.size());
      while (!address_.empty() && (address_.back() == '\n' || address_.back() == ' '))
        address_.pop_back();
      break;
    }
    if (out) fclose(out);
  }
  ~SwitchChild() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

/// Names in /dev/shm that belong to one of `pids` (braid-<pid>-..., braid-rma-<pid>-...).
std::vector<std::string> jobSegments(const std::vector<pid_t>& pids) {
  std::vector<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const char* p = e->d_name;
    if (std::strncmp(p, "braid-", 6) != 0) continue;
    p += 6;
    if (std::strncmp(p, "rma-", 4) == 0) p += 4;
    const pid_t pid = pid_t(std::strtol(p, nullptr, 10));
    if (std::find(pids.begin(), pids.end(), pid) != pids.end()) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

/// Whether `text` names rank `who` ("rank 3" not followed by another digit), other
/// than in the "(rank R of N" that describes the caller itself.
bool namesRank(const std::string& text, int who) {
  const std::string tag = "rank " + std::to_string(who);
  for (size_t p = text.find(tag); p != std::string::npos; p = text.find(tag, p + 1)) {
    const size_t end = p + tag.size();
    if (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) continue;
    if (p > 0 && text[p - 1] == '(' && text.compare(end, 4, " of ") == 0) continue;
    return true;
  }
  return false;
}

/// Whether `text` names a rank other than `self`, or the switch.
bool namesPeer(const std::string& text, int self, int nranks) {
  if (text.find("switch") != std::string::npos) return true;
  for (int r = 0; r < nranks; ++r)
    if (r != self && namesRank(text, r)) return true;
  return false;
}

void setJobEnv(const FaultSpec& f, const std::string& switchAddr) {
  const std::string t = std::to_string(f.timeoutMs);
  setenv("BRAID_TIMEOUT_MS", t.c_str(), 1);
  // Connections are made by a job's first call of each kind through the bootstrap: a
  // peer lost then is noticed after this time.
  if (f.bootstrapTimeoutMs > 0)
    setenv("BRAID_BOOTSTRAP_TIMEOUT_MS", std::to_string(f.bootstrapTimeoutMs).c_str(), 1);
  else
    unsetenv("BRAID_BOOTSTRAP_TIMEOUT_MS");
  unsetenv("NCCL_COLLNET_ENABLE");
  unsetenv("BRAID_SWITCH");
  unsetenv("NCCL_ALGO");
  if (f.kind == "switch") {
    unsetenv("BRAID_TRANSPORT");
    setenv("NCCL_COLLNET_ENABLE", "1", 1);
    setenv("BRAID_SWITCH", switchAddr.c_str(), 1);
    setenv("BRAID_SWITCH_TIMEOUT_MS", t.c_str(), 1);
    setenv("NCCL_ALGO", ("allreduce:" + f.coll).c_str(), 1);
  } else {
    setenv("BRAID_TRANSPORT", f.transport.c_str(), 1);
  }
}

}  // namespace

std::string FaultSpec::name() const {
  std::string n = kind + "." + transport + "." + coll + "." + phase;
  if (rankFault(kind)) n += ".r" + std::to_string(victim);
  return n;
}

bool JobResult::ok(const FaultSpec& f) const {
  if (hung || leaked || wrong) return false;
  if (rankFault(f.kind)) return failedInTime == survivors;
  return failedInTime + completed == survivors;
}

JobResult runJob(const FaultSpec& f, const std::string& switchBin) {
  JobResult res;
  if (f.nranks > kMaxRanks) return res;
  void* mem = mmap(nullptr, sizeof(JobShared), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return res;
  auto* sh = new (mem) JobShared();
  SwitchChild* sw = nullptr;
  if (f.kind == "switch") {
    sw = new SwitchChild(switchBin);
    if (sw->address().empty()) std::fprintf(stderr, "fault: braid-switch did not start\n");
  }
  setJobEnv(f, sw ? sw->address() : "");
  // Segment removal: watch /dev/shm from the start (setup) or from the phase (mid).
  const bool unlinking = f.kind.rfind("unlink", 0) == 0;
  int ino = unlinking ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
  if (ino >= 0) inotify_add_watch(ino, "/dev/shm", IN_CREATE);
  bool removing = f.kind == "unlink-setup";

  std::vector<pid_t> pids;
  for (int r = 0; r < f.nranks; ++r) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      if (ino >= 0) close(ino);
      rankMain(f, r, sh);
    }
    pids.push_back(pid);
  }
  std::vector<bool> reaped(pids.size(), false);
  std::vector<int> status(pids.size(), 0);
  const int64_t start = nowNs();
  const int64_t cap = int64_t(f.timeoutMs) * 4 * 1000000;
  const int64_t setupCap = int64_t(90e9);  // init and warm-up on a busy machine
  auto removeSegments = [&] {
    for (const auto& name : jobSegments(pids))
      if (unlink(("/dev/shm/" + name).c_str()) == 0 && sh->faultNs.load() == 0)
        sh->faultNs.store(nowNs());
  };
  for (;;) {
    size_t left = 0;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (reaped[i]) continue;
      if (waitpid(pids[i], &status[i], WNOHANG) == pids[i]) reaped[i] = true;
      else ++left;
    }
    if (left == 0) break;
    // A stopped victim never exits by itself: end it once every other rank has.
    if (f.kind == "stop" && left == 1 && !reaped[size_t(f.victim)]) {
      kill(pids[size_t(f.victim)], SIGKILL);
      waitpid(pids[size_t(f.victim)], &status[size_t(f.victim)], 0);
      reaped[size_t(f.victim)] = true;
      break;
    }
    if (f.kind == "unlink-mid" && sh->phaseReached.load() == 1) {
      removing = true;
      sh->phaseReached.store(2);
    }
    if (f.kind == "switch" && sw && sh->phaseReached.load() == 3 && sh->faultNs.load() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      sh->faultNs.store(nowNs());
      sw->stop();
    }
    if (removing) removeSegments();
    const int64_t fault = sh->faultNs.load();
    const int64_t now = nowNs();
    if ((fault && now - fault > cap) || (!fault && now - start > setupCap)) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!reaped[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], &status[i], 0);
          reaped[i] = true;
          ++res.hung;
          std::fprintf(stderr, "fault: %s: rank %zu HUNG (killed %.1f s after the fault)\n",
                       f.name().c_str(), i, fault ? double(now - fault) / 1e9 : -1.0);
        }
      break;
    }
    if (ino >= 0) {
      pollfd p{ino, POLLIN, 0};
      if (poll(&p, 1, 1) > 0) {
        char buf[4096];
        while (read(ino, buf, sizeof buf) > 0) {
        }
      }
    } else {
      usleep(2000);
    }
  }
  if (ino >= 0) close(ino);
  delete sw;
  const auto left = jobSegments(pids);
  res.leaked = int(left.size());
  for (const auto& name : left) {
    const pid_t owner = pid_t(std::strtol(name.c_str() + name.find_first_of("0123456789"),
                                          nullptr, 10));
    const size_t r = size_t(std::find(pids.begin(), pids.end(), owner) - pids.begin());
    res.details += "    leaked /dev/shm/" + name + " (created by rank " + std::to_string(r) +
                   ")\n";
  }
  for (const auto& name : left) unlink(("/dev/shm/" + name).c_str());  // for the next job

  const int64_t fault = sh->faultNs.load();
  res.faultInjected = fault != 0;
  for (int r = 0; r < f.nranks; ++r) {
    const bool killedOnPurpose = victimGone(f.kind) && r == f.victim;
    if (killedOnPurpose) continue;
    ++res.survivors;
    const RankSlot& s = sh->ranks[r];
    const int st = s.state.load();
    const int64_t at = s.errorNs.load();
    // Seconds from the fault to this rank's error (0: before it, or no fault recorded).
    const double after = fault && at >= fault ? double(at - fault) / 1e9 : 0;
    char line[600];
    std::snprintf(line, sizeof line, "    rank %d: %s%s %.3f s after the fault: %s\n", r,
                  st == kFailed ? "error" : st == kCompleted ? "completed" : st == kWrong ?
                  "WRONG" : "no result (hung or died)",
                  r == f.victim && f.kind == "reset" ? " (victim, reset)" : "",
                  after, s.message);
    res.details += line;
    if (st == kCompleted) ++res.completed;
    if (st == kWrong) ++res.wrong;
    if (st != kFailed) continue;
    ++res.failed;
    res.maxErrorSeconds = std::max(res.maxErrorSeconds, after);
    if (after <= 2.0 * f.timeoutMs / 1000.0) ++res.failedInTime;
    if (namesPeer(s.message, r, f.nranks)) ++res.namedPeer;
    if (rankFault(f.kind) && r != f.victim && namesRank(s.message, f.victim))
      ++res.namedVictim;
    if (res.sampleError.empty()) res.sampleError = s.message;
  }
  munmap(mem, sizeof(JobShared));
  return res;
}

}  // namespace fault
