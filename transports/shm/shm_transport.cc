// Shm transport: processes on one host share a POSIX shared memory segment per
// connection. See shm_transport.h for the segment layout and the unlink rule.
#include "transports/shm/shm_transport.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "src/config/params.h"
#include "src/config/error.h"
#include "src/os/process.h"
#include "src/os/shm_segment.h"
#include "transports/p2p/p2p_transport.h"
#include "src/exec/transport.h"

namespace braid {


namespace {

/// ShmTrailer::attached once the sender gave up (device registration failed).
constexpr uint32_t kAttachFailed = 2;

size_t trailerOffset(uint32_t nslots, uint64_t slotBytes) {
  return (FifoLayout::bytesFor(nslots, slotBytes) + 63) & ~size_t(63);
}
size_t segmentBytes(uint32_t nslots, uint64_t slotBytes) {
  return trailerOffset(nslots, slotBytes) + ((sizeof(ShmTrailer) + 63) & ~size_t(63));
}

/// One end's mapping of a segment; the receiver's also owns the name until unlinked.
class ShmResource : public ConnResource {
 public:
  ShmResource(void* base, size_t size, std::string name, int peerRank)
      : base_(base), size_(size), name_(std::move(name)), peerRank_(peerRank) {}
  ~ShmResource() override {
    unlinkName();
    cuda_.reset();  // before the pages go
    if (base_) munmap(base_, size_);
  }

  /// Device mode: pins and maps the whole segment for this rank's GPU; *devBase is
  /// the device address of the segment's start.
  ncclResult_t registerForDevice(int dev, const char* what, void** devBase) {
    return cuda_.registerRange(base_, size_, dev, what, devBase);
  }

  void setPeerProcess(pid_t pid, uint64_t start) { peerPid_ = pid; peerStart_ = start; }
  ShmTrailer* trailer() const {
    auto* h = static_cast<FifoHeader*>(base_);
    return reinterpret_cast<ShmTrailer*>(static_cast<char*>(base_) +
                                         trailerOffset(h->nslots, h->slotBytes));
  }
  /// Removes the name from /dev/shm if this end still owns it (ENOENT is fine: the
  /// sender unlinked it already).
  void unlinkName() {
    if (name_.empty()) return;
    if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT)
      BRAID_WARN("shm: shm_unlink(%s) failed: %s", name_.c_str(), std::strerror(errno));
    name_.clear();
  }
  bool peerAlive() const { return processAlive(peerPid_, peerStart_); }

  ncclResult_t checkPeer(std::string* why) override {
    if (peerAlive()) return ncclSuccess;
    if (why)
      *why = "rank " + std::to_string(peerRank_) + " (pid " + std::to_string(peerPid_) +
             ") on this host exited";
    return ncclRemoteError;
  }

 private:
  void* base_;
  size_t size_;
  std::string name_;  ///< non-empty while this end must unlink it
  int peerRank_;
  pid_t peerPid_ = 0;
  uint64_t peerStart_ = 0;
  HostRegistration cuda_;  ///< device mode: the segment registered with CUDA
};

/// Device mode (ctx.device): registers the mapped segment for this rank's GPU and
/// returns the kernel's view of the FIFO at its start.
ncclResult_t deviceView(const ConnectContext& ctx, ShmResource* res, const char* dir,
                        DevConn* out) {
  const int me = ctx.self ? ctx.self->rank : -1;
  const int peer = ctx.peer ? ctx.peer->rank : -1;
  const int dev = ctx.self ? ctx.self->cudaDev : -1;
  char what[96];
  std::snprintf(what, sizeof what, "shm transport: rank %d %s rank %d (channel %d)", me, dir,
                peer, ctx.channel);
  if (dev < 0)
    return setError(ncclSystemError, nullptr, "%s: device connection but this rank has no GPU",
                    what);
  void* devBase = nullptr;
  BRAID_CHECK(res->registerForDevice(dev, what, &devBase));
  *out = DevConn::at(devBase, ctx.geometry.nslots, ctx.geometry.slotBytes, /*hostMem=*/true);
  return ncclSuccess;
}

std::string uniqueName(const ConnectContext& ctx) {
  static std::mt19937_64 rng{std::random_device{}()};
  static std::mutex mu;
  uint32_t r;
  {
    std::lock_guard<std::mutex> lk(mu);
    r = uint32_t(rng());
  }
  char name[128];
  std::snprintf(name, sizeof name, "/braid-%d-%016llx-r%d-p%d-c%d-%08x", int(getpid()),
                (unsigned long long)ctx.commHash, ctx.self ? ctx.self->rank : -1,
                ctx.peer ? ctx.peer->rank : -1, ctx.channel, r);
  return name;
}

/// Whether this (receiving) process can read the sender's memory: pulls the sender's
/// copy of the trailer's start time with process_vm_readv and compares it with the
/// one in the segment. Publishes the answer in t.cma for the sender.
bool canPull(FifoReceiver& fifo, ShmTrailer& t) {
  uint64_t seen = 0;
  fifo.setRemotePid(t.senderPid);
  const char* remote = reinterpret_cast<const char*>(t.senderAddr) + offsetof(ShmTrailer, senderStart);
  const int err = fifo.pullRemote(reinterpret_cast<char*>(&seen), remote, sizeof seen);
  fifo.setRemotePid(0);
  const bool ok = err == 0 && seen == t.senderStart;
  if (!ok)
    BRAID_INFO(kLogShm, "shm: single-copy reads from pid %d are not possible (%s): copying "
               "through the FIFO", int(t.senderPid), err ? std::strerror(err) : "mismatch");
  t.cma.store(ok ? 1 : 2, std::memory_order_release);
  return ok;
}

class ShmTransport : public Transport {
 public:
  TransportId id() const override { return TransportId::kShm; }
  const char* name() const override { return "shm"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.hostHash == peer.hostHash;
  }

