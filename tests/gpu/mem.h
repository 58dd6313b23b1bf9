// Buffers of one rank in the GPU suite: device memory (cudaMalloc, one non-blocking
// stream, host staging copies through the stream) or, for the harness's own check on
// machines without a GPU, host memory with the null stream. One interface, so the test
// matrix is the same code for both.
#ifndef BRAID_TESTS_GPU_MEM_H_
#define BRAID_TESTS_GPU_MEM_H_

#include <cstddef>
#include <string>
#include <vector>

#include "nccl.h"

namespace braid_gpu {

class Mem {
 public:
  /// device: uses the calling thread's current device (cudaSetDevice first).
  explicit Mem(bool device);
  ~Mem();
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;

  /// False when creating the stream failed (see error()).
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool device() const { return device_; }
  /// The rank's stream (null for host memory).
  cudaStream_t stream() const { return stream_; }

  /// A buffer of `bytes` (at least 256), freed with this object; null on failure.
  void* alloc(size_t bytes);
  /// Copies host -> buffer / buffer -> host, ordered on the stream, done on return.
  bool put(void* dst, const void* src, size_t bytes);
  bool get(void* dst, const void* src, size_t bytes);
  /// Waits for the stream (cudaStreamSynchronize); false with error() set on failure.
  bool sync();
  /// Text of the last failure.
  std::string lastError() const { return last_; }

 private:
  bool check(int cudaError, const char* what);
  bool device_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> blocks_;
  std::string error_;
  std::string last_;
};

}  // namespace braid_gpu

#endif  // BRAID_TESTS_GPU_MEM_H_
