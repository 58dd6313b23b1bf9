// One-sided operations: the per-communicator state, the three paths (local, cma,
// agent) and the execution of put / signal / wait. See rma.h for the design.
#include "src/rma/rma.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/host_stream.h"
#include "src/core/registration.h"
#include "src/os/cuda_rt.h"
#include "src/net/socket.h"
#include "src/os/process.h"
#include "src/os/shm_segment.h"
#include "src/reduce/reducer.h"
#include "src/rma/rma_agent.h"

namespace braid {

namespace {

/// Bytes between two signal counters (one cache line each: origins do not share lines).
constexpr size_t kSigStride = 64;
/// Device data crosses host-only paths (process_vm_writev, sockets) in pieces this big.
constexpr size_t kBounceBytes = 4 << 20;

enum class Path : uint8_t { kLocal, kCma, kAgent };

const char* pathName(Path p) {
  switch (p) {
    case Path::kLocal: return "local";
    case Path::kCma: return "cma";
    case Path::kAgent: return "agent";
  }
  return "?";
}

int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

std::atomic<uint64_t>* counterAt(void* base, int origin) {
  return reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(base) +
                                                  size_t(origin) * kSigStride);
}

/// What every rank tells the others when the RMA state is set up (bootstrap allGather).
struct SetupWire {
  uint64_t token;      ///< names this rank's state in agent frames
  uint64_t tokenAddr;  ///< &token in this process (the same-host test read)
  uint64_t sigAddr;    ///< this rank's counters, in this process
  uint64_t start;      ///< process start time (liveness checks)
  int32_t pid;
  int32_t hasShm;      ///< counters live in the segment shmName
  char shmName[96];
  char agentAddr[64];  ///< "ip:port" of this process's agent ("" when none)
};

/// How this rank reaches one peer.
struct PeerLink {
  Path path = Path::kAgent;
  int pid = 0;
  uint64_t start = 0;
  std::atomic<uint64_t>* sig = nullptr;  ///< kLocal/kCma: our counter at the peer
  void* shmBase = nullptr;               ///< kCma: the peer's segment, mapped here
  size_t shmBytes = 0;
  uint64_t token = 0;
  std::string agentAddr;
  std::unique_ptr<Socket> sock;  ///< kAgent (and device windows without IPC): on first use
  bool sockBroken = false;
};

}  // namespace

class RmaState {
 public:
  explicit RmaState(Comm* c) : comm(c) {}
  ~RmaState();

  Comm* comm;
  uint64_t token = 0;
  void* sigBase = nullptr;  ///< our counters (nranks, kSigStride apart)
  size_t sigBytes = 0;
  bool sigIsShm = false;
  std::string shmName;       ///< ours, until unlinked
  std::vector<uint64_t> consumed;  ///< per origin: signals consumed by waits
  std::vector<PeerLink> links;
  std::shared_ptr<AgentTarget> agentTarget;
  /// Device windows of kCma peers, opened through CUDA IPC: (peer, addr) -> base.
  std::map<std::pair<int, uint64_t>, void*> ipcMaps;

  ncclResult_t setup();
  ncclResult_t put(const OpRecord& op, const Registration& win);
  ncclResult_t signal(int peer);
  ncclResult_t wait(const std::vector<ncclWaitSignalDesc_t>& descs);

 private:
  ncclResult_t agentSocket(int peer, Socket** out);
  ncclResult_t agentPut(int peer, uint64_t addr, const void* src, size_t bytes, MemKind srcKind);
  ncclResult_t cmaWrite(int peer, uint64_t addr, const void* src, size_t bytes, MemKind srcKind);
  ncclResult_t ipcBase(int peer, const WindowPeer& w, void** base);
  ncclResult_t bump(int peer);
  bool peerGone(int peer, std::string* why);
};

void RmaStateDeleter::operator()(RmaState* s) const { delete s; }

