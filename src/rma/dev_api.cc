// The host functions of NCCL 2.30's device API (include/braid/nccl_device_host.h).
// Braid has no device-side communicator yet: these answer what a host can know about
// windows (which peers this process can address) and refuse ncclDevCommCreate clearly.
#include "braid/nccl_device_host.h"

#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/registration.h"

using namespace braid;

namespace {

/// The load/store team: the ranks of this process contiguous with `rank` (Braid's
/// stand-in for NCCL's LSA team: memory every member can address directly).
void lsaTeam(const Comm* c, int* first, int* size) {
  const uint64_t me = c->peers[size_t(c->rank)].processHash;
  int lo = c->rank, hi = c->rank;
  while (lo > 0 && c->peers[size_t(lo - 1)].processHash == me) --lo;
  while (hi + 1 < c->nranks && c->peers[size_t(hi + 1)].processHash == me) ++hi;
  *first = lo;
  *size = hi - lo + 1;
}

/// The window behind a handle, exchanged with every rank (else an error naming call).
ncclResult_t windowOf(ncclWindow_t window, void** outPtr, const char* call,
                      const Registration** out) {
  if (outPtr == nullptr) return setError(ncclInvalidArgument, nullptr, "%s: outPtr is NULL", call);
  *outPtr = nullptr;
  if (window == nullptr) return setError(ncclInvalidArgument, nullptr, "%s: window is NULL", call);
  const Registration* w = findWindow(window);
  if (w == nullptr)
    return setError(ncclInvalidArgument, nullptr, "%s: window %p is not a live window "
                    "(ncclCommWindowRegister)", call, static_cast<void*>(window));
  if (!w->exchanged)
    return setError(ncclInvalidUsage, w->comm, "%s: window %p is still being registered",
                    call, static_cast<void*>(window));
  *out = w;
  return ncclSuccess;
}

/// peer's part of w at offset if this process can address it, else null.
ncclResult_t peerPointer(const Registration* w, size_t offset, int peer, void** outPtr,
                         const char* call) {
  const Comm* c = w->comm;
  const WindowPeer& p = w->peers[size_t(peer)];
  if (offset > p.size)
    return setError(ncclInvalidArgument, w->comm, "%s: offset %zu is beyond rank %d's window "
                    "(%llu bytes)", call, offset, peer, static_cast<unsigned long long>(p.size));
  if (c->peers[size_t(peer)].processHash == c->peers[size_t(c->rank)].processHash)
    *outPtr = reinterpret_cast<char*>(p.addr) + offset;
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  BRAID_CHECK(checkCommUsable(comm, "ncclCommQueryProperties"));
  Comm* c = asComm(comm);
  if (props == nullptr)
    return setError(ncclInvalidArgument, c, "ncclCommQueryProperties: props is NULL");
  if (props->magic != NCCL_API_MAGIC)
    return setError(ncclInvalidUsage, c, "ncclCommQueryProperties: props must be initialised "
                    "with NCCL_COMM_PROPERTIES_INITIALIZER");
  props->rank = c->rank;
  props->nRanks = c->nranks;
  props->cudaDev = c->cudaDev;
  props->nvmlDev = c->cudaDev;
  props->deviceApiSupport = false;
  props->multimemSupport = false;
  if (props->version > NCCL_VERSION(2, 29, 3)) {  // fields NCCL fills from 2.29.4 on
    int first = 0, size = 1;
    lsaTeam(c, &first, &size);
    props->ginType = NCCL_GIN_TYPE_NONE;
    props->railedGinType = NCCL_GIN_TYPE_NONE;
    props->hostRmaSupport = true;
    props->nLsaTeams = c->nranks % size == 0 ? c->nranks / size : 1;
  }
  return ncclSuccess;
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                               ncclDevComm_t* outDevComm) {
  BRAID_CHECK(checkComm(comm, "ncclDevCommCreate"));
  Comm* c = asComm(comm);
  if (reqs == nullptr || outDevComm == nullptr)
    return setError(ncclInvalidArgument, c, "ncclDevCommCreate: %s is NULL",
                    reqs == nullptr ? "reqs" : "outDevComm");
  return setError(ncclInvalidUsage, c, "ncclDevCommCreate: Braid has no device-side "
                  "communicator (the NCCL device API: LSA/GIN/multimem kernels) yet; use the "
                  "host API (collectives, send/recv, ncclPutSignal/ncclWaitSignal)");
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  BRAID_CHECK(checkComm(comm, "ncclDevCommDestroy"));
  (void)devComm;
  return setError(ncclInvalidUsage, asComm(comm), "ncclDevCommDestroy: Braid has no "
                  "device-side communicator yet (ncclDevCommCreate cannot have made one)");
}

ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  const Registration* w = nullptr;
  BRAID_CHECK(windowOf(window, outPtr, "ncclGetLsaMultimemDevicePointer", &w));
  (void)offset;
  return ncclSuccess;  // no multicast memory in Braid: NULL, as NCCL without NVLS
}

ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                          ncclMultimemHandle_t multimem, void** outPtr) {
  const Registration* w = nullptr;
  BRAID_CHECK(windowOf(window, outPtr, "ncclGetMultimemDevicePointer", &w));
  (void)offset;
  if (multimem.mcBasePtr == nullptr)
    return setError(ncclInvalidArgument, w->comm, "ncclGetMultimemDevicePointer: "
                    "multimem.mcBasePtr is NULL");
  return ncclSuccess;  // no multicast memory in Braid: NULL
}

ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                     void** outPtr) {
  const char* call = "ncclGetLsaDevicePointer";
  const Registration* w = nullptr;
  BRAID_CHECK(windowOf(window, outPtr, call, &w));
  int first = 0, size = 1;
  lsaTeam(w->comm, &first, &size);
  if (lsaRank < 0 || lsaRank >= size)
    return setError(ncclInvalidArgument, w->comm, "%s: lsaRank %d is outside the load/store "
                    "team [0, %d) (the ranks of this process next to this rank)", call, lsaRank,
                    size);
  return peerPointer(w, offset, first + lsaRank, outPtr, call);
}

ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                      void** outPtr) {
  const char* call = "ncclGetPeerDevicePointer";
  const Registration* w = nullptr;
  BRAID_CHECK(windowOf(window, outPtr, call, &w));
  if (peer < 0 || peer >= w->comm->nranks)
    return setError(ncclInvalidArgument, w->comm, "%s: peer %d is out of range for %d ranks",
                    call, peer, w->comm->nranks);
  return peerPointer(w, offset, peer, outPtr, call);
}

// The profiler-style twins NVIDIA exports for every API function.
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  return ncclCommQueryProperties(comm, props);
}
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                ncclDevComm_t* outDevComm) {
  return ncclDevCommCreate(comm, reqs, outDevComm);
}
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  return ncclDevCommDestroy(comm, devComm);
}
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  return ncclGetLsaMultimemDevicePointer(window, offset, outPtr);
}
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                           ncclMultimemHandle_t multimem, void** outPtr) {
  return ncclGetMultimemDevicePointer(window, offset, multimem, outPtr);
}
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                      void** outPtr) {
  return ncclGetLsaDevicePointer(window, offset, lsaRank, outPtr);
}
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                       void** outPtr) {
  return ncclGetPeerDevicePointer(window, offset, peer, outPtr);
}

}  // extern "C"
