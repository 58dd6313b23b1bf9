// Device or host buffers of one rank (see mem.h).
#include "tests/gpu/mem.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace braid_gpu {

Mem::Mem(bool device) : device_(device) {
  if (device_ && !check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                        "cudaStreamCreateWithFlags")) {
    error_ = last_;
    stream_ = nullptr;
  }
}

Mem::~Mem() {
  if (device_) {
    if (stream_ != nullptr) {
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
    for (void* p : blocks_) (void)cudaFree(p);
  } else {
    for (void* p : blocks_) std::free(p);
  }
}

bool Mem::check(int e, const char* what) {
  if (e == cudaSuccess) return true;
  const cudaError_t err = static_cast<cudaError_t>(e);
  last_ = std::string(what) + " failed: " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) +
          ")";
  return false;
}

void* Mem::alloc(size_t bytes) {
  const size_t size = bytes < 256 ? 256 : (bytes + 255) / 256 * 256;
  void* p = nullptr;
  if (device_) {
    if (!check(cudaMalloc(&p, size), "cudaMalloc")) return nullptr;
  } else {
    p = std::aligned_alloc(256, size);
    if (p == nullptr) {
      last_ = "out of host memory";
      return nullptr;
    }
  }
  blocks_.push_back(p);
  return p;
}

bool Mem::put(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return true;
  if (!device_) {
    std::memcpy(dst, src, bytes);
    return true;
  }
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (H2D)") &&
         sync();
}

bool Mem::get(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return true;
  if (!device_) {
    std::memcpy(dst, src, bytes);
    return true;
  }
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (D2H)") &&
         sync();
}

bool Mem::sync() {
  if (!device_) return true;
  return check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace braid_gpu
