#include "transports/collnet/collnet_proxy.h"

#include <algorithm>
#include <chrono>

#include "src/config/log.h"

namespace braid {

CollNetProxy& CollNetProxy::get() {
  static CollNetProxy* p = new CollNetProxy();  // never destroyed (used during exit)
  return *p;
}

void CollNetProxy::add(std::shared_ptr<CollNetPort> port) {
  std::lock_guard<std::mutex> life(lifeMu_);
  bool start;
  {
    std::lock_guard<std::mutex> lk(mu_);
    start = ports_.empty();
    ports_.push_back(std::move(port));
    stop_ = false;
  }
  if (start) {
    if (thread_.joinable()) thread_.join();
    thread_ = std::thread([this] { loop(); });
  }
}

void CollNetProxy::remove(const CollNetPort* port) {
  std::lock_guard<std::mutex> life(lifeMu_);
  bool last;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ports_.erase(std::remove_if(ports_.begin(), ports_.end(),
                                [port](const auto& p) { return p.get() == port; }),
                 ports_.end());
    last = ports_.empty();
    if (last) stop_ = true;
  }
  if (last) {
    wake();
    if (thread_.joinable()) thread_.join();
  }
}

void CollNetProxy::loop() {
  using Clock = std::chrono::steady_clock;
  auto lastMove = Clock::now();
  int napUs = 50;
  for (;;) {
    bool moved = false, onNet = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
      for (auto& p : ports_) {
        moved |= p->progress();
        onNet |= p->waitingOnNet();
      }
    }
    if (moved) {
      lastMove = Clock::now();
      napUs = 50;
      continue;
    }
    if (Clock::now() - lastMove < std::chrono::microseconds(200)) {
      std::this_thread::yield();
      continue;
    }
    // Nap; an announce (or remove) ends it early. Announces published before `napping_`
    // is set are seen by the progress pass after the nap at the latest (50 us..1 ms).
    {
      std::unique_lock<std::mutex> lk(napMu_);
      const uint64_t seen = wakeups_;
      napping_.store(true, std::memory_order_seq_cst);
      napCv_.wait_for(lk, std::chrono::microseconds(onNet ? 50 : napUs),
                      [&] { return wakeups_ != seen; });
      napping_.store(false, std::memory_order_relaxed);
    }
    napUs = onNet ? 50 : std::min(napUs * 2, 1000);
  }
}

}  // namespace braid
