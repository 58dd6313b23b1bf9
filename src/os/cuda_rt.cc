// CudaRt: the library's one door to the CUDA runtime (see cuda_rt.h).
//
// With the toolkit (BRAID_HAVE_CUDA) every function goes through the static CUDA
// runtime, which loads the driver on first use; without a driver or a device,
// available() is false and every query answers "no device" without touching CUDA
// again. Without the toolkit the same functions answer "no CUDA" (second half of
// this file).
#include "src/os/cuda_rt.h"

#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "src/config/log.h"
#include "src/config/error.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <cudaTypedefs.h>
#endif

namespace braid {

namespace cudart {

DeviceScope::~DeviceScope() {
  if (saved_ >= 0 && currentDevice() != saved_) (void)setDevice(saved_);
}

ncclResult_t DeviceScope::enter(int dev) {
  if (dev < 0 || currentDevice() == dev) return ncclSuccess;
  return setDevice(dev);
}

}  // namespace cudart

const char* memKindName(MemKind k) {
  switch (k) {
    case MemKind::kHost: return "host";
    case MemKind::kDevice: return "device";
  }
  return "unknown";
}

namespace cudart {
namespace {

thread_local std::string tlsLastError;

/// Records `what` as this thread's last CUDA error and as the NCCL error message.
ncclResult_t fail(ncclResult_t code, const std::string& what) {
  tlsLastError = what;
  return setError(code, nullptr, "%s", what.c_str());
}

/// "0000:3B:00.0" or "00000000:3b:00.0" -> "0000:3b:00.0".
[[maybe_unused]] std::string normalizeBusId(const char* raw) {
  std::string s(raw);
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  size_t colon = s.find(':');
  // Domains wider than 4 hex digits (NVML style) keep their low 4 digits when the rest
  // are zeros.
  if (colon != std::string::npos && colon > 4 &&
      s.find_first_not_of('0') >= colon - 4)
    s.erase(0, colon - 4);
  return s;
}

}  // namespace

#if BRAID_HAVE_CUDA

namespace {

/// Clears CUDA's last (non-sticky) error, so that a failure we handled does not show
/// up in the user's next cudaGetLastError().
void clearCudaError() { (void)cudaGetLastError(); }

/// Formats a CUDA failure of `call` (what we were doing) and records it.
ncclResult_t cudaFail(cudaError_t e, const char* call) {
  clearCudaError();
  return fail(ncclUnhandledCudaError, std::string("CUDA ") + call + " failed: " +
                                          cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                                          ")");
}

/// Not usable: the message every allocation-type function gives without a device.
ncclResult_t noDevice(const char* call);

struct Availability {
  bool usable = false;
  int count = 0;
  std::string reason;  ///< why not usable
};

const Availability& availability() {
  static const Availability a = [] {
    Availability r;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      r.reason = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
      clearCudaError();
      // A driver that is there but older than the runtime Braid was built with (or
      // broken) means device buffers cannot work: say so loudly. No driver at all is
      // the ordinary host-only machine.
      void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (driver == nullptr) driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (driver != nullptr && e != cudaErrorNoDevice) {
        BRAID_WARN("a CUDA driver is installed but not usable by Braid's CUDA %d runtime "
                   "(%s): only host buffers will work; device buffers would be taken for "
                   "host memory", CUDART_VERSION / 1000, r.reason.c_str());
      } else {
        BRAID_INFO(kLogInit, "CUDA not usable (%s): host memory only", r.reason.c_str());
      }
      if (driver != nullptr) dlclose(driver);
      return r;
    }
    if (n <= 0) {
      r.reason = "no CUDA device visible";
      BRAID_INFO(kLogInit, "CUDA not usable (%s): host memory only", r.reason.c_str());
      return r;
    }
    r.usable = true;
    r.count = n;
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    clearCudaError();
    BRAID_INFO(kLogInit, "CUDA usable: %d device(s), runtime %d, driver %d", n, rt, drv);
    return r;
  }();
  return a;
}

ncclResult_t noDevice(const char* call) {
  return fail(ncclUnhandledCudaError,
              std::string(call) + ": CUDA is not usable (" + availability().reason + ")");
}

#define BRAID_CUDART_NEED(call) \
  do {                          \
    if (!available()) return noDevice(call); \
  } while (0)

using GetAddressRangeFn = PFN_cuMemGetAddressRange_v3020;

/// The driver's cuMemGetAddressRange, found through the runtime (libcuda is never
/// linked); null when unavailable.
GetAddressRangeFn getAddressRange() {
  static GetAddressRangeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000,
                                                      cudaEnableDefault, &q);
#else
    cudaError_t e = cudaGetDriverEntryPoint("cuMemGetAddressRange", &p, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      clearCudaError();
      p = nullptr;
    }
    return reinterpret_cast<GetAddressRangeFn>(p);
  }();
  return fn;
}

}  // namespace

