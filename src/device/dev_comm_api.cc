// The device communicator of NCCL 2.30's device API: ncclDevCommCreate / Destroy, the
// host forms of the team functions and the barrier requirement helpers
// (include/nccl_device/core.h, lsa_barrier.h).
//
// ncclDevCommCreate is collective. It plans the resource window (dev_comm_plan.h:
// requirements Braid cannot meet fail here, naming the field), allocates it with
// vmm::memAlloc, zeroes it, registers it as a window of the communicator (so every LSA
// member's part is mapped at the window's stride, lsa_window.h) and fills NVIDIA's
// ncclDevComm layout. Inside ncclGroupStart/End the collective part runs at
// ncclGroupEnd, which fills *outDevComm. The abort word kernels poll is one host-mapped
// word per communicator, set by ncclCommAbort / ncclCommRevoke (Comm::wakeSelf).
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "nccl_device/core.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/group.h"
#include "src/core/registration.h"
#include "src/os/cuda_rt.h"
#include "src/device/dev_comm_plan.h"
#include "src/device/dev_comms.h"
#include "src/device/lsa_window.h"
#include "src/device/vmm.h"
#include "src/device/window_table.h"
#include "src/rma/rma.h"

using namespace braid;

namespace {

/// What a device communicator owns, by its resource window's handle.
struct DevCommRecord {
  Comm* comm = nullptr;
  void* buffer = nullptr;
  int device = -1;
};

struct DevComms {
  std::mutex mu;
  std::unordered_map<const void*, DevCommRecord> byWindow;
};

DevComms& devComms() {
  static DevComms* d = new DevComms();  // never destroyed: atexit paths may use it
  return *d;
}

uint32_t reciprocal(uint32_t x) {
  return x == 0 ? 0 : UINT32_MAX / x + ((x & (x - 1)) == 0 ? 1 : 0);
}

/// The communicator's host-mapped abort word (made once), and its device address. It
/// is published before the flags are looked at again, so an abort racing with its
/// creation still reaches it (Comm::wakeSelf stores 1 into a published word).
ncclResult_t abortWord(Comm* c, uint32_t** dev) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (c->devApiAbortHost.load() == nullptr) {
    void* host = nullptr;
    void* d = nullptr;
    BRAID_CHECK(cudart::hostAllocMapped(&host, &d, sizeof(uint32_t)));
    *static_cast<uint32_t*>(host) = 0;
    c->devApiAbortDev = d;
    c->devApiAbortHost.store(static_cast<uint32_t*>(host));
    if (c->abortFlag.load() || c->revoked.load())
      __atomic_store_n(static_cast<uint32_t*>(host), 1u, __ATOMIC_RELEASE);
  }
  *dev = static_cast<uint32_t*>(c->devApiAbortDev);
  return ncclSuccess;
}

