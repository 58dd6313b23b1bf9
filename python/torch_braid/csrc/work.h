// torch_braid: the c10d::Work of one batch. CPU work completes on the backend's worker
// thread; CUDA work is stream-ordered (an event recorded on torch's current stream).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace torch_braid {

class WorkBraid : public c10d::Work {
 public:
  WorkBraid(int rank, c10d::OpType type, const std::string& name, at::Device device,
            std::vector<at::Tensor> outputs, uint64_t seq, std::chrono::milliseconds timeout);
  ~WorkBraid() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }
  // Virtual in c10d::Work of some torch releases only (not 2.11): no `override`, so the
  // backend builds against either.
  std::chrono::milliseconds getTimeout() const { return timeout_; }

  /// CPU: the batch finished (error null) or failed: wait() returns (or throws).
  void finishHost(std::exception_ptr error);
  /// CPU: completes the future here when nobody has asked for it (so no callback can
  /// run here) and returns true; else returns false: the caller completes it elsewhere.
  bool completeFutureIfUnused(std::exception_ptr error);
  /// CPU: completes the future (its callbacks run on the calling thread).
  void completeFuture(std::exception_ptr error);
  /// CUDA: the batch is enqueued on `stream`; records the completion event there.
  void enqueuedOnCuda(void* stream);
  /// CUDA: a failure seen after enqueue (the watchdog's timeout).
  void failCuda(std::exception_ptr error);
  /// CUDA: the event has completed (polled by the watchdog; false for CPU work).
  bool cudaDone();

  const at::Device& device() const { return device_; }
  const std::string& name() const { return name_; }
  std::chrono::steady_clock::time_point start() const { return start_; }

 private:
  std::string name_;
  at::Device device_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex futureMutex_;
  bool futureHandedOut_ = false;  // getFuture() was called
  uint64_t seq_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point start_;
  struct CudaEvent;                  // wraps at::cuda::CUDAEvent (work.cc)
  std::shared_ptr<CudaEvent> event_;  // CUDA work only
};

}  // namespace torch_braid
