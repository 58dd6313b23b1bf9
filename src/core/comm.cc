#include "src/core/comm.h"

#include "src/exec/board.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <vector>

#include <unistd.h>

#include "src/core/comm_registry.h"
#include "src/config/error.h"
#include "src/core/registration.h"
#include "src/os/cuda_rt.h"
#include "src/device/dev_comms.h"
#include "src/device/device_comm.h"
#include "src/device/window_table.h"
#include "src/diag/flight_recorder.h"
#include "src/os/shm_segment.h"
#include "transports/collnet/collnet_state.h"

namespace braid {

Comm::Comm() { registerComm(this); }

Comm::~Comm() {
  releaseResources();
  forgetErrors(this);
  unregisterComm(this);
}

void Comm::drainConnections() {
  using Clock = std::chrono::steady_clock;
  const int timeoutMs = settings.bootstrapTimeoutMs < 0 ? 60000 : settings.bootstrapTimeoutMs;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  // Round robin: every end's last steps (a flush, goodbyes) run at the same time.
  std::vector<ConnResource*> left;
  for (const auto& kv : sends)
    if (kv.second.res) left.push_back(kv.second.res.get());
  for (const auto& kv : recvs)
    if (kv.second.res) left.push_back(kv.second.res.get());
  for (const auto& kv : devSends)
    if (kv.second.res) left.push_back(kv.second.res.get());
  for (const auto& kv : devRecvs)
    if (kv.second.res) left.push_back(kv.second.res.get());
  for (;;) {
    left.erase(std::remove_if(left.begin(), left.end(), [](ConnResource* r) { return r->drained(); }),
               left.end());
    if (left.empty() || Clock::now() >= deadline) return;
    usleep(100);
  }
}

void Comm::releaseResources() {
  if (initThread.joinable()) initThread.join();
  // Device work first: finished (destroy) or stopped (abort) before its connections,
  // images and control words go.
  const bool deviceState = device || !devSends.empty() || !devRecvs.empty();
  if (device) {
    cudart::DeviceScope scope;  // the caller's device again afterwards
    (void)scope.enter(cudaDev);
    device->shutdown(abortFlag.load() || asyncError.load() != ncclSuccess);
  }
  recorder.reset();  // off the SIGUSR1 list
  // One-sided state first (its agent entry points at this comm), then connections (they
  // may reference proxy state; host and device ends drain together), then the bootstrap.
  rma.reset();
  if (!abortFlag.load()) drainConnections();
  if (deviceState) {
    cudart::DeviceScope scope;
    (void)scope.enter(cudaDev);
    devSends.clear();
    devRecvs.clear();
    device.reset();
  }
  if (uint32_t* w = devApiAbortHost.exchange(nullptr)) {  // releaseResources may run twice
    devApiAbortDev = nullptr;
    (void)cudart::hostFree(w);
  }
  sends.clear();
  recvs.clear();
  // Segments a peer of this machine created and died before its partner mapped them.
  if (!peers.empty() && size_t(rank) < peers.size()) {
    std::vector<SegmentOwner> owners;
    for (const PeerInfo& p : peers)
      if (p.machineHash == peers[size_t(rank)].machineHash)
        owners.push_back({p.pid, p.rank, p.pidNamespace});
    removeDeadOwnersSegments(commHash, owners);
  }
  collnet.reset();  // after the ends that point at its ports
  board.reset();
  bootstrap.reset();
  planCache.clear();
  forgetDevComms(this);  // before the registrations: their resource windows are among them
  windowTableForget(this);
  forgetRegistrations(this);
  peers.clear();
  peers.shrink_to_fit();
  userOps.clear();
  userOps.shrink_to_fit();
  magic.store(kDeadMagic);
}

std::mutex& issueOrderMutex() {
  static std::mutex* mu = new std::mutex();  // leaked on purpose: used at exit
  return *mu;
}

uint64_t Comm::issue() {
  std::lock_guard<std::mutex> lock(issueMu);
  return takeTicket();
}

bool Comm::waitTurn(uint64_t ticket, bool evenIfRevoked, const std::atomic<bool>* alsoAbort) {
  // Our turn already (the usual case: one thread, no queued work): no lock.
  if (servingNow_.load(std::memory_order_acquire) >= ticket) return true;
  std::unique_lock<std::mutex> lock(turnMu_);
  ++turnWaiters_;
  while (serving_ < ticket) {
    if (abortFlag.load() || (revoked.load() && !evenIfRevoked) ||
        (alsoAbort && alsoAbort->load())) {
      --turnWaiters_;
      return false;
    }
    // Short waits: abort and revoke set their flags without notifying us.
    turnCv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  --turnWaiters_;
  return true;
}

void Comm::endTurn(uint64_t ticket) {
  bool waiters = false;
  {
    std::lock_guard<std::mutex> lock(turnMu_);
    if (serving_ < ticket + 1) serving_ = ticket + 1;
    servingNow_.store(serving_, std::memory_order_release);
    waiters = turnWaiters_ > 0;
  }
  if (waiters) turnCv_.notify_all();
}

void Comm::retire(Comm* c) {
  c->releaseResources();
  static std::mutex mu;
  static auto* quarantine = new std::deque<Comm*>();  // leaked on purpose: used at exit
  std::lock_guard<std::mutex> lock(mu);
  quarantine->push_back(c);
  if (quarantine->size() > 4096) {
    Comm* oldest = quarantine->front();
    quarantine->pop_front();
    forgetErrors(oldest);
    delete oldest;
  }
}

FifoSender* Comm::sender(int peer, int channel) {
  auto it = sends.find(connKey(peer, channel));
  return it == sends.end() ? nullptr : &it->second.fifo;
}

FifoReceiver* Comm::receiver(int peer, int channel) {
  auto it = recvs.find(connKey(peer, channel));
  return it == recvs.end() ? nullptr : &it->second.fifo;
}

uint64_t Comm::directMinBytes(int peer, int channel) {
  auto it = sends.find(connKey(peer, channel));
  if (it == sends.end()) return UINT64_MAX;
  if (it->second.allowDirect) return 0;
  const std::atomic<uint32_t>* remote = it->second.remoteDirect;
  if (remote && remote->load(std::memory_order_acquire) == 1) return settings.cmaMinBytes;
  return UINT64_MAX;
}

ncclResult_t Comm::chooseTransport(int peer, Transport** out) {
  const PeerInfo& me = peers[rank];
  const PeerInfo& other = peers[peer];
  Transport* local = &localTransport();
  Transport* shm = &shmTransport();
  Transport* net = &netTransport();
  if (peer == rank) {
    *out = local;  // a rank's connection to itself is always in-process
    return ncclSuccess;
  }
  const std::string& forced = settings.forcedTransport;
  if (!forced.empty()) {
    Transport* t = forced == "local" ? local : forced == "shm" ? shm : net;  // net, socket
    if (!t->canConnect(me, other))
      return setError(ncclInvalidUsage, this,
                      "BRAID_TRANSPORT=%s cannot connect rank %d (pid %d on %s) and rank %d "
                      "(pid %d on %s)",
                      forced.c_str(), rank, me.pid, me.hostname, peer, other.pid,
                      other.hostname);
    *out = t;
    return ncclSuccess;
  }
  if (!settings.p2pDisable && local->canConnect(me, other)) *out = local;
  else if (!settings.shmDisable && shm->canConnect(me, other)) *out = shm;
  else *out = net;
  return ncclSuccess;
}

ncclResult_t Comm::chooseDeviceTransport(int peer, Transport** out) {
  const PeerInfo& me = peers[rank];
  const PeerInfo& other = peers[peer];
  Transport* p2p = &p2pTransport();
  Transport* shm = &shmTransport();
  Transport* net = &netTransport();
  const std::string& forced = settings.forcedTransport;
  Transport* t = nullptr;
  if (peer == rank || forced == "local") t = p2p;  // in-process: device memory as is
  else if (forced == "shm") t = shm;
  else if (settings.forcedNet()) t = net;
  if (t != nullptr) {
    if (!t->canConnect(me, other))
      return setError(ncclInvalidUsage, this,
                      "%s: cannot connect rank %d (GPU %d, pid %d on %s) and rank %d (GPU %d, "
                      "pid %d on %s) for device buffers with %s (BRAID_TRANSPORT='%s')",
                      who().c_str(), rank, me.cudaDev, me.pid, me.hostname, peer,
                      other.cudaDev, other.pid, other.hostname, t->name(), forced.c_str());
    *out = t;
    return ncclSuccess;
  }
  if (!settings.p2pDisable && p2p->canConnect(me, other)) *out = p2p;
  else if (!settings.shmDisable && shm->canConnect(me, other)) *out = shm;
  else *out = net;
  return ncclSuccess;
}

ConnTable::Announce Comm::announceSwitch(int channel, SwitchOp op, uint64_t bytes,
                                         const Reducer& red) {
  CollNetPort* port = collnet ? collnet->port(channel) : nullptr;
  return port ? port->announce(op, bytes, red) : Announce::kNoSwitch;
}

WakeWord* Comm::planWakeWord() const {
  return board && connsRing && !collnet ? &board->wake(rank) : nullptr;
}

void Comm::wakeSelf() const {
  // Kernels of the device API poll this word (abort and revoke come here).
  if (uint32_t* w = devApiAbortHost.load(); w != nullptr && (abortFlag.load() || revoked.load()))
    __atomic_store_n(w, 1u, __ATOMIC_RELEASE);
  // While an init is still running, its thread may be making the board: nobody sleeps
  // on it yet anyway.
  if (asyncError.load() != ncclInProgress && board) wakeRing(&board->wake(rank));
}

bool Comm::collnetSupports(ncclDataType_t type, ncclRedOp_t op) const {
  return collnet && collnet->supports(type, op);
}

ncclResult_t Comm::checkPeer(int peer, std::string* why) {
  auto check = [&](auto& table) {
    for (auto& kv : table) {
      if (int(uint32_t(kv.first)) != peer || !kv.second.res) continue;
      ncclResult_t r = kv.second.res->checkPeer(why);
      if (r != ncclSuccess) return r;
    }
    return ncclSuccess;
  };
  ncclResult_t r = check(sends);
  if (r == ncclSuccess) r = check(recvs);
  if (r == ncclSuccess) r = check(devSends);
  return r != ncclSuccess ? r : check(devRecvs);
}

void Comm::closeConnections(uint32_t why) {
  // Senders fence: a peer may be copying from a zero-copy entry pointing into a user
  // buffer that the failing op is about to hand back.
  for (auto& kv : sends) {
    SendSide& side = kv.second;
    if (!side.fifo.valid()) continue;
    side.fifo.closeAndFence(why, [&side] {
      std::string ignored;
      return side.res && side.res->checkPeer(&ignored) != ncclSuccess;
    });
  }
  for (auto& kv : recvs)
    if (kv.second.fifo.valid()) kv.second.fifo.close(why);
  if (device) device->closeConnections(why);
  // The switch must learn now, or the other nodes would wait for our messages until
  // their timeout: closing the collComms fails the switch groups for every member.
  if (collnet) collnet->abandon();
  // Ranks waiting for us on the flag board stop waiting (abort, revoke, fatal errors).
  if (board) board->markFailed(why == kFifoMismatch ? ncclInvalidUsage : ncclRemoteError);
}

ncclResult_t Comm::fatal(ncclResult_t code, const char* reason) {
  int expected = ncclSuccess;
  const bool first = asyncError.compare_exchange_strong(expected, code);
  // Not abortFlag: the bootstrap stays usable (ncclCommShrink after a failure). Peers
  // of a mismatch learn that it was one (their error is ncclInvalidUsage too).
  closeConnections(std::strcmp(reason, "mismatch") == 0 ? kFifoMismatch : kFifoSenderAborted);
  if (first && recorder) recorder->dump(reason);
  return code;
}

std::string Comm::who() const {
  char buf[96];
  snprintf(buf, sizeof(buf), "rank %d of %d, comm %p", rank, nranks,
           static_cast<const void*>(this));
  return buf;
}

ncclResult_t checkComm(ncclComm_t handle, const char* call) {
  if (handle == nullptr)
    return setError(ncclInvalidArgument, nullptr, "%s: comm is NULL", call);
  // Nothing is read through a handle this process did not make (and still holds).
  if (!knownComm(handle))
    return setError(ncclInvalidArgument, nullptr,
                    "%s: comm %p is not a valid communicator (never created by this process, "
                    "or destroyed long ago)", call, static_cast<void*>(handle));
  Comm* c = asComm(handle);
  uint64_t m = c->magic.load();
  if (m == Comm::kDeadMagic)
    return setError(ncclInvalidArgument, nullptr,
                    "%s: comm %p was destroyed (ncclCommDestroy / ncclCommAbort) and cannot "
                    "be used any more", call, static_cast<void*>(handle));
  if (m != Comm::kMagic)
    return setError(ncclInvalidArgument, nullptr,
                    "%s: comm %p is not a valid communicator (corrupted or never created)",
                    call, static_cast<void*>(handle));
  return ncclSuccess;
}

ncclResult_t checkCommUsable(ncclComm_t handle, const char* call) {
  BRAID_CHECK(checkComm(handle, call));
  Comm* c = asComm(handle);
  int err = c->asyncError.load();
  if (err == ncclInProgress)
    return setError(ncclInvalidUsage, c,
                    "%s: communicator (%s) is still initialising; poll "
                    "ncclCommGetAsyncError until it returns ncclSuccess",
                    call, c->who().c_str());
  if (c->revoked.load())
    return setError(ncclInvalidUsage, c, "%s: communicator (%s) was revoked", call,
                    c->who().c_str());
  if (c->abortFlag.load() || err != ncclSuccess)
    return setError(err != ncclSuccess ? ncclResult_t(err) : ncclInvalidUsage, c,
                    "%s: communicator (%s) was aborted or failed earlier (%s)", call,
                    c->who().c_str(), ncclGetErrorString(ncclResult_t(err)));
  if (c->finalized)
    return setError(ncclInvalidUsage, c, "%s: communicator (%s) was finalized", call,
                    c->who().c_str());
  if (c->suspended.load())
    return setError(ncclInvalidUsage, c,
                    "%s: communicator (%s) is suspended (ncclCommSuspend); call "
                    "ncclCommResume on every rank first", call, c->who().c_str());
  return ncclSuccess;
}

}  // namespace braid