  ncclResult_t setupRecv(const ConnectContext& ctx, RecvSide* out,
                         ConnDescriptor* desc) override {
    const FifoGeometry& g = ctx.geometry;
    const int peer = ctx.peer ? ctx.peer->rank : -1;
    if (g.nslots == 0 || g.slotBytes == 0)
      return setError(ncclInvalidArgument, nullptr,
                      "shm transport: FIFO geometry %u slots x %llu bytes is empty",
                      g.nslots, (unsigned long long)g.slotBytes);
    const size_t size = segmentBytes(g.nslots, g.slotBytes);
    // The pages are reserved now: a full /dev/shm then fails here with ENOSPC instead
    // of SIGBUS on first touch.
    std::string name;
    void* base = nullptr;
    int err = EEXIST;
    for (int attempt = 0; attempt < 8 && err == EEXIST; ++attempt) {
      name = uniqueName(ctx);
      err = createSegment(name.c_str(), size, true, &base);
    }
    if (err)
      return setError(ncclSystemError, nullptr,
                      "shm transport: cannot create, size or map %zu bytes of %s for the "
                      "connection from rank %d: %s%s", size, name.c_str(), peer,
                      std::strerror(err),
                      err == ENOSPC ? " (/dev/shm is full or too small; enlarge it or set "
                                      "NCCL_SHM_DISABLE=1)"
                                    : "");
    FifoLayout::init(base, g.nslots, g.slotBytes);
    auto res = std::make_unique<ShmResource>(base, size, name, peer);
    new (res->trailer()) ShmTrailer();
    res->trailer()->cma.store(0, std::memory_order_relaxed);
    res->trailer()->attached.store(0, std::memory_order_release);
    // Until the sender attaches, its pid comes from the core (PeerInfo) and may belong
    // to another pid namespace: check it only if such a process exists here.
    {
      pid_t p = ctx.peer ? ctx.peer->pid : 0;
      uint64_t start = p > 0 ? processStartTime(p) : 0;
      res->setPeerProcess(start ? p : 0, start);
    }
    if (ctx.device) BRAID_CHECK(deviceView(ctx, res.get(), "<-", &out->dev));
    out->fifo.attach(base);
    out->res = std::move(res);

    ShmDescriptor d{};
    d.magic = ShmDescriptor::kMagic;
    d.size = size;
    d.creatorPid = int32_t(getpid());
    d.creatorStart = processStartTime(getpid());
    d.creatorPidNs = pidNamespace();
    d.creatorRank = ctx.self ? ctx.self->rank : -1;
    d.nslots = g.nslots;
    d.slotBytes = g.slotBytes;
    std::snprintf(d.name, sizeof d.name, "%s", name.c_str());
    *desc = ConnDescriptor{};
    desc->transport = uint32_t(TransportId::kShm);
    std::memcpy(desc->data, &d, sizeof d);
    BRAID_INFO(kLogShm, "shm: rank %d <- rank %d channel %d: created %s (%zu bytes)",
               d.creatorRank, peer, ctx.channel, name.c_str(), size);
    return ncclSuccess;
  }

