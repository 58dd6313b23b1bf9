// HostStream: the object behind braidHostStream_t (include/braid/braid.h). A worker
// thread runs the batches queued on it in order; synchronize() waits for all of them.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/core/op.h"

namespace braid {

class HostStream {
 public:
  HostStream();
  ~HostStream();  ///< waits for queued work
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void enqueue(std::vector<OpRecord> batch);
  /// Waits until every queued batch ran; returns (and clears) the first error.
  ncclResult_t synchronize();
  /// ncclSuccess if idle, ncclInProgress if work is queued or running, else the error.
  ncclResult_t query();

  /// The live HostStream a cudaStream_t value refers to, or nullptr.
  static HostStream* lookup(cudaStream_t s);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<OpRecord>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  ncclResult_t error_ = ncclSuccess;
  std::thread worker_;
};

}  // namespace braid