bool available() { return availability().usable; }

std::string unavailableReason() { return availability().reason; }

int deviceCount() { return availability().count; }

int currentDevice() {
  if (!available()) return -1;
  int d = -1;
  cudaError_t e = cudaGetDevice(&d);
  if (e != cudaSuccess) {
    clearCudaError();
    tlsLastError = std::string("cudaGetDevice: ") + cudaGetErrorString(e);
    return -1;
  }
  return d;
}

std::string deviceBusId(int dev) {
  if (!available() || dev < 0 || dev >= deviceCount()) return "";
  char buf[64] = {};
  cudaError_t e = cudaDeviceGetPCIBusId(buf, int(sizeof(buf)), dev);
  if (e != cudaSuccess) {
    clearCudaError();
    tlsLastError = std::string("cudaDeviceGetPCIBusId: ") + cudaGetErrorString(e);
    return "";
  }
  return normalizeBusId(buf);
}

ncclResult_t setDevice(int dev) {
  if (dev < 0) return ncclSuccess;
  BRAID_CUDART_NEED("setDevice");
  if (dev >= deviceCount())
    return fail(ncclInvalidArgument, "setDevice: device " + std::to_string(dev) +
                                         " does not exist (" + std::to_string(deviceCount()) +
                                         " visible)");
  cudaError_t e = cudaSetDevice(dev);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaSetDevice");
}

MemKind pointerKind(const void* p, int* device) {
  if (device != nullptr) *device = -1;
  if (p == nullptr || !available()) return MemKind::kHost;
  cudaPointerAttributes attr;
  memset(&attr, 0, sizeof(attr));
  // Called on every op, also while the caller captures a stream: relaxed, so that the
  // query can never count as an unsafe call during a capture.
  CaptureRelaxed relaxed;
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    clearCudaError();
    return MemKind::kHost;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    if (device != nullptr) *device = attr.device;
    return MemKind::kDevice;
  }
  return MemKind::kHost;
}

ncclResult_t deviceAlloc(void** p, size_t bytes, const char* what) {
  if (p == nullptr) return fail(ncclInvalidArgument, "deviceAlloc: p is NULL");
  *p = nullptr;
  const char* name = what != nullptr ? what : "device buffer";
  BRAID_CUDART_NEED(name);
  if (bytes == 0) return ncclSuccess;
  CaptureRelaxed relaxed;
  cudaError_t e = cudaMalloc(p, bytes);
  if (e != cudaSuccess) {
    *p = nullptr;
    clearCudaError();
    return fail(ncclUnhandledCudaError, std::string("cudaMalloc of ") + std::to_string(bytes) +
                                            " bytes for " + name + " on device " +
                                            std::to_string(currentDevice()) + " failed: " +
                                            cudaGetErrorString(e));
  }
  BRAID_INFO(kLogAlloc, "cudaMalloc %zu bytes for %s: %p", bytes, name, *p);
  return ncclSuccess;
}

ncclResult_t deviceFree(void* p) {
  if (p == nullptr) return ncclSuccess;
  BRAID_CUDART_NEED("deviceFree");
  CaptureRelaxed relaxed;
  cudaError_t e = cudaFree(p);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaFree");
}

namespace {

/// A non-blocking stream of the current device for the library's own setup copies: a
/// copy on the legacy default stream would synchronise with (and so break) a user
/// stream being captured into a CUDA Graph. One per device, made on first use.
cudaStream_t setupStream(cudaError_t* err) {
  static std::mutex mu;
  static std::map<int, cudaStream_t>* streams = new std::map<int, cudaStream_t>();  // leaked: used at exit
  int dev = 0;
  *err = cudaGetDevice(&dev);
  if (*err != cudaSuccess) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams->find(dev);
  if (it != streams->end()) return it->second;
  cudaStream_t s = nullptr;
  *err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (*err != cudaSuccess) return nullptr;
  (*streams)[dev] = s;
  return s;
}

/// Runs a setup copy or memset on the setup stream and waits for it.
template <class F>
cudaError_t onSetupStream(F op) {
  cudaError_t e = cudaSuccess;
  cudaStream_t s = setupStream(&e);
  if (e != cudaSuccess) return e;
  e = op(s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  return e;
}

}  // namespace

ncclResult_t copyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  BRAID_CUDART_NEED("copyToDevice");
  CaptureRelaxed relaxed;
  cudaError_t e = onSetupStream([&](cudaStream_t s) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  });
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaMemcpyAsync (to device)");
}

