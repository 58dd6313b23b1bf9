// Device buffers of the perf suite (-D 1): the few CUDA runtime calls the driver needs,
// behind plain functions. One implementation talks to the CUDA runtime
// (device_cuda.cc, built when CMake finds the toolkit: BRAID_PERF_CUDA), the other
// (device_none.cc) answers "not built with CUDA"; CMake compiles exactly one of them.
// Every function returns false (or null) with a message in *error when it fails.
#ifndef BRAID_PERF_DEVICE_H_
#define BRAID_PERF_DEVICE_H_

#include <cstddef>
#include <string>

#include "nccl.h"

namespace braid_perf {

/// True when the suite was built with the CUDA runtime.
bool deviceBuilt();
/// Number of usable CUDA devices; 0 with the reason in *why when there is none (no
/// driver, no device, or a build without CUDA).
int deviceCount(std::string* why);
/// Makes device `dev` current for the calling thread.
bool deviceSet(int dev, std::string* error);
/// cudaMalloc of `bytes` (at least one page) on the current device; null on failure.
void* deviceAlloc(size_t bytes, std::string* error);
/// cudaFree (null is ignored).
void deviceFree(void* p);
/// A new non-blocking stream on the current device; null on failure.
cudaStream_t streamCreate(std::string* error);
/// Destroys a stream from streamCreate (null is ignored).
void streamDestroy(cudaStream_t s);
/// Waits for everything queued on `s`.
bool streamSync(cudaStream_t s, std::string* error);
/// Host -> device copy ordered on `s`, complete on return.
bool copyToDevice(void* dst, const void* src, size_t bytes, cudaStream_t s, std::string* error);
/// Device -> host copy ordered on `s`, complete on return.
bool copyToHost(void* dst, const void* src, size_t bytes, cudaStream_t s, std::string* error);

}  // namespace braid_perf

#endif  // BRAID_PERF_DEVICE_H_
