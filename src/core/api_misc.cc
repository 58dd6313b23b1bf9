// The rest of the API: version, error strings, memory, registration, windows,
// user reduction ops, groups, and the Braid extensions (include/braid/braid.h).
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "braid/braid.h"
#include "src/core/comm.h"
#include "src/core/comm_registry.h"
#include "src/config/error.h"
#include "src/core/group.h"
#include "src/core/host_stream.h"
#include "src/core/registration.h"
#include "src/device/lsa_window.h"
#include "src/device/window_table.h"
#include "src/os/cuda_rt.h"
#include "src/device/vmm.h"
#include "src/reduce/reducer.h"

using namespace braid;

namespace {

/// ncclMemAlloc's device allocations whose start had to be moved up to the window
/// alignment: aligned pointer -> what cudaMalloc returned.
struct ShiftedAllocs {
  std::mutex mu;
  std::unordered_map<void*, void*> base;
};

ShiftedAllocs& shiftedAllocs() {
  static ShiftedAllocs* s = new ShiftedAllocs();
  return *s;
}

constexpr size_t kMemAlign = NCCL_WIN_REQUIRED_ALIGNMENT;

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kMemAlign == 0; }

/// Device memory on the current device, aligned for windows: cuMem memory (vmm.h: the flat
/// window map can map it; exportable as a file descriptor) where the device has the VMM
/// API, else cudaMalloc (whose alignment is only 256 bytes in general). Legacy CUDA IPC
/// (cudaIpcGetMemHandle) refuses cuMem memory: registering it keeps no IPC handle.
ncclResult_t deviceMemAlloc(void** ptr, size_t size) {
  const int dev = cudart::currentDevice();
  if (vmm::supported(dev)) {
    BRAID_CHECK(vmm::memAlloc(ptr, size, dev));
    if (aligned(*ptr)) {
      BRAID_INFO(kLogAlloc, "ncclMemAlloc: %zu bytes of cuMem (VMM) memory on device %d: %p",
                 size, dev, *ptr);
      return ncclSuccess;
    }
    // Not expected: the start is aligned to the granularity (2 MiB on current GPUs).
    BRAID_INFO(kLogAlloc, "ncclMemAlloc: cuMem memory at %p is not %zu-byte aligned: cudaMalloc",
               *ptr, kMemAlign);
    BRAID_CHECK(vmm::memFree(*ptr));
    *ptr = nullptr;
  } else {
    BRAID_INFO(kLogAlloc, "ncclMemAlloc: device %d has no VMM API: cudaMalloc", dev);
  }
  size_t rounded = (size + kMemAlign - 1) / kMemAlign * kMemAlign;
  if (rounded < size) return setError(ncclInvalidArgument, nullptr, "ncclMemAlloc: size %zu "
                                      "overflows", size);
  void* p = nullptr;
  BRAID_CHECK(cudart::deviceAlloc(&p, rounded, "ncclMemAlloc"));
  if (aligned(p)) {
    *ptr = p;
    return ncclSuccess;
  }
  BRAID_CHECK(cudart::deviceFree(p));
  BRAID_CHECK(cudart::deviceAlloc(&p, rounded + kMemAlign, "ncclMemAlloc"));
  uintptr_t a = (reinterpret_cast<uintptr_t>(p) + kMemAlign - 1) / kMemAlign * kMemAlign;
  *ptr = reinterpret_cast<void*>(a);
  ShiftedAllocs& s = shiftedAllocs();
  std::lock_guard<std::mutex> lock(s.mu);
  s.base[*ptr] = p;
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return setError(ncclInvalidArgument, nullptr, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the Braid developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "timeout";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  Comm* c = knownComm(comm) && asComm(comm)->magic.load() == Comm::kMagic ? asComm(comm) : nullptr;
  return lastError(c);
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return setError(ncclInvalidArgument, nullptr, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  // With a usable GPU, device memory on the calling thread's current device (as NCCL).
  if (cudart::available() && cudart::currentDevice() >= 0) return deviceMemAlloc(ptr, size);
  // Host path: page-aligned host memory (suitable for windows and registration).
  if (posix_memalign(ptr, kMemAlign, size) != 0) {
    *ptr = nullptr;
    return setError(ncclSystemError, nullptr, "ncclMemAlloc: cannot allocate %zu bytes", size);
  }
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  if (vmm::owns(ptr)) return vmm::memFree(ptr);
  if (cudart::pointerKind(ptr, nullptr) == MemKind::kDevice) {
    void* base = ptr;
    {
      ShiftedAllocs& s = shiftedAllocs();
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.base.find(ptr);
      if (it != s.base.end()) {
        base = it->second;
        s.base.erase(it);
      }
    }
    return cudart::deviceFree(base);
  }
  free(ptr);
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  BRAID_CHECK(checkComm(comm, "ncclCommRegister"));
  Comm* c = asComm(comm);
  if (handle == nullptr) return setError(ncclInvalidArgument, c, "ncclCommRegister: handle is NULL");
  *handle = nullptr;
  if (buff == nullptr && size > 0)
    return setError(ncclInvalidArgument, c, "ncclCommRegister: buff is NULL");
  Registration* r = nullptr;
  BRAID_CHECK(addRegistration(c, buff, size, /*window=*/false, 0, &r));
  *handle = r;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  BRAID_CHECK(checkComm(comm, "ncclCommDeregister"));
  return removeRegistration(asComm(comm), handle, /*window=*/false, "ncclCommDeregister");
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  BRAID_CHECK(checkCommUsable(comm, "ncclCommWindowRegister"));
  Comm* c = asComm(comm);
  if (win == nullptr) return setError(ncclInvalidArgument, c, "ncclCommWindowRegister: win is NULL");
  *win = nullptr;
  if (buff == nullptr && size > 0)
    return setError(ncclInvalidArgument, c, "ncclCommWindowRegister: buff is NULL");
  if (winFlags & ~(NCCL_WIN_DEFAULT | NCCL_WIN_COLL_SYMMETRIC))
    return setError(ncclInvalidArgument, c, "ncclCommWindowRegister: unknown winFlags 0x%x", winFlags);
  if ((winFlags & NCCL_WIN_COLL_SYMMETRIC) && !aligned(buff))
    return setError(ncclInvalidArgument, c, "ncclCommWindowRegister: a symmetric window must be "
                    "%d-byte aligned (buff %p)", NCCL_WIN_REQUIRED_ALIGNMENT, buff);
  Registration* r = nullptr;
  BRAID_CHECK(addRegistration(c, buff, size, /*window=*/true, winFlags, &r));
  // Collective: every rank learns how to reach every rank's part of the window (and the
  // first window sets up the one-sided state, src/rma/rma.h). In a group the exchange
  // runs at ncclGroupEnd, concurrently with the group's other registrations and inits.
  // Device windows then map every LSA member's part for the device API. The exchange's
  // place in the comm's order is taken now: grouped registrations run concurrently at
  // ncclGroupEnd, and every rank must exchange its windows in the order it registered them.
  const uint64_t ticket = c->issue();
  auto exchange = [c, r, ticket]() {
    ncclResult_t res = rmaExchangeWindow(c, r, ticket);
    if (res == ncclSuccess && r->lsa) res = r->lsa->map(c, *r);
    if (res == ncclSuccess && r->lsa)
      res = windowTableAdd(c, r->device, r->buff, r->size, r->lsa->handle());
    if (res != ncclSuccess)
      (void)removeRegistration(c, r->handle, /*window=*/true, "ncclCommWindowRegister");
    return res;
  };
  if (inGroup()) {
    groupDeferInit(exchange);
  } else {
    BRAID_CHECK(exchange());
  }
  *win = static_cast<ncclWindow_t>(r->handle);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  BRAID_CHECK(checkComm(comm, "ncclCommWindowDeregister"));
  Comm* c = asComm(comm);
  const Registration* r = findWindow(win);
  if (r != nullptr && r->comm == c && r->internal)
    return setError(ncclInvalidUsage, c, "ncclCommWindowDeregister: win %p is a device "
                    "communicator's resource window: ncclDevCommDestroy releases it",
                    static_cast<void*>(win));
  windowTableRemove(c, win);
  return removeRegistration(c, reinterpret_cast<const void*>(win), /*window=*/true,
                            "ncclCommWindowDeregister");
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  BRAID_CHECK(checkComm(comm, "ncclRedOpCreatePreMulSum"));
  Comm* c = asComm(comm);
  if (op == nullptr) return setError(ncclInvalidArgument, c, "ncclRedOpCreatePreMulSum: op is NULL");
  if (scalar == nullptr)
    return setError(ncclInvalidArgument, c, "ncclRedOpCreatePreMulSum: scalar is NULL");
  size_t ts = dataTypeSize(datatype);
  if (ts == 0)
    return setError(ncclInvalidArgument, c, "ncclRedOpCreatePreMulSum: invalid datatype %d",
                    int(datatype));
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return setError(ncclInvalidArgument, c, "ncclRedOpCreatePreMulSum: invalid residence %d",
                    int(residence));
  UserRedOp u;
  u.live = true;
  u.type = datatype;
  u.residence = residence;
  if (residence == ncclScalarHostImmediate) memcpy(u.immediate, scalar, ts);
  else u.ptr = scalar;  // read when each op runs (host memory on the host path)
  size_t slot = 0;
  while (slot < c->userOps.size() && c->userOps[slot].live) ++slot;
  if (slot == c->userOps.size()) c->userOps.push_back(u);
  else c->userOps[slot] = u;
  *op = ncclRedOp_t(int(ncclNumOps) + int(slot));
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  BRAID_CHECK(checkComm(comm, "ncclRedOpDestroy"));
  Comm* c = asComm(comm);
  size_t idx = size_t(op) - size_t(ncclNumOps);
  if (int(op) < int(ncclNumOps) || idx >= c->userOps.size() || !c->userOps[idx].live)
    return setError(ncclInvalidArgument, c,
                    "ncclRedOpDestroy: op %d was not created by ncclRedOpCreatePreMulSum on this "
                    "communicator (or was destroyed already)", int(op));
  c->userOps[idx].live = false;
  return ncclSuccess;
}

void ncclResetDebugInit(void) { logReinit(); }

ncclResult_t ncclGroupStart() { return groupStart(); }
ncclResult_t ncclGroupEnd() { return groupEnd(); }
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) { return groupSimulateEnd(simInfo); }

// ---- Braid extensions ---------------------------------------------------------------

ncclResult_t braidHostStreamCreate(braidHostStream_t* stream) {
  if (stream == nullptr)
    return setError(ncclInvalidArgument, nullptr, "braidHostStreamCreate: stream is NULL");
  *stream = reinterpret_cast<braidHostStream_t>(new HostStream());
  return ncclSuccess;
}

static HostStream* hostStreamOf(braidHostStream_t s, const char* call, ncclResult_t* r) {
  HostStream* h = HostStream::lookup(reinterpret_cast<cudaStream_t>(s));
  *r = h ? ncclSuccess
         : setError(ncclInvalidArgument, nullptr, "%s: %p is not a live Braid host stream", call,
                    static_cast<void*>(s));
  return h;
}

ncclResult_t braidHostStreamDestroy(braidHostStream_t stream) {
  ncclResult_t r;
  HostStream* h = hostStreamOf(stream, "braidHostStreamDestroy", &r);
  if (!h) return r;
  r = h->synchronize();
  delete h;
  return r;
}

ncclResult_t braidHostStreamSynchronize(braidHostStream_t stream) {
  ncclResult_t r;
  HostStream* h = hostStreamOf(stream, "braidHostStreamSynchronize", &r);
  return h ? h->synchronize() : r;
}

ncclResult_t braidHostStreamQuery(braidHostStream_t stream) {
  ncclResult_t r;
  HostStream* h = hostStreamOf(stream, "braidHostStreamQuery", &r);
  return h ? h->query() : r;
}

ncclResult_t braidHostStreamLaunchHostFunc(braidHostStream_t stream, void (*fn)(void*),
                                           void* userData) {
  ncclResult_t r;
  HostStream* h = hostStreamOf(stream, "braidHostStreamLaunchHostFunc", &r);
  if (!h) return r;
  if (fn == nullptr)
    return setError(ncclInvalidArgument, nullptr, "braidHostStreamLaunchHostFunc: fn is NULL");
  h->enqueueHostFunc(fn, userData);
  return ncclSuccess;
}

const char* braidVersionString(void) { return BRAID_VERSION_STRING; }

const char* braidBuildFeatures(void) {
  return "cuda-toolkit=" BRAID_CUDA_FEATURE " host=1 transports=local,shm,socket sanitize="
         BRAID_SANITIZE_STRING;
}

}  // extern "C"
