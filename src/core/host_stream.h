// HostStream: the object behind braidHostStream_t (include/braid/braid.h). A worker
// thread runs the items queued on it in order; synchronize() waits for all of them.
// An item is a batch to execute, or a wait for a batch another stream executes (a
// group spanning several host streams joins them, as NCCL joins CUDA streams).
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "nccl.h"
#include "src/exec/batch.h"

namespace braid {

/// Completion of one batch, for the threads and streams that wait on it.
class Completion {
 public:
  void complete(ncclResult_t r);
  ncclResult_t wait();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  ncclResult_t result_ = ncclSuccess;
};

class HostStream {
 public:
  HostStream();
  ~HostStream();  ///< waits for queued work
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  /// Queues a batch (already issued: it holds its tickets); `done` is completed with
  /// its result.
  void enqueue(Batch batch, std::shared_ptr<Completion> done);
  /// Queues a wait: work queued later runs only after `other` completed.
  void enqueueWait(std::shared_ptr<Completion> other);
  /// Queues a host function: it runs on the worker in stream order, after the work
  /// queued before it (cudaLaunchHostFunc's semantics).
  void enqueueHostFunc(void (*fn)(void*), void* userData);
  /// Waits until every queued item ran; returns (and clears) the first error.
  ncclResult_t synchronize();
  /// ncclSuccess if idle, ncclInProgress if work is queued or running, else the error.
  ncclResult_t query();

  /// The live HostStream a cudaStream_t value refers to, or nullptr.
  static HostStream* lookup(cudaStream_t s);

 private:
  struct Item {
    Batch batch;                          ///< empty for a wait item
    std::shared_ptr<Completion> done;     ///< completed by us (batch) or awaited (wait)
    bool isWait = false;
    void (*hostFn)(void*) = nullptr;      ///< set for a host-function item
    void* hostArg = nullptr;
  };
  void push(Item item);
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool busy_ = false;
  bool stop_ = false;
  ncclResult_t error_ = ncclSuccess;
  std::thread worker_;
};

}  // namespace braid