RmaState::~RmaState() {
  if (agentTarget) {
    agentForget(token);
    std::lock_guard<std::mutex> lock(agentTarget->mu);  // waits for a frame being applied
    agentTarget->alive = false;
    agentTarget->comm = nullptr;
  }
  for (auto& kv : ipcMaps) (void)cudart::ipcCloseHandle(kv.second);
  for (PeerLink& l : links) {
    l.sock.reset();
    if (l.shmBase) munmap(l.shmBase, l.shmBytes);
  }
  if (!shmName.empty()) shm_unlink(shmName.c_str());
  if (sigBase) {
    if (sigIsShm) munmap(sigBase, sigBytes);
    else ::operator delete(sigBase, std::align_val_t(kSigStride));
  }
}

ncclResult_t RmaState::setup() {
  const int me = comm->rank, n = comm->nranks;
  const PeerInfo& self = comm->peers[size_t(me)];
  const CommSettings& s = comm->settings;
  // Which paths can occur: peers in other processes of this host (shared counters)
  // and peers in other processes at all (the agent: other hosts, or a failed test read).
  const bool sameHostAllowed = !s.forcedNet() && !s.shmDisable;
  bool needShm = false, needAgent = false;
  for (const PeerInfo& p : comm->peers) {
    if (p.processHash == self.processHash) continue;
    needAgent = true;
    needShm = needShm || (sameHostAllowed && p.hostHash == self.hostHash);
  }
  {
    std::random_device rd;
    token = (uint64_t(rd()) << 32) ^ rd() ^ (uint64_t(me) << 48) ^ comm->commHash;
  }
  sigBytes = (size_t(n) * kSigStride + 4095) & ~size_t(4095);
  if (needShm) {
    char name[96];
    std::snprintf(name, sizeof name, "/braid-rma-%d-%016llx-r%d-%08x", int(getpid()),
                  static_cast<unsigned long long>(comm->commHash), me, unsigned(token));
    void* p = nullptr;
    const int err = createSegment(name, sigBytes, false, &p);
    if (err)
      return setError(ncclSystemError, comm, "ncclCommWindowRegister: creating and mapping "
                      "%zu bytes of signal counters (%s) failed: %s", sigBytes, name,
                      std::strerror(err));
    shmName = name;
    sigBase = p;
    sigIsShm = true;
  } else {
    sigBase = ::operator new(sigBytes, std::align_val_t(kSigStride));
    std::memset(sigBase, 0, sigBytes);
  }
  for (int i = 0; i < n; ++i) new (counterAt(sigBase, i)) std::atomic<uint64_t>(0);
  consumed.assign(size_t(n), 0);

  std::vector<SetupWire> all(static_cast<size_t>(n));
  SetupWire& w = all[size_t(me)];
  std::memset(&w, 0, sizeof w);
  w.token = token;
  w.tokenAddr = reinterpret_cast<uint64_t>(&token);
  w.sigAddr = reinterpret_cast<uint64_t>(sigBase);
  w.pid = int32_t(getpid());
  w.start = processStartTime(getpid());
  w.hasShm = needShm;
  std::snprintf(w.shmName, sizeof w.shmName, "%s", shmName.c_str());
  if (needAgent) {
    agentTarget = std::make_shared<AgentTarget>();
    agentTarget->comm = comm;
    agentTarget->secret = comm->bootstrap->secret();
    agentTarget->sigBase = sigBase;
    agentTarget->nranks = n;
    agentTarget->dead.reset(new std::atomic<bool>[size_t(n)]);
    for (int i = 0; i < n; ++i) agentTarget->dead[i].store(false);
    std::string addr;
    BRAID_CHECK(agentServe(comm->bootstrap->localIp(), token, agentTarget, &addr));
    std::snprintf(w.agentAddr, sizeof w.agentAddr, "%s", addr.c_str());
  }
  BRAID_CHECK(comm->bootstrap->allGather(all.data(), sizeof(SetupWire)));

  links.resize(size_t(n));
  for (int q = 0; q < n; ++q) {
    const PeerInfo& p = comm->peers[size_t(q)];
    const SetupWire& o = all[size_t(q)];
    PeerLink& l = links[size_t(q)];
    l.pid = o.pid;
    l.start = o.start;
    l.token = o.token;
    l.agentAddr = o.agentAddr;
    if (p.processHash == self.processHash) {
      l.path = Path::kLocal;  // this process: its counters are at sigAddr here
      l.sig = counterAt(reinterpret_cast<void*>(o.sigAddr), me);
      continue;
    }
    l.path = Path::kAgent;
    if (!sameHostAllowed || p.hostHash != self.hostHash || !o.hasShm) continue;
    // Same host: test-read the peer's token (process_vm_readv needs the same ptrace
    // permission as the writes), then map its counters.
    uint64_t seen = 0;
    const int readErr = readProcessMemory(o.pid, o.tokenAddr, &seen, sizeof seen);
    if (readErr != 0 || seen != o.token) {
      BRAID_INFO(kLogShm, "rma: rank %d cannot write into rank %d (pid %d) directly (%s): "
                 "puts go through its agent", me, q, int(o.pid),
                 readErr ? std::strerror(readErr) : "its token differs");
      continue;
    }
    void* base = nullptr;
    const int mapErr = openSegment(o.shmName, sigBytes, false, &base);
    if (mapErr != 0) {
      BRAID_INFO(kLogShm, "rma: mapping %s of rank %d failed (%s): puts go through its agent",
                 o.shmName, q, std::strerror(mapErr));
      continue;
    }
    l.shmBase = base;
    l.shmBytes = sigBytes;
    l.sig = counterAt(base, me);
    l.path = Path::kCma;
  }
  // Everyone has mapped what it needs: our segment's name can go.
  if (needShm) {
    BRAID_CHECK(comm->bootstrap->barrier());
    shm_unlink(shmName.c_str());
    shmName.clear();
  }
  std::string paths;
  for (int q = 0; q < n; ++q) paths += std::string(q ? " " : "") + pathName(links[size_t(q)].path);
  BRAID_INFO(kLogShm, "rma: %s ready; paths to ranks 0..%d: %s", comm->who().c_str(), n - 1,
             paths.c_str());
  return ncclSuccess;
}

