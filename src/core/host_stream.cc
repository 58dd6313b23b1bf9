#include "src/core/host_stream.h"

#include <mutex>
#include <unordered_set>

#include "src/core/comm.h"

namespace braid {
namespace {

struct StreamRegistry {
  std::mutex mu;
  std::unordered_set<const void*> live;
};
StreamRegistry& streamRegistry() {
  static StreamRegistry* r = new StreamRegistry();
  return *r;
}

}  // namespace

void Completion::complete(ncclResult_t r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    result_ = r;
  }
  cv_.notify_all();
}

ncclResult_t Completion::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return result_;
}

HostStream::HostStream() {
  {
    StreamRegistry& r = streamRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.live.insert(this);
  }
  worker_ = std::thread([this] { loop(); });
}

HostStream::~HostStream() {
  {
    StreamRegistry& r = streamRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.live.erase(this);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

HostStream* HostStream::lookup(cudaStream_t s) {
  if (s == nullptr) return nullptr;
  StreamRegistry& r = streamRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.live.count(reinterpret_cast<const void*>(s))
             ? reinterpret_cast<HostStream*>(s)
             : nullptr;
}

void HostStream::push(Item item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(item));
  }
  cv_.notify_all();
}

void HostStream::enqueue(Batch batch, std::shared_ptr<Completion> done) {
  for (const auto& t : batch.tickets) t.first->queuedBatches.fetch_add(1);
  push(Item{std::move(batch), std::move(done), false});
}

void HostStream::enqueueWait(std::shared_ptr<Completion> other) {
  push(Item{Batch{}, std::move(other), true});
}

void HostStream::enqueueHostFunc(void (*fn)(void*), void* userData) {
  Item item;
  item.hostFn = fn;
  item.hostArg = userData;
  push(std::move(item));
}

void HostStream::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    ncclResult_t r = ncclSuccess;
    if (item.hostFn != nullptr) {
      item.hostFn(item.hostArg);
    } else if (item.isWait) {
      item.done->wait();  // its error belongs to the stream that ran the batch
    } else {
      r = executeBatch(item.batch);
      for (const auto& t : item.batch.tickets) t.first->queuedBatches.fetch_sub(1);
      item.done->complete(r);
    }
    lock.lock();
    busy_ = false;
    if (r != ncclSuccess && error_ == ncclSuccess) error_ = r;
    cv_.notify_all();
  }
}

ncclResult_t HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  ncclResult_t r = error_;
  error_ = ncclSuccess;
  return r;
}

ncclResult_t HostStream::query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_ != ncclSuccess) return error_;
  return (queue_.empty() && !busy_) ? ncclSuccess : ncclInProgress;
}

}  // namespace braid