ncclResult_t copyFromDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  BRAID_CUDART_NEED("copyFromDevice");
  CaptureRelaxed relaxed;
  cudaError_t e = onSetupStream([&](cudaStream_t s) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  });
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaMemcpyAsync (from device)");
}

ncclResult_t memsetDevice(void* p, int value, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  BRAID_CUDART_NEED("memsetDevice");
  CaptureRelaxed relaxed;
  cudaError_t e = onSetupStream([&](cudaStream_t s) { return cudaMemsetAsync(p, value, bytes, s); });
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaMemsetAsync");
}

ncclResult_t hostAllocMapped(void** host, void** dev, size_t bytes) {
  if (host == nullptr || dev == nullptr)
    return fail(ncclInvalidArgument, "hostAllocMapped: host or dev is NULL");
  *host = *dev = nullptr;
  BRAID_CUDART_NEED("hostAllocMapped");
  CaptureRelaxed relaxed;
  cudaError_t e = cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    *host = nullptr;
    return cudaFail(e, "cudaHostAlloc");
  }
  e = cudaHostGetDevicePointer(dev, *host, 0);
  if (e != cudaSuccess) {
    cudaFreeHost(*host);
    *host = *dev = nullptr;
    return cudaFail(e, "cudaHostGetDevicePointer");
  }
  BRAID_INFO(kLogAlloc, "cudaHostAlloc %zu bytes mapped: host %p dev %p", bytes, *host, *dev);
  return ncclSuccess;
}

ncclResult_t hostFree(void* host) {
  if (host == nullptr) return ncclSuccess;
  BRAID_CUDART_NEED("hostFree");
  CaptureRelaxed relaxed;
  cudaError_t e = cudaFreeHost(host);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaFreeHost");
}

ncclResult_t hostRegister(void* p, size_t bytes, void** dev) {
  if (p == nullptr || dev == nullptr)
    return fail(ncclInvalidArgument, "hostRegister: p or dev is NULL");
  *dev = nullptr;
  BRAID_CUDART_NEED("hostRegister");
  CaptureRelaxed relaxed;
  cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e != cudaSuccess) return cudaFail(e, "cudaHostRegister");
  e = cudaHostGetDevicePointer(dev, p, 0);
  if (e != cudaSuccess) {
    cudaHostUnregister(p);
    *dev = nullptr;
    return cudaFail(e, "cudaHostGetDevicePointer");
  }
  return ncclSuccess;
}

ncclResult_t hostUnregister(void* p) {
  if (p == nullptr) return ncclSuccess;
  BRAID_CUDART_NEED("hostUnregister");
  CaptureRelaxed relaxed;
  cudaError_t e = cudaHostUnregister(p);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaHostUnregister");
}

ncclResult_t ipcGetHandle(void* devPtr, void* handle, size_t* offset) {
  if (devPtr == nullptr || handle == nullptr || offset == nullptr)
    return fail(ncclInvalidArgument, "ipcGetHandle: devPtr, handle or offset is NULL");
  BRAID_CUDART_NEED("ipcGetHandle");
  static_assert(sizeof(cudaIpcMemHandle_t) == kCudaIpcHandleBytes, "IPC handle size");
  GetAddressRangeFn range = getAddressRange();
  if (range == nullptr)
    return fail(ncclUnhandledCudaError,
                "ipcGetHandle: the driver's cuMemGetAddressRange is not available");
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult r = range(&base, &size, CUdeviceptr(reinterpret_cast<uintptr_t>(devPtr)));
  if (r != CUDA_SUCCESS)
    return fail(ncclUnhandledCudaError, "ipcGetHandle: cuMemGetAddressRange(" +
                                            std::to_string(reinterpret_cast<uintptr_t>(devPtr)) +
                                            ") failed with CUresult " + std::to_string(int(r)));
  cudaIpcMemHandle_t h;
  cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(uintptr_t(base)));
  if (e != cudaSuccess) return cudaFail(e, "cudaIpcGetMemHandle");
  memcpy(handle, &h, sizeof(h));
  *offset = size_t(reinterpret_cast<uintptr_t>(devPtr) - uintptr_t(base));
  return ncclSuccess;
}

