#include "work.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>

#ifdef BRAID_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace torch_braid {

#ifdef BRAID_TORCH_CUDA
struct WorkBraid::CudaEvent : at::cuda::CUDAEvent {};
#else
struct WorkBraid::CudaEvent {};
#endif

namespace {
c10::intrusive_ptr<c10::ivalue::Future> makeFuture(const at::Device& device) {
  auto type = c10::ListType::create(c10::TensorType::get());
  if (device.is_cpu()) return c10::make_intrusive<c10::ivalue::Future>(type);
  return c10::make_intrusive<c10::ivalue::Future>(type, std::vector<c10::Device>{device});
}
}  // namespace

WorkBraid::WorkBraid(int rank, c10d::OpType type, const std::string& name, at::Device device,
                     std::vector<at::Tensor> outputs, uint64_t seq,
                     std::chrono::milliseconds timeout)
    : Work(rank, type, name.c_str()),
      name_(name),
      device_(device),
      outputs_(std::move(outputs)),
      future_(makeFuture(device)),
      seq_(seq),
      timeout_(timeout),
      start_(std::chrono::steady_clock::now()) {}

WorkBraid::~WorkBraid() = default;

bool WorkBraid::isCompleted() {
  if (event_ != nullptr) return cudaDone();
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool WorkBraid::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_ == nullptr;
}

std::exception_ptr WorkBraid::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> WorkBraid::result() { return outputs_; }

void WorkBraid::finishHost(std::exception_ptr error) { finish(error); }

void WorkBraid::completeFuture(std::exception_ptr error) {
  try {
    if (error) {
      future_->setErrorIfNeeded(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  } catch (const std::exception& e) {  // a raw callback that threw
    TORCH_WARN("braid: a callback of ", name_, "'s future threw: ", e.what());
  }
}

void WorkBraid::enqueuedOnCuda(void* stream) {
#ifdef BRAID_TORCH_CUDA
  event_ = std::make_shared<CudaEvent>();
  auto s = at::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), device_.index());
  event_->record(s);
  // The future records its own events on the current stream, which ran the batch.
  future_->markCompleted(c10::IValue(outputs_));
#else
  (void)stream;
  TORCH_CHECK(false, "torch_braid was built without CUDA");
#endif
}

bool WorkBraid::cudaDone() {
#ifdef BRAID_TORCH_CUDA
  if (event_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (completed_) return true;
  c10::cuda::CUDAGuard guard(device_);  // no context made on another device
  if (!event_->query()) return false;
  completed_ = true;
  return true;
#else
  return false;
#endif
}

void WorkBraid::failCuda(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;
    completed_ = true;
    exception_ = error;
  }
  cv_.notify_all();
}

void WorkBraid::synchronize() {
#ifdef BRAID_TORCH_CUDA
  if (event_ != nullptr) event_->block(at::cuda::getCurrentCUDAStream(device_.index()));
#endif
}

bool WorkBraid::wait(std::chrono::milliseconds timeout) {
  if (event_ != nullptr) {  // CUDA: stream-ordered, the host does not block
    if (auto e = exception()) std::rethrow_exception(e);
    synchronize();
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    C10_THROW_ERROR(DistBackendError,
                    "braid: Work::wait timed out after " + std::to_string(timeout.count()) +
                        " ms (sequence number " + std::to_string(seq_) + ")");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkBraid::getFuture() {
  std::lock_guard<std::mutex> lock(futureMutex_);
  futureHandedOut_ = true;
  return future_;
}

bool WorkBraid::completeFutureIfUnused(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(futureMutex_);
  if (futureHandedOut_) return false;
  completeFuture(error);  // no callbacks yet; getFuture() waits for this, then sees it done
  return true;
}

}  // namespace torch_braid