ncclResult_t RmaState::agentSocket(int peer, Socket** out) {
  PeerLink& l = links[size_t(peer)];
  if (l.sockBroken)
    return setError(ncclRemoteError, comm, "%s: the connection to rank %d's agent broke "
                    "earlier", comm->who().c_str(), peer);
  if (!l.sock) {
    if (l.agentAddr.empty())
      return setError(ncclInternalError, comm, "%s: rank %d has no agent address",
                      comm->who().c_str(), peer);
    SockAddr a;
    if (!SockAddr::parse(l.agentAddr, &a))
      return setError(ncclInternalError, comm, "%s: bad agent address '%s' of rank %d",
                      comm->who().c_str(), l.agentAddr.c_str(), peer);
    auto sock = std::make_unique<Socket>();
    sock->setLabel("rma agent");
    BRAID_CHECK(sock->connect(a, comm->settings.timeoutMs, &comm->abortFlag));
    sock->setNoDelay();
    AgentHello h;
    h.magic = AgentHello::kMagic;
    h.secret = comm->bootstrap->secret();
    h.token = l.token;
    h.origin = comm->rank;
    BRAID_CHECK(sock->sendAll(&h, sizeof h, comm->settings.timeoutMs, &comm->abortFlag));
    l.sock = std::move(sock);
  }
  *out = l.sock.get();
  return ncclSuccess;
}

