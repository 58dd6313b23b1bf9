// P2p transport: FIFOs in the receiving rank's device memory, reached by the sender
// directly (same process) or through CUDA IPC. See p2p_transport.h.
#include "transports/p2p/p2p_transport.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "src/config/error.h"
#include "src/os/process.h"

namespace braid {

// ---- helpers shared with shm / net --------------------------------------------

std::string cudaReason() {
  if (!cudart::available()) {
    std::string why = cudart::unavailableReason();
    return "CUDA is not usable (" + (why.empty() ? std::string("no driver or no device") : why) +
           ")";
  }
  std::string why = cudart::lastError();
  return why.empty() ? std::string("unknown CUDA error") : why;
}

ncclResult_t HostRegistration::registerRange(void* p, size_t bytes, int dev,
                                             const char* what, void** devPtr) {
  reset();
  if (!cudart::available())
    return setError(ncclSystemError, nullptr,
                    "%s: cannot register the FIFO for GPU %d: %s", what, dev,
                    cudaReason().c_str());
  cudart::CaptureRelaxed relaxed;
  cudart::DeviceScope scope;
  void* d = nullptr;
  ncclResult_t rc = scope.enter(dev);
  if (rc == ncclSuccess) rc = cudart::hostRegister(p, bytes, &d);
  if (rc != ncclSuccess)
    return setError(ncclSystemError, nullptr,
                    "%s: cannot register the FIFO (%zu bytes of host memory) for GPU %d: %s",
                    what, bytes, dev, cudaReason().c_str());
  host_ = p;
  dev_ = dev;
  pid_ = getpid();
  *devPtr = d;
  return ncclSuccess;
}

void HostRegistration::reset() {
  if (!host_) return;
  if (pid_ == getpid()) {  // a fork()ed copy has no CUDA state to undo
    cudart::CaptureRelaxed relaxed;
    cudart::DeviceScope scope;
    (void)scope.enter(dev_);
    if (cudart::hostUnregister(host_) != ncclSuccess)
      BRAID_INFO(kLogP2p, "cudaHostRegister'd FIFO at %p: unregister failed: %s", host_,
                 cudart::lastError().c_str());
  }
  host_ = nullptr;
}

// ---- descriptor ------------------------------------------------------------------

void encodeP2pDescriptor(const P2pDescriptor& d, ConnDescriptor* out) {
  *out = ConnDescriptor{};
  out->transport = uint32_t(TransportId::kP2p);
  std::memcpy(out->data, &d, sizeof d);
}

ncclResult_t decodeP2pDescriptor(const ConnDescriptor& in, int peerRank, P2pDescriptor* out) {
  P2pDescriptor d;
  std::memcpy(&d, in.data, sizeof d);
  d.busId[sizeof d.busId - 1] = '\0';
  if (in.transport != uint32_t(TransportId::kP2p) || d.magic != P2pDescriptor::kMagic)
    return setError(ncclInternalError, nullptr,
                    "p2p transport: descriptor from rank %d is not a p2p one (transport %u): "
                    "the two ranks chose different transports",
                    peerRank, in.transport);
  if (d.nslots == 0 || d.slotBytes == 0 || d.devPtr == 0)
    return setError(ncclInternalError, nullptr,
                    "p2p transport: descriptor from rank %d has no FIFO (%u slots x %llu bytes)",
                    peerRank, d.nslots, (unsigned long long)d.slotBytes);
  *out = d;
  return ncclSuccess;
}

// ---- the rule ----------------------------------------------------------------------

namespace {

/// Parses "[domain:]bus:device.function" (hex); false if malformed.
bool parseBusId(const char* s, uint64_t* key) {
  if (!s || !*s) return false;
  unsigned long long part[4] = {0, 0, 0, 0};
  char sep[4] = {0, 0, 0, 0};  // the separator after each part ('\0' after the last)
  int n = 0;
  for (const char* p = s; n < 4;) {
    char* end = nullptr;
    if (!std::isxdigit(static_cast<unsigned char>(*p))) return false;
    part[n] = std::strtoull(p, &end, 16);
    sep[n++] = *end;
    if (*end == '\0') break;
    if (*end != ':' && *end != '.') return false;
    p = end + 1;
  }
  unsigned long long dom, bus, dev, fn;
  if (n == 4 && sep[0] == ':' && sep[1] == ':' && sep[2] == '.' && sep[3] == '\0') {
    dom = part[0]; bus = part[1]; dev = part[2]; fn = part[3];
  } else if (n == 3 && sep[0] == ':' && sep[1] == '.' && sep[2] == '\0') {
    dom = 0; bus = part[0]; dev = part[1]; fn = part[2];
  } else {
    return false;
  }
  *key = (dom << 24) | ((bus & 0xff) << 16) | ((dev & 0xff) << 8) | (fn & 0xff);
  return true;
}

}  // namespace

bool sameBusId(const char* a, const char* b) {
  uint64_t x = 0, y = 0;
  return parseBusId(a, &x) && parseBusId(b, &y) && x == y;
}

const P2pDeviceQuery& cudaDeviceQuery() {
  static const P2pDeviceQuery q = [] {
    P2pDeviceQuery r;
    r.deviceOf = [](const char* busId) {
      static const std::vector<std::string> ids = [] {
        std::vector<std::string> v;
        if (!cudart::available()) return v;
        for (int d = 0, n = cudart::deviceCount(); d < n; ++d)
          v.push_back(cudart::deviceBusId(d));
        return v;
      }();
      for (size_t d = 0; d < ids.size(); ++d)
        if (sameBusId(ids[d].c_str(), busId)) return int(d);
      return -1;
    };
    r.canAccessPeer = [](int a, int b) { return cudart::canAccessPeer(a, b); };
    return r;
  }();
  return q;
}

bool p2pCanConnect(const PeerInfo& self, const PeerInfo& peer, const P2pDeviceQuery& q) {
  if (self.cudaDev < 0 || peer.cudaDev < 0) return false;
  if (self.hostHash != peer.hostHash || self.machineHash != peer.machineHash) return false;
  const bool sameProcess = self.processHash == peer.processHash;
  const bool busKnown = self.busId[0] != '\0' && peer.busId[0] != '\0';
  if (busKnown && sameBusId(self.busId, peer.busId)) return true;  // one GPU
  if (sameProcess) return !busKnown && self.cudaDev == peer.cudaDev;
  if (!busKnown) return false;
  const int a = q.deviceOf ? q.deviceOf(self.busId) : -1;
  const int b = q.deviceOf ? q.deviceOf(peer.busId) : -1;
  if (a < 0 || b < 0 || !q.canAccessPeer) return false;
  return q.canAccessPeer(a, b) && q.canAccessPeer(b, a);
}

// ---- resources ----------------------------------------------------------------------

namespace {

/// Where a peer process lives, for checkPeer (pid 0: not checked).
struct PeerProcess {
  int rank = -1;
  pid_t pid = 0;
  uint64_t start = 0;
  std::string host;