/// The collective part, in the comm's order (`ticket`, taken at the call): allocate,
/// register and map the resource window, fill *out.
ncclResult_t buildDevComm(Comm* c, const DevResourcePlan& plan, ncclDevComm_t* out,
                          uint64_t ticket) {
  TurnGuard turn(c, ticket);
  if (!c->waitTurn(ticket))
    return setError(ncclInvalidUsage, c, "ncclDevCommCreate: the communicator (%s) was "
                    "aborted or revoked", c->who().c_str());
  const LsaTeam team = lsaTeamOf(c);
  cudart::DeviceScope scope;
  BRAID_CHECK(scope.enter(c->cudaDev));
  uint32_t* abortDev = nullptr;
  BRAID_CHECK(abortWord(c, &abortDev));
  ncclDevCommWindowTable* table = nullptr;
  BRAID_CHECK(windowTableHead(c, c->cudaDev, &table));
  const size_t bytes = plan.bytes > 0 ? plan.bytes : 128;
  void* buf = nullptr;
  BRAID_CHECK(vmm::memAlloc(&buf, bytes, c->cudaDev));
  Registration* r = nullptr;
  ncclResult_t res = cudart::memsetDevice(buf, 0, bytes);
  if (res == ncclSuccess) res = addRegistration(c, buf, bytes, /*window=*/true, 0, &r);
  if (res == ncclSuccess) r->internal = true;
  if (res == ncclSuccess && !r->lsa)
    res = setError(ncclInternalError, c, "ncclDevCommCreate: the resource window of %s has no "
                   "device view", c->who().c_str());
  if (res == ncclSuccess) res = rmaExchangeWindowInTurn(c, r);
  if (res == ncclSuccess) res = r->lsa->map(c, *r);
  if (res == ncclSuccess && r->lsa->flat().base == nullptr)
    res = setError(ncclUnhandledCudaError, c, "ncclDevCommCreate: %s could not map the LSA "
                   "team's resource buffers (see the INFO log, NCCL_DEBUG_SUBSYS=REG)",
                   c->who().c_str());
  if (res != ncclSuccess) {
    if (r != nullptr) (void)removeRegistration(c, r->handle, true, "ncclDevCommCreate");
    (void)vmm::memFree(buf);
    return res;
  }
  ncclDevComm_t d;
  std::memset(&d, 0, sizeof d);
  d.magic = NCCL_API_MAGIC;
  d.version = NCCL_VERSION_CODE;
  d.rank = c->rank;
  d.nRanks = c->nranks;
  d.nRanks_rcp32 = reciprocal(uint32_t(c->nranks));
  d.lsaRank = team.rank;
  d.lsaSize = team.size;
  d.lsaSize_rcp32 = reciprocal(uint32_t(team.size));
  d.windowTable = table;
  d.resourceWindow = static_cast<ncclWindow_t>(r->handle);
  d.resourceWindow_inlined.lsaFlatBase = r->lsa->flat().base;
  d.resourceWindow_inlined.stride4G = r->lsa->flat().stride4G;
  d.lsaBarrier = plan.lsaBarrier;
  d.hybridLsaBarrier = plan.hybridLsaBarrier;
  d.abortFlag = abortDev;
  for (const DevResourcePlan::Assign& a : plan.user)
    if (a.out != nullptr) *a.out = a.handle;
  {
    DevComms& g = devComms();
    std::lock_guard<std::mutex> lock(g.mu);
    g.byWindow[r->handle] = DevCommRecord{c, buf, c->cudaDev};
  }
  *out = d;
  return ncclSuccess;
}

}  // namespace

void braid::forgetDevComms(const Comm* c) {
  std::vector<DevCommRecord> mine;
  {
    DevComms& g = devComms();
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto it = g.byWindow.begin(); it != g.byWindow.end();) {
      if (it->second.comm != c) {
        ++it;
        continue;
      }
      mine.push_back(it->second);
      it = g.byWindow.erase(it);
    }
  }
  for (const DevCommRecord& rec : mine) {
    cudart::DeviceScope scope;
    (void)scope.enter(rec.device);
    (void)vmm::memFree(rec.buffer);  // its flat mapping goes with the comm's registrations
  }
}

extern "C" {

ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                               ncclDevComm_t* outDevComm) {
  BRAID_CHECK(checkCommUsable(comm, "ncclDevCommCreate"));
  Comm* c = asComm(comm);
  if (reqs == nullptr || outDevComm == nullptr)
    return setError(ncclInvalidArgument, c, "ncclDevCommCreate: %s is NULL",
                    reqs == nullptr ? "reqs" : "outDevComm");
  const LsaTeam team = lsaTeamOf(c);
  DevResourcePlan plan;
  ncclResult_t code = ncclSuccess;
  std::string why;
  if (!planDevResources(*reqs, c->nranks, team.size, &plan, &code, &why))
    return setError(code, c, "ncclDevCommCreate (%s): %s", c->who().c_str(), why.c_str());
  if (!lsaDevicesReachable(c, &why))
    return setError(ncclInvalidUsage, c, "ncclDevCommCreate (%s): the device API needs CUDA "
                    "devices that reach each other within the LSA team: %s",
                    c->who().c_str(), why.c_str());
  if (!vmm::supported(c->cudaDev))
    return setError(ncclInvalidUsage, c, "ncclDevCommCreate (%s): device %d does not support "
                    "CUDA virtual memory management, which the device API's windows need",
                    c->who().c_str(), c->cudaDev);
  std::memset(outDevComm, 0, sizeof *outDevComm);
  // The exchange's place in the comm's order is taken now (grouped creations and window
  // registrations run concurrently at ncclGroupEnd).
  const uint64_t ticket = c->issue();
  if (inGroup()) {
    groupDeferInit([c, plan, outDevComm, ticket]() {
      return buildDevComm(c, plan, outDevComm, ticket);
    });
    return ncclSuccess;
  }
  return buildDevComm(c, plan, outDevComm, ticket);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  BRAID_CHECK(checkComm(comm, "ncclDevCommDestroy"));
  Comm* c = asComm(comm);
  if (devComm == nullptr)
    return setError(ncclInvalidArgument, c, "ncclDevCommDestroy: devComm is NULL");
  DevComms& g = devComms();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.byWindow.find(devComm->resourceWindow);
  if (it == g.byWindow.end() || it->second.comm != c)
    return setError(ncclInvalidArgument, c, "ncclDevCommDestroy: devComm was not made by "
                    "ncclDevCommCreate on this communicator (or was destroyed already)");
  const DevCommRecord rec = it->second;
  cudart::DeviceScope scope;
  BRAID_CHECK(scope.enter(rec.device));
  BRAID_CHECK(removeRegistration(c, devComm->resourceWindow, true, "ncclDevCommDestroy"));
  g.byWindow.erase(it);
  return vmm::memFree(rec.buffer);
}

ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                ncclDevComm_t* outDevComm) {
  return ncclDevCommCreate(comm, reqs, outDevComm);
}
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  return ncclDevCommDestroy(comm, devComm);
}