ncclResult_t RmaState::agentPut(int peer, uint64_t addr, const void* src, size_t bytes,
                                MemKind srcKind) {
  Socket* sock = nullptr;
  BRAID_CHECK(agentSocket(peer, &sock));
  const int tmo = comm->settings.timeoutMs;
  AgentFrame f;
  f.kind = src ? AgentFrame::kPut : AgentFrame::kSignal;
  f.addr = addr;
  f.bytes = src ? bytes : 0;
  ncclResult_t r = sock->sendAll(&f, sizeof f, tmo, &comm->abortFlag);
  if (r == ncclSuccess && src && bytes > 0) {
    if (srcKind == MemKind::kHost) {
      r = sock->sendAll(src, bytes, tmo, &comm->abortFlag);
    } else {
      std::vector<char> bounce(std::min(bytes, kBounceBytes));
      for (size_t done = 0; r == ncclSuccess && done < bytes; done += bounce.size()) {
        const size_t piece = std::min(bounce.size(), bytes - done);
        r = cudart::copyFromDevice(bounce.data(), static_cast<const char*>(src) + done, piece);
        if (r == ncclSuccess) r = sock->sendAll(bounce.data(), piece, tmo, &comm->abortFlag);
      }
    }
  }
  if (r != ncclSuccess) {
    links[size_t(peer)].sockBroken = true;
    return setError(r, comm, "%s: one-sided %s to rank %d through its agent (%s) failed: %s",
                    comm->who().c_str(), src ? "put" : "signal", peer,
                    links[size_t(peer)].agentAddr.c_str(), lastError(nullptr));
  }
  return ncclSuccess;
}

ncclResult_t RmaState::cmaWrite(int peer, uint64_t addr, const void* src, size_t bytes,
                                MemKind srcKind) {
  const pid_t pid = links[size_t(peer)].pid;
  auto write = [pid](const char* from, uint64_t to, size_t n) {
    return writeProcessMemory(pid, to, from, n);
  };
  int err = 0;
  if (srcKind == MemKind::kHost) {
    err = write(static_cast<const char*>(src), addr, bytes);
  } else {
    std::vector<char> bounce(std::min(bytes, kBounceBytes));
    for (size_t done = 0; err == 0 && done < bytes; done += bounce.size()) {
      const size_t piece = std::min(bounce.size(), bytes - done);
      BRAID_CHECK(cudart::copyFromDevice(bounce.data(), static_cast<const char*>(src) + done,
                                         piece));
      err = write(bounce.data(), addr + done, piece);
    }
  }
  if (err != 0)
    return setError(ncclRemoteError, comm, "%s: ncclPutSignal: process_vm_writev of %zu bytes "
                    "into rank %d (pid %d) at 0x%llx failed: %s", comm->who().c_str(), bytes,
                    peer, int(pid), static_cast<unsigned long long>(addr), std::strerror(err));
  return ncclSuccess;
}

ncclResult_t RmaState::ipcBase(int peer, const WindowPeer& w, void** base) {
  auto key = std::make_pair(peer, w.addr);
  auto it = ipcMaps.find(key);
  if (it == ipcMaps.end()) {
    void* b = nullptr;
    BRAID_CHECK(cudart::ipcOpenHandle(w.ipcHandle, &b));
    it = ipcMaps.emplace(key, b).first;
  }
  *base = static_cast<char*>(it->second) + w.ipcOffset;
  return ncclSuccess;
}

ncclResult_t RmaState::bump(int peer) {
  PeerLink& l = links[size_t(peer)];
  if (l.path == Path::kAgent) return agentPut(peer, 0, nullptr, 0, MemKind::kHost);
  l.sig->fetch_add(1, std::memory_order_acq_rel);  // after the data: a release
  return ncclSuccess;
}

