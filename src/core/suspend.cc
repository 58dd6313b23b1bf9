// ncclCommSuspend / ncclCommResume / ncclCommMemStats (NCCL 2.30).
//
// Suspend is collective: in the communicator's issue order, once the work issued before
// it has finished (device work drained), the ranks agree on the flags over the
// bootstrap; from then on the communicator refuses new work (checkCommUsable) until
// ncclCommResume, also collective. With NCCL_SUSPEND_MEM every rank releases what the
// communicator made on first use and can make again: its connections (host FIFOs: heap,
// shared-memory segments, socket staging; device FIFOs and pinned staging), the CUDA
// executor's state (plan images, scratch, control words) and the cached plans. The
// bootstrap, the peer table and registrations stay. After resume the next operations
// make them again, as the first operations after init did.
//
// ncclCommMemStats counts the FIFO memory of the connection ends this rank holds (each
// end counts the region it allocated or maps, so a shared-memory FIFO counts at both
// ends); nothing of it persists through a suspend.
#include <cstdint>
#include <mutex>
#include <vector>

#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/group.h"
#include "src/os/cuda_rt.h"
#include "src/device/device_comm.h"
#include "src/exec/fifo.h"
#include "transports/collnet/collnet_state.h"

using namespace braid;

namespace {

/// Bytes of the FIFO regions behind this rank's connection ends (execMutex held).
uint64_t connectionBytes(const Comm* c) {
  const FifoGeometry& g = c->settings.geometry;
  const uint64_t perEnd = FifoLayout::bytesFor(g.nslots, g.slotBytes);
  const size_t ends = c->sends.size() + c->recvs.size() + c->devSends.size() + c->devRecvs.size();
  return perEnd * uint64_t(ends);
}

/// Drops what the communicator made on first use (execMutex held, no work running).
void releaseMemory(Comm* c) {
  c->drainConnections();  // host and device ends (device work is done: suspend drained)
  if (c->device || !c->devSends.empty() || !c->devRecvs.empty()) {
    cudart::DeviceScope scope;  // the caller's device again afterwards
    (void)scope.enter(c->cudaDev);
    if (c->device) c->device->shutdown(false);  // drained already: nothing to wait for
    c->devSends.clear();
    c->devRecvs.clear();
    c->device.reset();  // made again by the next op on device buffers
  }
  c->sends.clear();
  c->recvs.clear();
  // The switch connections stay (their collComms are collective to make again): only
  // the executor's ends go, put back at once.
  if (c->collnet) c->collnet->attachEnds(c);
  c->planCache.clear();
}

/// State checks shared by suspend and resume, beyond checkComm.
ncclResult_t checkHealthy(Comm* c, const char* call) {
  const int err = c->asyncError.load();
  if (err == ncclInProgress)
    return setError(ncclInvalidUsage, c, "%s: communicator (%s) is still initialising", call,
                    c->who().c_str());
  if (c->abortFlag.load() || c->revoked.load() || err != ncclSuccess)
    return setError(err != ncclSuccess ? ncclResult_t(err) : ncclInvalidUsage, c,
                    "%s: communicator (%s) was aborted, revoked or failed earlier", call,
                    c->who().c_str());
  if (c->finalized)
    return setError(ncclInvalidUsage, c, "%s: communicator (%s) was finalized", call,
                    c->who().c_str());
  if (inGroup())
    return setError(ncclInvalidUsage, c, "%s: cannot be called between ncclGroupStart and "
                    "ncclGroupEnd", call);
  return ncclSuccess;
}

/// Runs `fn` in the communicator's issue order once everything issued before has
/// finished, with its execution lock held, after every rank has exchanged `word`
/// (`words` gets every rank's).
template <class Fn>
ncclResult_t collectiveStep(Comm* c, const char* call, int32_t word, Fn fn) {
  const uint64_t ticket = c->issue();
  TurnGuard turn(c, ticket);
  if (!c->waitTurn(ticket))
    return setError(ncclInvalidUsage, c, "%s: communicator (%s) was aborted or revoked while "
                    "its earlier work was running", call, c->who().c_str());
  std::lock_guard<std::mutex> lock(c->execMutex);
  if (c->device && !c->device->drain(c->settings.timeoutMs))
    return setError(ncclSystemError, c, "%s: %s: device work made no progress for %d ms "
                    "(BRAID_TIMEOUT_MS)", call, c->who().c_str(), c->settings.timeoutMs);
  std::vector<int32_t> words(size_t(c->nranks), 0);
  words[size_t(c->rank)] = word;
  BRAID_CHECK(c->bootstrap->allGather(words.data(), sizeof(int32_t)));
  return fn(words);
}

}  // namespace