// ---- teams of a host communicator (a bad comm gives the team of one) ----------------

ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  if (checkComm(comm, "ncclTeamWorld") != ncclSuccess) return ncclTeam_t{1, 0, 1};
  const Comm* c = asComm(comm);
  return ncclTeam_t{c->nranks, c->rank, 1};
}
ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  if (checkComm(comm, "ncclTeamLsa") != ncclSuccess) return ncclTeam_t{1, 0, 1};
  const LsaTeam t = lsaTeamOf(asComm(comm));
  return ncclTeam_t{t.size, t.rank, 1};
}
ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  if (checkComm(comm, "ncclTeamRail") != ncclSuccess) return ncclTeam_t{1, 0, 1};
  const Comm* c = asComm(comm);
  const LsaTeam t = lsaTeamOf(c);
  return ncclTeam_t{c->nranks / t.size, c->rank / t.size, t.size};
}
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (checkComm(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
  return asComm(comm)->rank + (rank - team.rank) * team.stride;
}
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (checkComm(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
  return lsaTeamOf(asComm(comm)).rank + (rank - team.rank) * team.stride;
}

// ---- barrier requirements --------------------------------------------------------

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq) {
  if (outHandle == nullptr || outReq == nullptr)
    return setError(ncclInvalidArgument, nullptr, "ncclLsaBarrierCreateRequirement: %s is NULL",
                    outHandle == nullptr ? "outHandle" : "outReq");
  if (nBarriers < 0 || team.nRanks < 1)
    return setError(ncclInvalidArgument, nullptr, "ncclLsaBarrierCreateRequirement: nBarriers "
                    "%d / team of %d ranks", nBarriers, team.nRanks);
  std::memset(outReq, 0, sizeof *outReq);
  outReq->bufferSize = lsaBarrierBytes(nBarriers, team.nRanks);
  outReq->bufferAlign = 128;
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->bufHandle = 0;
  outHandle->nBarriers = nBarriers;
  return ncclSuccess;
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq) {
  BRAID_CHECK(checkComm(comm, "ncclGinBarrierCreateRequirement"));
  Comm* c = asComm(comm);
  if (outHandle == nullptr || outReq == nullptr)
    return setError(ncclInvalidArgument, c, "ncclGinBarrierCreateRequirement: %s is NULL",
                    outHandle == nullptr ? "outHandle" : "outReq");
  if (team.nRanks > 1 && nBarriers > 0)
    return setError(ncclInvalidUsage, c, "ncclGinBarrierCreateRequirement: a GIN barrier over "
                    "%d ranks needs GIN, which Braid's device communicator does not offer",
                    team.nRanks);
  std::memset(outReq, 0, sizeof *outReq);
  outHandle->signal0 = 0;
  outHandle->unused = 0;
  return ncclSuccess;
}

}  // extern "C"