ncclResult_t ipcOpenHandle(const void* handle, void** base) {
  if (handle == nullptr || base == nullptr)
    return fail(ncclInvalidArgument, "ipcOpenHandle: handle or base is NULL");
  *base = nullptr;
  BRAID_CUDART_NEED("ipcOpenHandle");
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof(h));
  CaptureRelaxed relaxed;
  cudaError_t e = cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    *base = nullptr;
    return cudaFail(e, "cudaIpcOpenMemHandle");
  }
  return ncclSuccess;
}

ncclResult_t ipcCloseHandle(void* base) {
  if (base == nullptr) return ncclSuccess;
  BRAID_CUDART_NEED("ipcCloseHandle");
  CaptureRelaxed relaxed;
  cudaError_t e = cudaIpcCloseMemHandle(base);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaIpcCloseMemHandle");
}

bool canAccessPeer(int a, int b) {
  if (!available() || a < 0 || b < 0 || a >= deviceCount() || b >= deviceCount()) return false;
  if (a == b) return true;
  int ok = 0;
  cudaError_t e = cudaDeviceCanAccessPeer(&ok, a, b);
  if (e != cudaSuccess) {
    clearCudaError();
    return false;
  }
  return ok != 0;
}

ncclResult_t streamSynchronize(cudaStream_t s) {
  BRAID_CUDART_NEED("streamSynchronize");
  cudaError_t e = cudaStreamSynchronize(s);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaStreamSynchronize");
}

bool streamCapturing(cudaStream_t s) {
  if (!available()) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(s, &st);
  if (e != cudaSuccess) {
    // A legacy-stream query during another stream's global capture fails with
    // cudaErrorStreamCaptureImplicit: that is a capture in progress too.
    clearCudaError();
    return e == cudaErrorStreamCaptureImplicit;
  }
  // Invalidated counts as capturing: the capture is still open (the caller must not
  // treat the stream as an ordinary one, e.g. wait on events recorded outside it).
  return st != cudaStreamCaptureStatusNone;
}

int streamDevice(cudaStream_t s) {
  if (!available()) return -1;
  // cudaStreamGetDevice (cuStreamGetDevice) is not permitted on a stream being
  // captured: it fails with cudaErrorStreamCaptureUnsupported and invalidates the
  // capture (the GPU tests' GpuGraph/GpuGroup failures). cudaStreamIsCapturing is
  // capture-safe: a capturing stream's device is "unknown".
  if (s != nullptr && streamCapturing(s)) return -1;
  int d = -1;
  cudaError_t e = cudaStreamGetDevice(s, &d);
  if (e != cudaSuccess) {
    clearCudaError();
    return -1;
  }
  return d;
}

ncclResult_t eventCreate(void** ev) {
  if (ev == nullptr) return fail(ncclInvalidArgument, "eventCreate: ev is NULL");
  *ev = nullptr;
  BRAID_CUDART_NEED("eventCreate");
  cudaEvent_t e0 = nullptr;
  CaptureRelaxed relaxed;
  cudaError_t e = cudaEventCreateWithFlags(&e0, cudaEventDisableTiming);
  if (e != cudaSuccess) return cudaFail(e, "cudaEventCreateWithFlags");
  *ev = e0;
  return ncclSuccess;
}

ncclResult_t eventDestroy(void* ev) {
  if (ev == nullptr) return ncclSuccess;
  BRAID_CUDART_NEED("eventDestroy");
  cudaError_t e = cudaEventDestroy(static_cast<cudaEvent_t>(ev));
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaEventDestroy");
}

ncclResult_t eventRecord(void* ev, cudaStream_t s) {
  if (ev == nullptr) return fail(ncclInvalidArgument, "eventRecord: ev is NULL");
  BRAID_CUDART_NEED("eventRecord");
  cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(ev), s);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaEventRecord");
}

ncclResult_t streamWaitEvent(cudaStream_t s, void* ev) {
  if (ev == nullptr) return fail(ncclInvalidArgument, "streamWaitEvent: ev is NULL");
  BRAID_CUDART_NEED("streamWaitEvent");
  cudaError_t e = cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(ev), 0);
  return e == cudaSuccess ? ncclSuccess : cudaFail(e, "cudaStreamWaitEvent");
}

int eventQuery(void* ev) {
  if (ev == nullptr) return 1;
  if (!available()) {
    noDevice("eventQuery");
    return -1;
  }
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(ev));
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) {
    clearCudaError();
    return 0;
  }
  cudaFail(e, "cudaEventQuery");
  return -1;
}