ncclResult_t RmaState::put(const OpRecord& op, const Registration& win) {
  const int peer = op.root;
  const WindowPeer& w = win.peers[size_t(peer)];
  const size_t bytes = op.count * dataTypeSize(op.type);
  const uint64_t dst = w.addr + op.rmaOffset;
  const MemKind srcKind = op.mem;
  const bool anyDevice = srcKind == MemKind::kDevice || w.kind == MemKind::kDevice;
  cudart::DeviceScope scope;
  if (anyDevice && comm->cudaDev >= 0) BRAID_CHECK(scope.enter(comm->cudaDev));
  PeerLink& l = links[size_t(peer)];
  if (bytes > 0) {
    if (l.path == Path::kLocal) {
      void* to = reinterpret_cast<void*>(dst);
      if (!anyDevice) std::memcpy(to, op.sendbuff, bytes);
      else BRAID_CHECK(cudart::copyToDevice(to, op.sendbuff, bytes));  // any direction
    } else if (l.path == Path::kCma && w.kind == MemKind::kHost) {
      BRAID_CHECK(cmaWrite(peer, dst, op.sendbuff, bytes, srcKind));
    } else if (l.path == Path::kCma && w.hasIpc) {
      void* base = nullptr;
      BRAID_CHECK(ipcBase(peer, w, &base));
      BRAID_CHECK(cudart::copyToDevice(static_cast<char*>(base) + op.rmaOffset, op.sendbuff,
                                       bytes));
    } else {
      // The agent path: a frame that carries the data and raises the signal.
      return agentPut(peer, dst, op.sendbuff, bytes, srcKind);
    }
  }
  return bump(peer);
}

ncclResult_t RmaState::signal(int peer) { return bump(peer); }

bool RmaState::peerGone(int peer, std::string* why) {
  const PeerLink& l = links[size_t(peer)];
  if (l.path == Path::kCma && !processAlive(l.pid, l.start)) {
    *why = "rank " + std::to_string(peer) + " (pid " + std::to_string(l.pid) +
           ") on this host exited";
    return true;
  }
  if (l.path == Path::kAgent && agentTarget && agentTarget->dead[peer].load()) {
    *why = "rank " + std::to_string(peer) + "'s connection to this rank's agent broke (the "
           "process exited or the network failed)";
    return true;
  }
  if (l.path != Path::kLocal && comm->checkPeer(peer, why) != ncclSuccess) return true;
  return false;
}

ncclResult_t RmaState::wait(const std::vector<ncclWaitSignalDesc_t>& descs) {
  // Per peer: the counter value to reach (several descriptors may name one peer).
  std::vector<std::pair<int, uint64_t>> goals;
  for (const ncclWaitSignalDesc_t& d : descs) {
    auto it = std::find_if(goals.begin(), goals.end(),
                           [&](const std::pair<int, uint64_t>& g) { return g.first == d.peer; });
    if (it == goals.end()) goals.emplace_back(d.peer, consumed[size_t(d.peer)] + uint64_t(d.opCnt));
    else it->second += uint64_t(d.opCnt);
  }
  const CommSettings& s = comm->settings;
  const int64_t start = nowMs();
  int64_t lastCheck = start;
  uint64_t idle = 0;
  for (;;) {
    bool done = true;
    for (const auto& g : goals)
      done = done && counterAt(sigBase, g.first)->load(std::memory_order_acquire) >= g.second;
    if (done) break;
    if (++idle < 2000) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    if (idle < 4000) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, nullptr);
    if ((idle & 31) != 0) continue;
    if (comm->abortFlag.load() || comm->revoked.load())
      return setError(ncclInvalidUsage, comm, "ncclWaitSignal (%s): the communicator was %s",
                      comm->who().c_str(), comm->revoked.load() ? "revoked" : "aborted");
    const int64_t now = nowMs();
    const bool timedOut = s.timeoutMs > 0 && now - start >= s.timeoutMs;
    if (!timedOut && now - lastCheck < s.peerCheckMs) continue;
    lastCheck = now;
    std::string why, missing;
    for (const auto& g : goals) {
      const uint64_t have = counterAt(sigBase, g.first)->load(std::memory_order_acquire);
      if (have >= g.second) continue;
      if (peerGone(g.first, &why)) {
        comm->fatal(ncclRemoteError);
        return setError(ncclRemoteError, comm, "ncclWaitSignal (%s): waiting for %llu more "
                        "signal(s) from rank %d: %s", comm->who().c_str(),
                        static_cast<unsigned long long>(g.second - have), g.first, why.c_str());
      }
      missing += (missing.empty() ? "" : ", ") + std::string("rank ") +
                 std::to_string(g.first) + ": " + std::to_string(g.second - have);
    }
    if (timedOut) {
      comm->fatal(ncclSystemError);
      return setError(ncclSystemError, comm, "ncclWaitSignal (%s): signals still missing after "
                      "%lld ms (BRAID_TIMEOUT_MS): %s", comm->who().c_str(),
                      static_cast<long long>(now - start), missing.c_str());
    }
  }
  for (const auto& g : goals) consumed[size_t(g.first)] = g.second;
  return ncclSuccess;
}

