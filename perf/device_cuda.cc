// The perf suite's device buffers over the CUDA runtime (see device.h).
#include <cuda_runtime.h>

#include "perf/device.h"

namespace braid_perf {
namespace {

bool ok(cudaError_t e, const char* call, std::string* error) {
  if (e == cudaSuccess) return true;
  *error =
      std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
  return false;
}

}  // namespace

bool deviceBuilt() { return true; }

int deviceCount(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    ok(e, "cudaGetDeviceCount", why);
    return 0;
  }
  if (n <= 0) *why = "cudaGetDeviceCount reports no CUDA device";
  return n > 0 ? n : 0;
}

bool deviceSet(int dev, std::string* error) {
  return ok(cudaSetDevice(dev), "cudaSetDevice", error);
}

void* deviceAlloc(size_t bytes, std::string* error) {
  constexpr size_t kPage = 4096;
  const size_t size = bytes == 0 ? kPage : (bytes + kPage - 1) / kPage * kPage;
  void* p = nullptr;
  if (!ok(cudaMalloc(&p, size), "cudaMalloc", error)) {
    *error += " (" + std::to_string(size) + " bytes)";
    return nullptr;
  }
  return p;
}

void deviceFree(void* p) {
  if (p != nullptr) (void)cudaFree(p);
}

cudaStream_t streamCreate(std::string* error) {
  cudaStream_t s = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
          error)) {
    return nullptr;
  }
  return s;
}

void streamDestroy(cudaStream_t s) {
  if (s != nullptr) (void)cudaStreamDestroy(s);
}

bool streamSync(cudaStream_t s, std::string* error) {
  return ok(cudaStreamSynchronize(s), "cudaStreamSynchronize", error);
}

bool copyToDevice(void* dst, const void* src, size_t bytes, cudaStream_t s, std::string* error) {
  if (bytes == 0) return true;
  return ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (H2D)",
            error) &&
         streamSync(s, error);
}

bool copyToHost(void* dst, const void* src, size_t bytes, cudaStream_t s, std::string* error) {
  if (bytes == 0) return true;
  return ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (D2H)",
            error) &&
         streamSync(s, error);
}

}  // namespace braid_perf