  ncclResult_t check(std::string* why) const {
    // processAlive: kill(pid, 0) != ESRCH, not a zombie, and not a reused pid.
    if (pid <= 0 || processAlive(pid, start)) return ncclSuccess;
    if (why)
      *why = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + " on host " +
             host + ") exited";
    return ncclRemoteError;
  }
};

std::string hostOf(const PeerInfo* p) {
  return p ? std::string(p->hostname, strnlen(p->hostname, sizeof p->hostname)) : std::string();
}

/// The receiver's FIFO in its device memory.
class P2pRecvResource : public ConnResource {
 public:
  P2pRecvResource(void* devPtr, int dev, PeerProcess peer)
      : devPtr_(devPtr), dev_(dev), pid_(getpid()), peer_(std::move(peer)) {}
  ~P2pRecvResource() override {
    if (!devPtr_ || pid_ != getpid()) return;
    cudart::CaptureRelaxed relaxed;
    cudart::DeviceScope scope;
    (void)scope.enter(dev_);
    if (cudart::deviceFree(devPtr_) != ncclSuccess)
      BRAID_INFO(kLogP2p, "p2p: freeing the FIFO at %p failed: %s", devPtr_,
                 cudart::lastError().c_str());
  }
  ncclResult_t checkPeer(std::string* why) override { return peer_.check(why); }

 private:
  void* devPtr_;
  int dev_;
  pid_t pid_;
  PeerProcess peer_;
};

/// The sender's mapping of the receiver's FIFO (an opened IPC handle, or nothing in
/// the same process).
class P2pSendResource : public ConnResource {
 public:
  P2pSendResource(void* ipcBase, int dev, PeerProcess peer)
      : ipcBase_(ipcBase), dev_(dev), pid_(getpid()), peer_(std::move(peer)) {}
  ~P2pSendResource() override {
    if (!ipcBase_ || pid_ != getpid()) return;
    cudart::CaptureRelaxed relaxed;
    cudart::DeviceScope scope;
    (void)scope.enter(dev_);
    // The peer may be gone: its memory stays valid until we close our mapping.
    if (cudart::ipcCloseHandle(ipcBase_) != ncclSuccess)
      BRAID_INFO(kLogP2p, "p2p: closing the peer FIFO mapping %p failed: %s", ipcBase_,
                 cudart::lastError().c_str());
  }
  ncclResult_t checkPeer(std::string* why) override { return peer_.check(why); }