ncclResult_t rmaExchangeWindow(Comm* comm, Registration* r, uint64_t ticket) {
  TurnGuard turn(comm, ticket);
  if (!comm->waitTurn(ticket))
    return setError(ncclInvalidUsage, comm, "ncclCommWindowRegister: the communicator (%s) "
                    "was aborted or revoked", comm->who().c_str());
  return rmaExchangeWindowInTurn(comm, r);
}

ncclResult_t rmaExchangeWindowInTurn(Comm* comm, Registration* r) {
  std::lock_guard<std::mutex> lock(comm->execMutex);
  if (!comm->rma) {
    std::unique_ptr<RmaState, RmaStateDeleter> st(new RmaState(comm));
    BRAID_CHECK(st->setup());
    comm->rma = std::move(st);
  }
  std::vector<WindowPeer> all(size_t(comm->nranks));
  WindowPeer& mine = all[size_t(comm->rank)];
  mine.addr = reinterpret_cast<uint64_t>(r->buff);
  mine.size = r->size;
  mine.kind = r->kind;
  mine.device = r->device;
  mine.hasIpc = r->hasIpc;
  std::memcpy(mine.ipcHandle, r->ipcHandle, sizeof mine.ipcHandle);
  mine.ipcOffset = r->ipcOffset;
  BRAID_CHECK(comm->bootstrap->allGather(all.data(), sizeof(WindowPeer)));
  r->peers = std::move(all);
  r->exchanged = true;
  return ncclSuccess;
}

bool rmaReady(const Comm* comm) { return comm->rma != nullptr; }

ncclResult_t rmaExecute(const OpRecord& op) {
  Comm* c = op.comm;
  RmaState* st = c->rma.get();
  if (st == nullptr)  // checked at the call; a defensive repeat
    return setError(ncclInvalidUsage, c, "%s: no window registered on this communicator",
                    op.call);
  // A CUDA stream: the op follows the work queued there before it, and completes before
  // the call returns (so work queued after it sees its effect).
  if (op.stream != nullptr && HostStream::lookup(op.stream) == nullptr && cudart::available())
    BRAID_CHECK(cudart::streamSynchronize(op.stream));
  ncclResult_t r = ncclSuccess;
  switch (RmaKind(op.rma)) {
    case RmaKind::kPutSignal: {
      const Registration* win = findWindow(op.rmaWin);
      if (win == nullptr || win->comm != c)
        return setError(ncclInvalidArgument, c, "%s: window %p was deregistered before the "
                        "put could run", op.call, op.rmaWin);
      r = st->put(op, *win);
      break;
    }
    case RmaKind::kSignal: r = st->signal(op.root); break;
    case RmaKind::kWaitSignal: r = st->wait(*op.rmaWaits); break;
    case RmaKind::kNone: break;
  }
  if (r != ncclSuccess && RmaKind(op.rma) != RmaKind::kWaitSignal) c->fatal(r);
  return r;
}

}  // namespace braid