extern "C" {

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  const char* call = "ncclCommSuspend";
  BRAID_CHECK(checkCommUsable(comm, call));  // refuses a suspended comm too
  Comm* c = asComm(comm);
  if ((flags & ~NCCL_SUSPEND_MEM) != 0)
    return setError(ncclInvalidArgument, c, "%s: unknown flags 0x%x (known: NCCL_SUSPEND_MEM "
                    "= 0x%x)", call, unsigned(flags & ~NCCL_SUSPEND_MEM), NCCL_SUSPEND_MEM);
  BRAID_CHECK(checkHealthy(c, call));
  return collectiveStep(c, call, flags, [&](const std::vector<int32_t>& all) {
    for (int r = 0; r < c->nranks; ++r)
      if (all[size_t(r)] != flags)
        return setError(ncclInvalidUsage, c, "%s: rank %d passed flags 0x%x but rank %d 0x%x; "
                        "every rank must pass the same flags (not suspended)", call, r,
                        unsigned(all[size_t(r)]), c->rank, unsigned(flags));
    const uint64_t before = connectionBytes(c);
    if (flags & NCCL_SUSPEND_MEM) releaseMemory(c);
    c->suspended.store(true);
    BRAID_INFO(kLogInit, "%s: %s suspended (flags 0x%x, %llu bytes of connections released)",
               call, c->who().c_str(), unsigned(flags),
               static_cast<unsigned long long>(before - connectionBytes(c)));
    return ncclSuccess;
  });
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  const char* call = "ncclCommResume";
  BRAID_CHECK(checkComm(comm, call));
  Comm* c = asComm(comm);
  BRAID_CHECK(checkHealthy(c, call));
  if (!c->suspended.load())
    return setError(ncclInvalidUsage, c, "%s: communicator (%s) is not suspended", call,
                    c->who().c_str());
  // Every rank has released before any makes new connections: the exchange is a barrier.
  return collectiveStep(c, call, 1, [&](const std::vector<int32_t>&) {
    c->suspended.store(false);
    BRAID_INFO(kLogInit, "%s: %s resumed (connections are made again on first use)", call,
               c->who().c_str());
    return ncclSuccess;
  });
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  const char* call = "ncclCommMemStats";
  BRAID_CHECK(checkComm(comm, call));
  Comm* c = asComm(comm);
  if (value == nullptr) return setError(ncclInvalidArgument, c, "%s: value is NULL", call);
  if (c->asyncError.load() == ncclInProgress)
    return setError(ncclInvalidUsage, c, "%s: communicator (%s) is still initialising", call,
                    c->who().c_str());
  uint64_t releasable;
  {
    std::lock_guard<std::mutex> lock(c->execMutex);
    releasable = connectionBytes(c);
  }
  switch (stat) {
    case ncclStatGpuMemSuspend:
      *value = releasable;
      return ncclSuccess;
    case ncclStatGpuMemSuspended:
      *value = c->suspended.load() ? 1 : 0;
      return ncclSuccess;
    case ncclStatGpuMemPersist:
      *value = 0;  // nothing of the connections' memory survives a suspend
      return ncclSuccess;
    case ncclStatGpuMemTotal:
      *value = releasable;
      return ncclSuccess;
  }
  return setError(ncclInvalidArgument, c, "%s: unknown stat %d (valid: 0..3)", call, int(stat));
}

}  // extern "C"
