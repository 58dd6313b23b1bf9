// CudaRt: the library's one door to the CUDA runtime.
//
// Built with the CUDA toolkit (BRAID_HAVE_CUDA), the library links the static CUDA
// runtime, which loads the driver (libcuda.so) on first use: with no driver or no GPU
// every query here answers "no device" and Braid runs on host memory only. Built
// without the toolkit, the same functions exist and always answer so. This header
// uses no CUDA types, so every part of the library can include it.
//
// Every call that fails records the CUDA error's text (lastError()), and functions
// returning ncclResult_t also set the NCCL error message (ncclGetLastError).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl.h"

namespace braid {

/// What a buffer is, as the executors care.
enum class MemKind : uint8_t {
  kHost = 0,    ///< pageable or pinned host memory: the host executor
  kDevice = 1,  ///< device memory (cudaMalloc, cuMem, managed): the CUDA executor
};

const char* memKindName(MemKind k);

/// Size of a CUDA IPC memory handle (cudaIpcMemHandle_t).
constexpr size_t kCudaIpcHandleBytes = 64;

namespace cudart {

/// Whether CUDA is usable: a driver and at least one device. Cached after the first
/// call; the first failure is logged at INFO with CUDA's reason.
bool available();
/// Why available() is false, as CUDA said it ("cudaErrorInsufficientDriver: ..."), for
/// messages and test skips; "" when CUDA is usable.
std::string unavailableReason();
/// Number of visible devices (0 without a driver).
int deviceCount();
/// The calling thread's current device, or -1 when CUDA is not usable.
int currentDevice();
/// The PCI bus id of device dev ("0000:3b:00.0"), for matching devices across
/// processes (device indices differ with CUDA_VISIBLE_DEVICES). "" when unknown.
std::string deviceBusId(int dev);
/// Makes `dev` current for the calling thread (no-op for dev < 0).
ncclResult_t setDevice(int dev);

/// The kind of memory at p, and for device memory its device (else -1). Host memory
/// when CUDA is not usable, p is null, or CUDA does not know the pointer.
MemKind pointerKind(const void* p, int* device);

/// Device memory (cudaMalloc on the current device) / its release.
ncclResult_t deviceAlloc(void** p, size_t bytes, const char* what);
ncclResult_t deviceFree(void* p);
/// Copies between host and device (synchronous, for setup only).
ncclResult_t copyToDevice(void* dst, const void* src, size_t bytes);
ncclResult_t copyFromDevice(void* dst, const void* src, size_t bytes);
ncclResult_t memsetDevice(void* p, int value, size_t bytes);

/// Pinned host memory mapped into the device's address space (cudaHostAlloc with
/// cudaHostAllocMapped|Portable); *dev is the device address of the same bytes.
ncclResult_t hostAllocMapped(void** host, void** dev, size_t bytes);
ncclResult_t hostFree(void* host);
/// Pins and maps existing host memory (cudaHostRegister, mapped|portable); *dev is
/// its device address. hostUnregister undoes it.
ncclResult_t hostRegister(void* p, size_t bytes, void** dev);
ncclResult_t hostUnregister(void* p);

/// CUDA IPC: a handle (kCudaIpcHandleBytes bytes) for the allocation holding devPtr,
/// and the offset of devPtr inside that allocation.
ncclResult_t ipcGetHandle(void* devPtr, void* handle, size_t* offset);
/// Opens a peer process's handle (lazy peer access enabled); *base is the start of
/// the peer's allocation in our address space.
ncclResult_t ipcOpenHandle(const void* handle, void** base);
ncclResult_t ipcCloseHandle(void* base);
/// Whether device a can reach device b's memory directly (same device: true).
bool canAccessPeer(int a, int b);

/// Stream helpers. A null stream is CUDA's legacy default stream.
ncclResult_t streamSynchronize(cudaStream_t s);
/// Whether s is being captured into a CUDA Graph right now.
bool streamCapturing(cudaStream_t s);
/// The device a stream belongs to (-1 if unknown).
int streamDevice(cudaStream_t s);

/// Events (opaque handles; cudaEvent_t underneath), for ordering a communicator's
/// launches across streams.
ncclResult_t eventCreate(void** ev);
ncclResult_t eventDestroy(void* ev);
ncclResult_t eventRecord(void* ev, cudaStream_t s);
ncclResult_t streamWaitEvent(cudaStream_t s, void* ev);
/// 1: the work recorded by ev is done (or ev was never recorded); 0: not yet; -1: error.
int eventQuery(void* ev);

/// Text of the last CUDA error seen by this thread through these functions.
std::string lastError();

/// Restores, when it goes out of scope, the device that was current for the calling
/// thread when it was made (whatever setDevice / enter() changed meanwhile).
class DeviceScope {
 public:
  DeviceScope() : saved_(currentDevice()) {}
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  /// Makes dev current (no-op for dev < 0 or when it already is).
  ncclResult_t enter(int dev);

 private:
  int saved_;
};

/// While alive, the calling thread's stream-capture mode is relaxed, so setup calls
/// (allocations, registrations) made during a capture do not invalidate it.
class CaptureRelaxed {
 public:
  CaptureRelaxed();
  ~CaptureRelaxed();
  CaptureRelaxed(const CaptureRelaxed&) = delete;
  CaptureRelaxed& operator=(const CaptureRelaxed&) = delete;

 private:
  int saved_ = 0;
  bool active_ = false;
};

}  // namespace cudart
}  // namespace braid