 private:
  void* ipcBase_;
  int dev_;
  pid_t pid_;
  PeerProcess peer_;
};

class P2pTransport : public Transport {
 public:
  TransportId id() const override { return TransportId::kP2p; }
  const char* name() const override { return "p2p"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return p2pCanConnect(self, peer, cudaDeviceQuery());
  }

  ncclResult_t setupRecv(const ConnectContext& ctx, RecvSide* out,
                         ConnDescriptor* desc) override {
    const FifoGeometry& g = ctx.geometry;
    const int me = ctx.self ? ctx.self->rank : -1;
    const int peer = ctx.peer ? ctx.peer->rank : -1;
    if (!ctx.device || !ctx.self)
      return setError(ncclInternalError, nullptr,
                      "p2p transport: the connection of rank %d from rank %d is not a device "
                      "connection (p2p serves the CUDA executor only)", me, peer);
    if (g.nslots == 0 || g.slotBytes == 0)
      return setError(ncclInvalidArgument, nullptr,
                      "p2p transport: FIFO geometry %u slots x %llu bytes is empty", g.nslots,
                      (unsigned long long)g.slotBytes);
    const int dev = ctx.self->cudaDev;
    if (!cudart::available() || dev < 0)
      return setError(ncclSystemError, nullptr,
                      "p2p transport: rank %d cannot place the FIFO from rank %d in device "
                      "memory (GPU %d): %s", me, peer, dev,
                      dev < 0 ? "this rank has no GPU" : cudaReason().c_str());
    cudart::CaptureRelaxed relaxed;
    cudart::DeviceScope scope;
    if (scope.enter(dev) != ncclSuccess)
      return setError(ncclSystemError, nullptr, "p2p transport: rank %d cannot use GPU %d: %s",
                      me, dev, cudaReason().c_str());
    const size_t bytes = FifoLayout::bytesFor(g.nslots, g.slotBytes);
    void* region = nullptr;
    if (cudart::deviceAlloc(&region, bytes, "p2p FIFO") != ncclSuccess)
      return setError(ncclSystemError, nullptr,
                      "p2p transport: rank %d cannot allocate %zu bytes of device memory on "
                      "GPU %d for the FIFO from rank %d: %s", me, bytes, dev, peer,
                      cudaReason().c_str());
    PeerProcess pp;
    pp.rank = peer;
    pp.host = hostOf(ctx.peer);
    const bool sameProcess = ctx.peer && ctx.peer->processHash == ctx.self->processHash;
    if (!sameProcess && ctx.peer && ctx.peer->pid > 0) {
      // The peer's pid comes from PeerInfo and may belong to another pid namespace:
      // watch it only if such a process exists here now.
      uint64_t start = processStartTime(ctx.peer->pid);
      if (start) {
        pp.pid = ctx.peer->pid;
        pp.start = start;
      }
    }
    // The resource owns the allocation from here on (freed on any failure below).
    auto res = std::make_unique<P2pRecvResource>(region, dev, pp);

    // Header and slot table: built on the host, copied up once.
    std::vector<char> image(FifoLayout::dataOffset(g.nslots), 0);
    FifoLayout::init(image.data(), g.nslots, g.slotBytes);
    if (cudart::copyToDevice(region, image.data(), image.size()) != ncclSuccess)
      return setError(ncclSystemError, nullptr,
                      "p2p transport: rank %d cannot initialise the FIFO on GPU %d: %s", me, dev,
                      cudaReason().c_str());

    P2pDescriptor d;
    d.magic = P2pDescriptor::kMagic;
    d.processHash = ctx.self->processHash;
    d.devPtr = reinterpret_cast<uint64_t>(region);
    d.slotBytes = g.slotBytes;
    d.nslots = g.nslots;
    d.creatorPid = int32_t(getpid());
    d.creatorStart = processStartTime(getpid());
    d.creatorPidNs = pidNamespace();
    d.creatorRank = me;
    d.cudaDev = dev;
    std::snprintf(d.busId, sizeof d.busId, "%s", ctx.self->busId);
    if (!sameProcess) {
      size_t offset = 0;
      if (cudart::ipcGetHandle(region, d.ipcHandle, &offset) != ncclSuccess)
        return setError(ncclSystemError, nullptr,
                        "p2p transport: rank %d cannot export its FIFO on GPU %d to rank %d "
                        "(CUDA IPC): %s", me, dev, peer, cudaReason().c_str());
      d.ipcOffset = offset;
      d.ipcValid = 1;
    }
    encodeP2pDescriptor(d, desc);
    out->dev = DevConn::at(region, g.nslots, g.slotBytes, /*hostMem=*/false);
    out->res = std::move(res);
    BRAID_INFO(kLogP2p, "p2p: rank %d <- rank %d channel %d: FIFO of %zu bytes on GPU %d%s", me,
               peer, ctx.channel, bytes, dev, sameProcess ? " (same process)" : " (CUDA IPC)");
    return ncclSuccess;
  }