  ncclResult_t connectSend(const ConnectContext& ctx, const ConnDescriptor& desc,
                           SendSide* out) override {
    ShmDescriptor d;
    std::memcpy(&d, desc.data, sizeof d);
    d.name[sizeof d.name - 1] = '\0';
    const int peer = ctx.peer ? ctx.peer->rank : d.creatorRank;
    if (desc.transport != uint32_t(TransportId::kShm) || d.magic != ShmDescriptor::kMagic)
      return setError(ncclInternalError, nullptr,
                      "shm transport: descriptor from rank %d is not a shm one (transport %u)",
                      peer, desc.transport);
    if (d.size != segmentBytes(d.nslots, d.slotBytes))
      return setError(ncclInternalError, nullptr,
                      "shm transport: descriptor from rank %d has an inconsistent size", peer);
    void* base = nullptr;
    const int err = openSegment(d.name, size_t(d.size), true, &base);
    if (err)
      return setError(ncclSystemError, nullptr,
                      "shm transport: cannot map %s of rank %d (pid %d, %llu bytes): %s%s",
                      d.name, peer, int(d.creatorPid), (unsigned long long)d.size,
                      std::strerror(err),
                      err == ENOENT ? " (is rank on another host or in another /dev/shm "
                                      "namespace? set NCCL_HOSTID or NCCL_SHM_DISABLE=1)"
                                    : "");
    // Both sides have mapped it now: the name is no longer needed.
    if (shm_unlink(d.name) != 0 && errno != ENOENT)
      BRAID_WARN("shm: shm_unlink(%s) failed: %s", d.name, std::strerror(errno));
    auto res = std::make_unique<ShmResource>(base, d.size, std::string(), peer);
    auto* h = static_cast<FifoHeader*>(base);
    if (h->magic != FifoLayout::kMagic || h->nslots != d.nslots ||
        h->slotBytes != d.slotBytes)
      return setError(ncclInternalError, nullptr,
                      "shm transport: segment %s of rank %d holds no valid FIFO", d.name, peer);
    const uint64_t myNs = pidNamespace();
    if (d.creatorPidNs != 0 && d.creatorPidNs == myNs) {
      res->setPeerProcess(d.creatorPid, d.creatorStart);
    } else {
      BRAID_INFO(kLogShm, "shm: rank %d is in another pid namespace: its exit cannot be "
                 "detected through its pid", peer);
    }
    ShmTrailer* t = res->trailer();
    t->senderPid = int32_t(getpid());
    t->senderStart = processStartTime(getpid());
    t->senderPidNs = myNs;
    t->senderAddr = reinterpret_cast<uint64_t>(t);
    if (ctx.device) {
      // The receiver's geometry (it made the segment) is the kernel's.
      ConnectContext c = ctx;
      c.geometry.nslots = d.nslots;
      c.geometry.slotBytes = d.slotBytes;
      ncclResult_t rc = deviceView(c, res.get(), "->", &out->dev);
      if (rc != ncclSuccess) {
        t->attached.store(kAttachFailed, std::memory_order_release);  // receiver: fail now
        return rc;
      }
    }
    t->attached.store(1, std::memory_order_release);
    out->fifo.attach(base);
    out->allowDirect = false;
    // Single-copy entries only where this side allows them too (the receiver tests);
    // never on device connections (the kernels write every byte into the slots).
    out->remoteDirect = param::kShmCma.get() && !ctx.device ? &t->cma : nullptr;
    out->res = std::move(res);
    BRAID_INFO(kLogShm, "shm: rank %d -> rank %d channel %d: mapped %s",
               ctx.self ? ctx.self->rank : -1, peer, ctx.channel, d.name);
    return ncclSuccess;
  }

  /// Waits until the sender has mapped the segment (the core normally calls this after
  /// every connectSend, so it returns at once), then makes sure the name is gone.
  ncclResult_t finishRecv(const ConnectContext& ctx, RecvSide* side) override {
    auto* res = static_cast<ShmResource*>(side->res.get());
    if (!res) return setError(ncclInternalError, nullptr, "shm transport: finishRecv without setupRecv");
    const int peer = ctx.peer ? ctx.peer->rank : -1;
    ShmTrailer* t = res->trailer();
    auto start = std::chrono::steady_clock::now();
    auto elapsedMs = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - start).count();
    };
    ncclResult_t rc = ncclSuccess;
    for (int spins = 0; t->attached.load(std::memory_order_acquire) == 0; ++spins) {
      if (ctx.abortFlag && ctx.abortFlag->load(std::memory_order_relaxed)) {
        rc = setError(ncclInvalidUsage, nullptr,
                      "shm transport: connection from rank %d aborted during setup", peer);
        break;
      }
      if (ctx.timeoutMs >= 0 && elapsedMs() > ctx.timeoutMs) {
        rc = setError(ncclRemoteError, nullptr,
                      "shm transport: rank %d did not attach its shm segment within %d ms",
                      peer, ctx.timeoutMs);
        break;
      }
      if (spins % 64 == 63 && !res->peerAlive()) {
        rc = setError(ncclRemoteError, nullptr,
                      "shm transport: rank %d (pid %d) on this host exited during setup", peer,
                      ctx.peer ? ctx.peer->pid : 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 100 ? 50 : 1000));
    }
    if (rc == ncclSuccess && t->attached.load(std::memory_order_acquire) == kAttachFailed)
      rc = setError(ncclSystemError, nullptr,
                    "shm transport: rank %d could not attach the segment for its GPU (see its "
                    "error)", peer);
    if (rc == ncclSuccess) {
      if (t->senderPidNs != 0 && t->senderPidNs == pidNamespace()) {
        res->setPeerProcess(t->senderPid, t->senderStart);
        if (ctx.device) t->cma.store(2, std::memory_order_release);
        else if (param::kShmCma.get() && canPull(side->fifo, *t))
          side->fifo.setRemotePid(t->senderPid);
      } else {
        res->setPeerProcess(0, 0);
        t->cma.store(2, std::memory_order_release);
        BRAID_INFO(kLogShm, "shm: rank %d is in another pid namespace: its exit cannot be "
                   "detected through its pid", peer);
      }
    }
    res->unlinkName();
    return rc;
  }
};

}  // namespace

Transport& shmTransport() {
  static ShmTransport t;
  return t;
}

}  // namespace braid