CaptureRelaxed::CaptureRelaxed() {
  if (!available()) return;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess) {
    saved_ = int(mode);
    active_ = true;
  } else {
    clearCudaError();
  }
}

CaptureRelaxed::~CaptureRelaxed() {
  if (!active_) return;
  cudaStreamCaptureMode mode = cudaStreamCaptureMode(saved_);
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) clearCudaError();
}

#undef BRAID_CUDART_NEED

#else  // !BRAID_HAVE_CUDA: built without the toolkit; every answer is "no CUDA".

namespace {
constexpr const char* kNoCuda = "Braid was built without CUDA";

ncclResult_t noCuda(const char* call) {
  return fail(ncclUnhandledCudaError, std::string(call) + ": " + kNoCuda);
}

void logOnce() {
  static std::once_flag once;
  std::call_once(once, [] { BRAID_INFO(kLogInit, "CUDA not usable (%s): host memory only", kNoCuda); });
}
}  // namespace

bool available() {
  logOnce();
  return false;
}
std::string unavailableReason() { return kNoCuda; }
int deviceCount() { return 0; }
int currentDevice() { return -1; }
std::string deviceBusId(int) { return ""; }
ncclResult_t setDevice(int dev) { return dev < 0 ? ncclSuccess : noCuda("setDevice"); }

MemKind pointerKind(const void*, int* device) {
  if (device != nullptr) *device = -1;
  return MemKind::kHost;
}

ncclResult_t deviceAlloc(void** p, size_t, const char* what) {
  if (p != nullptr) *p = nullptr;
  return noCuda(what != nullptr ? what : "deviceAlloc");
}
ncclResult_t deviceFree(void* p) { return p == nullptr ? ncclSuccess : noCuda("deviceFree"); }
ncclResult_t copyToDevice(void*, const void*, size_t bytes) {
  return bytes == 0 ? ncclSuccess : noCuda("copyToDevice");
}
ncclResult_t copyFromDevice(void*, const void*, size_t bytes) {
  return bytes == 0 ? ncclSuccess : noCuda("copyFromDevice");
}
ncclResult_t memsetDevice(void*, int, size_t bytes) {
  return bytes == 0 ? ncclSuccess : noCuda("memsetDevice");
}
ncclResult_t hostAllocMapped(void** host, void** dev, size_t) {
  if (host != nullptr) *host = nullptr;
  if (dev != nullptr) *dev = nullptr;
  return noCuda("hostAllocMapped");
}
ncclResult_t hostFree(void* host) { return host == nullptr ? ncclSuccess : noCuda("hostFree"); }
ncclResult_t hostRegister(void*, size_t, void** dev) {
  if (dev != nullptr) *dev = nullptr;
  return noCuda("hostRegister");
}
ncclResult_t hostUnregister(void* p) { return p == nullptr ? ncclSuccess : noCuda("hostUnregister"); }
ncclResult_t ipcGetHandle(void*, void*, size_t*) { return noCuda("ipcGetHandle"); }
ncclResult_t ipcOpenHandle(const void*, void** base) {
  if (base != nullptr) *base = nullptr;
  return noCuda("ipcOpenHandle");
}
ncclResult_t ipcCloseHandle(void* base) {
  return base == nullptr ? ncclSuccess : noCuda("ipcCloseHandle");
}
bool canAccessPeer(int, int) { return false; }
ncclResult_t streamSynchronize(cudaStream_t) { return noCuda("streamSynchronize"); }
bool streamCapturing(cudaStream_t) { return false; }
int streamDevice(cudaStream_t) { return -1; }
ncclResult_t eventCreate(void** ev) {
  if (ev != nullptr) *ev = nullptr;
  return noCuda("eventCreate");
}
ncclResult_t eventDestroy(void* ev) { return ev == nullptr ? ncclSuccess : noCuda("eventDestroy"); }
ncclResult_t eventRecord(void*, cudaStream_t) { return noCuda("eventRecord"); }
ncclResult_t streamWaitEvent(cudaStream_t, void*) { return noCuda("streamWaitEvent"); }
int eventQuery(void* ev) {
  if (ev == nullptr) return 1;
  noCuda("eventQuery");
  return -1;
}

CaptureRelaxed::CaptureRelaxed() {}
CaptureRelaxed::~CaptureRelaxed() {}

#endif  // BRAID_HAVE_CUDA

std::string lastError() { return tlsLastError; }

}  // namespace cudart
}  // namespace braid