  ncclResult_t connectSend(const ConnectContext& ctx, const ConnDescriptor& desc,
                           SendSide* out) override {
    const int me = ctx.self ? ctx.self->rank : -1;
    int peer = ctx.peer ? ctx.peer->rank : -1;
    P2pDescriptor d;
    BRAID_CHECK(decodeP2pDescriptor(desc, peer, &d));
    if (peer < 0) peer = d.creatorRank;
    const FifoGeometry& g = ctx.geometry;
    if (!ctx.device || !ctx.self)
      return setError(ncclInternalError, nullptr,
                      "p2p transport: the connection of rank %d to rank %d is not a device "
                      "connection", me, peer);
    if (d.nslots != g.nslots || d.slotBytes != g.slotBytes)
      return setError(ncclInvalidUsage, nullptr,
                      "p2p transport: FIFO of %u x %llu bytes here but %u x %llu on rank %d: "
                      "NCCL_BUFFSIZE / BRAID_FIFO_SLOTS must be equal on every rank", g.nslots,
                      (unsigned long long)g.slotBytes, d.nslots,
                      (unsigned long long)d.slotBytes, peer);
    const int dev = ctx.self->cudaDev;
    if (!cudart::available() || dev < 0)
      return setError(ncclSystemError, nullptr,
                      "p2p transport: rank %d cannot map the FIFO of rank %d: %s", me, peer,
                      dev < 0 ? "this rank has no GPU" : cudaReason().c_str());
    const bool sameProcess = d.processHash == ctx.self->processHash &&
                             d.creatorPid == int32_t(getpid());
    PeerProcess pp;
    pp.rank = peer;
    pp.host = hostOf(ctx.peer);
    if (!sameProcess && d.creatorPidNs != 0 && d.creatorPidNs == pidNamespace()) {
      pp.pid = d.creatorPid;
      pp.start = d.creatorStart;
    }
    void* region = nullptr;
    std::unique_ptr<P2pSendResource> res;
    if (sameProcess) {
      const bool oneGpu = d.cudaDev == dev || sameBusId(d.busId, ctx.self->busId);
      if (!oneGpu)
        return setError(ncclInvalidUsage, nullptr,
                        "p2p transport: ranks %d (GPU %d) and %d (GPU %d) share a process but "
                        "not a GPU: p2p between two GPUs of one process needs peer access, "
                        "use shm", me, dev, peer, d.cudaDev);
      region = reinterpret_cast<void*>(d.devPtr);
      res = std::make_unique<P2pSendResource>(nullptr, dev, pp);
    } else {
      if (!d.ipcValid)
        return setError(ncclInternalError, nullptr,
                        "p2p transport: rank %d exported no CUDA IPC handle to rank %d", peer, me);
      cudart::CaptureRelaxed relaxed;
      cudart::DeviceScope scope;
      if (scope.enter(dev) != ncclSuccess)
        return setError(ncclSystemError, nullptr, "p2p transport: rank %d cannot use GPU %d: %s",
                        me, dev, cudaReason().c_str());
      void* base = nullptr;
      if (cudart::ipcOpenHandle(d.ipcHandle, &base) != ncclSuccess)
        return setError(ncclSystemError, nullptr,
                        "p2p transport: rank %d (GPU %d) cannot open the FIFO of rank %d (pid %d, "
                        "GPU %s) through CUDA IPC: %s", me, dev, peer, int(d.creatorPid),
                        d.busId[0] ? d.busId : "?", cudaReason().c_str());
      res = std::make_unique<P2pSendResource>(base, dev, pp);
      region = static_cast<char*>(base) + d.ipcOffset;
    }
    out->dev = DevConn::at(region, d.nslots, d.slotBytes, /*hostMem=*/false);
    out->allowDirect = false;
    out->remoteDirect = nullptr;
    out->res = std::move(res);
    BRAID_INFO(kLogP2p, "p2p: rank %d -> rank %d channel %d: %s", me, peer, ctx.channel,
               sameProcess ? "same process" : "CUDA IPC");
    return ncclSuccess;
  }
};

}  // namespace

Transport& p2pTransport() {
  static P2pTransport t;
  return t;
}

}  // namespace braid
