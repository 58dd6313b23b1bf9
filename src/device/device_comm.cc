#include "src/device/device_comm.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/os/cuda_rt.h"
#include "src/device/dev_kernel.h"

namespace braid {
namespace {

int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

template <class T>
T loadHost(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

uint64_t hashBytes(const std::vector<char>& b) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : b) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

template <class T>
void append(std::vector<char>* out, const std::vector<T>& v) {
  const char* p = reinterpret_cast<const char*>(v.data());
  out->insert(out->end(), p, p + v.size() * sizeof(T));
}

/// The (peer, channel, direction) connection of `comm` that a plan names.
const DevConn* findConn(Comm* comm, const DevConnRef& ref) {
  const uint64_t key = Comm::connKey(ref.peer, ref.channel);
  if (ref.isSend) {
    auto it = comm->devSends.find(key);
    return it == comm->devSends.end() ? nullptr : &it->second.dev;
  }
  auto it = comm->devRecvs.find(key);
  return it == comm->devRecvs.end() ? nullptr : &it->second.dev;
}

/// Whether every rank of c is a thread of this process on this GPU (2 to
/// kDevMaxDirectRanks of them) and BRAID_DEVICE_DIRECT (rank 0's) is on.
bool directEligible(const Comm& c) {
  if (!c.settings.deviceDirect || c.nranks < 2 || c.nranks > kDevMaxDirectRanks) return false;
  const PeerInfo& me = c.peers[size_t(c.rank)];
  for (const PeerInfo& p : c.peers)
    if (p.processHash != me.processHash || p.cudaDev != me.cudaDev) return false;
  return true;
}

}  // namespace

DeviceComm::~DeviceComm() {
  shutdown(true);
  for (Arena& a : arenas_) {
    (void)cudart::deviceFree(a.dev);
    (void)cudart::hostFree(a.host);
  }
  for (void* p : scratch_) (void)cudart::deviceFree(p);
  for (void* e : events_) (void)cudart::eventDestroy(e);
  if (lastEvent_) (void)cudart::eventDestroy(lastEvent_);
  if (barrier_) (void)cudart::deviceFree(barrier_);
  if (peerArea_) (void)cudart::deviceFree(peerArea_);
  if (controlHost_) (void)cudart::hostFree(controlHost_);
}

ncclResult_t DeviceComm::init() {
  cudart::CaptureRelaxed relaxed;
  // Every kernel loaded before this comm's first launch (lazy loading could otherwise
  // deadlock thread ranks, or load inside a stream capture).
  BRAID_CHECK(preloadDevKernels());
  void* dev = nullptr;
  BRAID_CHECK(cudart::hostAllocMapped(&controlHost_, &dev, sizeof(DevControl)));
  std::memset(controlHost_, 0, sizeof(DevControl));
  controlDev_ = static_cast<DevControl*>(dev);
  void* b = nullptr;
  BRAID_CHECK(cudart::deviceAlloc(&b, 4 * sizeof(uint32_t), "grid barrier words"));
  barrier_ = static_cast<uint32_t*>(b);
  BRAID_CHECK(cudart::memsetDevice(barrier_, 0, 4 * sizeof(uint32_t)));
  direct_ = directEligible(*comm_);
  if (direct_) {  // made now, while the ranks are still setting up (see Arena)
    void* a = nullptr;
    BRAID_CHECK(cudart::deviceAlloc(&a, sizeof(DevPeerArea), "direct-access words"));
    peerArea_ = static_cast<DevPeerArea*>(a);
    BRAID_CHECK(cudart::memsetDevice(peerArea_, 0, sizeof(DevPeerArea)));
  }
  BRAID_CHECK(cudart::eventCreate(&lastEvent_));
  char* h = nullptr;
  char* d = nullptr;
  BRAID_CHECK(carve(0, &h, &d));  // the first arena, while the ranks are still setting up
  warnSharedGpu();
  return ncclSuccess;
}

ncclResult_t DeviceComm::setPeerAreas(const std::vector<uint64_t>& areas) {
  if (peersReady()) return ncclSuccess;
  if (areas.size() != size_t(comm_->nranks) || peerArea_ == nullptr)
    return setError(ncclInternalError, comm_, "%s: direct-access areas of %zu ranks for %d",
                    comm_->who().c_str(), areas.size(), comm_->nranks);
  // From the plan arenas, like an image: no cudaMalloc while thread ranks' kernels run.
  const size_t bytes = areas.size() * sizeof(uint64_t);
  char* staging = nullptr;
  char* dev = nullptr;
  BRAID_CHECK(carve(bytes, &staging, &dev));
  std::memcpy(staging, areas.data(), bytes);
  {
    cudart::CaptureRelaxed relaxed;
    BRAID_CHECK(cudart::copyToDevice(dev, staging, bytes));
  }
  peerTable_.areas = reinterpret_cast<DevPeerArea* const*>(dev);
  peerTable_.rank = uint32_t(comm_->rank);
  peerTable_.nranks = uint32_t(comm_->nranks);
  peerTable_.sysScope = 0;  // directAccess(): every rank is on this GPU
  BRAID_INFO(kLogInit, "%s: direct-access areas of %d ranks exchanged", comm_->who().c_str(),
             comm_->nranks);
  return ncclSuccess;
}

ncclResult_t DeviceComm::carve(size_t bytes, char** host, char** dev) {
  bytes = (bytes + 15) & ~size_t(15);
  if (arenas_.empty() || arenas_.back().bytes - arenas_.back().used < bytes) {
    Arena a;
    a.bytes = std::max(kArenaBytes, bytes);
    if (!arenas_.empty()) {
      a.bytes = std::max(a.bytes, 2 * arenas_.back().bytes);
      BRAID_INFO(kLogAlloc, "%s: device plan arena %zu full; a new one of %zu bytes",
                 comm_->who().c_str(), arenas_.size(), a.bytes);
    }
    cudart::CaptureRelaxed relaxed;
    void* d = nullptr;
    BRAID_CHECK(cudart::deviceAlloc(&d, a.bytes, "device plan arena"));
    void* h = nullptr;
    void* mapped = nullptr;
    ncclResult_t r = cudart::hostAllocMapped(&h, &mapped, a.bytes);
    if (r != ncclSuccess) {
      (void)cudart::deviceFree(d);
      return r;
    }
    a.dev = static_cast<char*>(d);
    a.host = static_cast<char*>(h);
    arenas_.push_back(a);
  }
  Arena& a = arenas_.back();
  *host = a.host + a.used;
  *dev = a.dev + a.used;
  a.used += bytes;
  return ncclSuccess;
}

void DeviceComm::warnSharedGpu() const {
  // Ranks of other processes on our GPU: without MPS the GPU runs one process's
  // context at a time (time slices of ~2 ms), and executor kernels that wait for each
  // other advance one FIFO's worth per slice (2 ranks on one H200: 2.3 ms per small
  // all-reduce, 14.8 GB/s). Threads of one process (one context) run side by side.
  const PeerInfo& me = comm_->peers[size_t(comm_->rank)];
  if (me.busId[0] == '\0') return;
  int others = 0;
  for (const PeerInfo& p : comm_->peers)
    if (p.rank != me.rank && p.machineHash == me.machineHash &&
        p.processHash != me.processHash && std::strcmp(p.busId, me.busId) == 0)
      ++others;
  if (others > 0)
    BRAID_WARN("%s: %d rank(s) of other processes use this GPU (%s) too; unless CUDA MPS "
               "runs, the GPU time-slices between processes and every wait between their "
               "kernels costs a slice (~2 ms): run such ranks as threads of one process, "
               "or start MPS (nvidia-cuda-mps-control -d)", comm_->who().c_str(), others,
               me.busId);
}

ncclResult_t DeviceComm::image(const DevPlan& dp, const char* algorithm,
                               const DevPlanImage** out, const DevPlanImage** host) {
  std::vector<char> key;
  append(&key, dp.programs);
  append(&key, dp.steps);
  append(&key, dp.conns);
  const char* tail = reinterpret_cast<const char*>(&dp.sliceBytes);
  key.insert(key.end(), tail, tail + sizeof(dp.sliceBytes));
  key.push_back(char(dp.typeSize));
  std::vector<Image>& bucket = images_[hashBytes(key)];
  for (const Image& im : bucket)
    if (im.key == key) {
      *out = im.dev;
      *host = im.hostView;
      return ncclSuccess;
    }
  std::vector<DevConn> conns;
  for (const DevConnRef& ref : dp.conns) {
    const DevConn* c = findConn(comm_, ref);
    if (c == nullptr || !c->valid())
      return setError(ncclInternalError, comm_,
                      "%s: plan %s needs a device connection %s rank %d on channel %d that "
                      "was not made", comm_->who().c_str(), algorithm,
                      ref.isSend ? "to" : "from", ref.peer, int(ref.channel));
    conns.push_back(*c);
  }
  // Written on the host with the device addresses inside, then copied to device memory
  // once: kernels read steps and connections at every poll, and device memory keeps
  // that off PCIe. (Never rewritten, so graphs may replay it any time.)
  Image im;
  im.key = std::move(key);
  const size_t bytes = DevPlanImage::bytesFor(dp);
  char* staging = nullptr;
  char* dev = nullptr;
  BRAID_CHECK(carve(bytes, &staging, &dev));
  if (dp.direct && !peersReady())
    return setError(ncclInternalError, comm_, "%s: plan %s uses direct access before the "
                    "ranks' areas were exchanged", comm_->who().c_str(), algorithm);
  im.hostView = DevPlanImage::write(dp, conns.data(), peerTable_, staging, dev);
  {
    // From pinned memory: a DMA on the setup stream, which waits for nothing else.
    cudart::CaptureRelaxed relaxed;
    BRAID_CHECK(cudart::copyToDevice(dev, staging, bytes));
  }
  im.dev = reinterpret_cast<const DevPlanImage*>(dev);
  *out = im.dev;
  *host = im.hostView;
  bucket.push_back(std::move(im));
  if (++imageCount_ == 4096)
    BRAID_WARN("%s: 4096 distinct device plans kept (one per op shape; they are freed "
               "with the communicator)", comm_->who().c_str());
  return ncclSuccess;
}

bool DeviceComm::compiled(const std::shared_ptr<const Plan>& plan, size_t typeSize, bool keep,
                          CompiledPlan* scratch, CompiledPlan** out, std::string* why) {
  if (keep) {
    auto it = compiled_.find(plan.get());
    if (it != compiled_.end() && it->second.dev.typeSize == typeSize) {
      *out = &it->second;
      return true;
    }
  }
  CompiledPlan c;
  c.plan = plan;
  if (!DevPlan::compile(*plan, typeSize, &c.dev, why)) return false;
  if (!keep) {
    *scratch = std::move(c);
    *out = scratch;
    return true;
  }
  // Plans the tuner evicted stay alive here until the bound; then every entry goes
  // (their images stay in images_, found by content again).
  if (compiled_.size() >= kMaxCompiled) compiled_.clear();
  CompiledPlan& slot = compiled_[plan.get()];
  slot = std::move(c);
  *out = &slot;
  return true;
}

ncclResult_t DeviceComm::scratch(size_t bytes, char** out) {
  if (bytes == 0) {
    *out = nullptr;
    return ncclSuccess;
  }
  if (bytes > scratchBytes_) {
    cudart::CaptureRelaxed relaxed;
    void* p = nullptr;
    const size_t want = std::max(bytes, scratchBytes_ * 2);
    BRAID_CHECK(cudart::deviceAlloc(&p, want, "plan scratch"));
    scratch_.push_back(p);
    scratchBytes_ = want;
  }
  *out = static_cast<char*>(scratch_.back());
  return ncclSuccess;
}

ncclResult_t DeviceComm::beforeLaunch(cudaStream_t s, const std::vector<cudaStream_t>& others) {
  // After the comm's previous launch, whatever stream it was on (a wait on the same
  // stream costs nothing; the previous stream may be gone, its event stays valid).
  if (launched_ && !cudart::streamCapturing(s)) BRAID_CHECK(cudart::streamWaitEvent(s, lastEvent_));
  while (events_.size() < others.size()) {
    void* e = nullptr;
    BRAID_CHECK(cudart::eventCreate(&e));
    events_.push_back(e);
  }
  for (size_t i = 0; i < others.size(); ++i) {
    BRAID_CHECK(cudart::eventRecord(events_[i], others[i]));
    BRAID_CHECK(cudart::streamWaitEvent(s, events_[i]));
  }
  startWatchdog();
  return ncclSuccess;
}

ncclResult_t DeviceComm::afterLaunch(cudaStream_t s, const std::vector<cudaStream_t>& others) {
  if (!others.empty()) {
    BRAID_CHECK(cudart::eventRecord(events_[0], s));
    for (cudaStream_t o : others) BRAID_CHECK(cudart::streamWaitEvent(o, events_[0]));
  }
  if (!cudart::streamCapturing(s)) {
    BRAID_CHECK(cudart::eventRecord(lastEvent_, s));
    launched_ = true;
  }
  return ncclSuccess;
}

void DeviceComm::abortKernels() {
  if (controlHost_) __atomic_store_n(&static_cast<DevControl*>(controlHost_)->abort, 1u,
                                     __ATOMIC_RELEASE);
}

void DeviceComm::closeConnections(uint32_t why) {
  abortKernels();
  auto close = [why](const DevConn& c) {
    if (!c.valid()) return;
    // DevConn holds device addresses (for pinned host regions too, which may differ
    // from the host's): write the word through CUDA.
    (void)cudart::copyToDevice(c.closed, &why, sizeof(why));
  };
  for (auto& kv : comm_->devSends) close(kv.second.dev);
  for (auto& kv : comm_->devRecvs) close(kv.second.dev);
}

bool DeviceComm::drain(int timeoutMs) {
  if (!launched_) return true;
  const DevControl* ctl = static_cast<const DevControl*>(controlHost_);
  uint64_t progress = loadHost(&ctl->progress);
  int64_t lastMove = nowMs();
  for (;;) {
    const int q = cudart::eventQuery(lastEvent_);
    if (q != 0) return q == 1;
    const uint64_t p = loadHost(&ctl->progress);
    const int64_t now = nowMs();
    if (p != progress) {
      progress = p;
      lastMove = now;
    }
    // Give up after timeoutMs without progress (0: never, unless the watchdog failed
    // the communicator: its kernels are then on their way out anyway).
    if (timeoutMs > 0 && now - lastMove >= timeoutMs) return false;
    if (timeoutMs <= 0 && comm_->asyncError.load() != ncclSuccess && now - lastMove >= 10000)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void DeviceComm::shutdown(bool abort) {
  // The watchdog keeps watching while a destroy waits for the launches: a peer that
  // dies meanwhile fails the communicator and stops the kernels.
  bool drained = !controlHost_ || (!abort && drain(comm_->settings.timeoutMs));
  {
    std::lock_guard<std::mutex> lock(wdMu_);
    wdStop_ = true;
  }
  wdCv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (drained || !controlHost_) return;
  abortKernels();
  if (!drain(10000))
    BRAID_WARN("%s: device work still running 10 s after it was told to stop",
               comm_->who().c_str());
}

void DeviceComm::startWatchdog() {
  if (watchdog_.joinable()) return;
  wdStop_ = false;
  watchdog_ = std::thread([this] { watchdogLoop(); });
}

bool DeviceComm::failComm(ncclResult_t code, const std::string& why) {
  std::unique_lock<std::mutex> lock(comm_->execMutex, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  (void)cudart::setDevice(comm_->cudaDev);  // closing the FIFOs writes device memory
  setError(code, comm_, "%s: device work failed: %s", comm_->who().c_str(), why.c_str());
  BRAID_WARN("%s: device work failed: %s", comm_->who().c_str(), why.c_str());
  comm_->fatal(code);  // closes the host and device connections, stops the kernels
  return true;
}

void DeviceComm::watchdogLoop() {
  // No CUDA call here while things go well: a thread of the process calling CUDA while
  // another captures a stream in global mode could invalidate that capture. Only
  // failComm (closing the device connections) makes the comm's device current.
  const DevControl* ctl = static_cast<const DevControl*>(controlHost_);
  const int checkMs = std::max(10, std::min(comm_->settings.peerCheckMs, 200));
  uint64_t lastProgress = loadHost(&ctl->progress);
  int64_t stallStart = nowMs(), lastCheck = stallStart;
  bool failed = false;
  std::unique_lock<std::mutex> lock(wdMu_);
  while (!wdStop_) {
    wdCv_.wait_for(lock, std::chrono::milliseconds(checkMs));
    if (wdStop_ || failed) continue;
    lock.unlock();
    const int64_t now = nowMs();
    const bool busy = loadHost(&ctl->started) != loadHost(&ctl->finished);
    const uint64_t progress = loadHost(&ctl->progress);
    if (!busy || progress != lastProgress) {
      lastProgress = progress;
      stallStart = lastCheck = now;
    }
    if (loadHost(&ctl->error) != 0 && !comm_->abortFlag.load() && !comm_->revoked.load())
      failed = failComm(ncclRemoteError, "a GPU kernel found a connection closed by a peer "
                                         "(the peer failed or aborted)");
    else if (busy && now - lastCheck >= comm_->settings.peerCheckMs) {
      lastCheck = now;
      std::unique_lock<std::mutex> exec(comm_->execMutex, std::try_to_lock);
      std::string why;
      int dead = -1;
      if (exec.owns_lock())
        for (int p = 0; p < comm_->nranks && dead < 0; ++p)
          if (p != comm_->rank && comm_->checkPeer(p, &why) != ncclSuccess) dead = p;
      if (exec.owns_lock()) exec.unlock();
      const int64_t stalled = now - stallStart;
      if (dead >= 0) failed = failComm(ncclRemoteError, why);
      else if (comm_->settings.timeoutMs > 0 && stalled >= comm_->settings.timeoutMs)
        failed = failComm(ncclSystemError,
                          "no progress on the GPU for " + std::to_string(stalled) +
                              " ms (BRAID_TIMEOUT_MS)");
    }
    lock.lock();
  }
}

}  // namespace braid
