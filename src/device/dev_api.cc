// The host functions of NCCL 2.30's device API that answer questions about a
// communicator and its windows (include/nccl_device/core.h): properties, and device
// pointers to LSA members' parts of a window. The device communicator itself is
// dev_comm_api.cc.
#include "nccl_device/core.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/registration.h"
#include "src/device/lsa_window.h"
#include "src/device/vmm.h"

using namespace braid;

namespace {

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
  // An LSA member: its part as device code reaches it (the flat mapping); else a peer
  // of this process: its own address.
  const LsaTeam t = lsaTeamOf(c);
  if (w->lsa && w->lsa->flat().base != nullptr && peer >= t.first && peer < t.first + t.size)
    *outPtr = w->lsa->flat().base + uint64_t(peer - t.first) * (uint64_t(w->lsa->flat().stride4G) << 32) + offset;
  else if (c->peers[size_t(peer)].processHash == c->peers[size_t(c->rank)].processHash)
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
  std::string why;
  props->deviceApiSupport = lsaDevicesReachable(c, &why) && vmm::supported(c->cudaDev);
  props->multimemSupport = false;
  if (props->version > NCCL_VERSION(2, 29, 3)) {  // fields NCCL fills from 2.29.4 on
    props->ginType = NCCL_GIN_TYPE_NONE;
    props->railedGinType = NCCL_GIN_TYPE_NONE;
    props->hostRmaSupport = true;
    props->nLsaTeams = c->nranks / lsaTeamOf(c).size;
  }
  return ncclSuccess;
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
  const LsaTeam t = lsaTeamOf(w->comm);
  if (lsaRank < 0 || lsaRank >= t.size)
    return setError(ncclInvalidArgument, w->comm, "%s: lsaRank %d is outside the load/store "
                    "team [0, %d) (the ranks of this process next to this rank)", call, lsaRank,
                    t.size);
  return peerPointer(w, offset, t.first + lsaRank, outPtr, call);
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
