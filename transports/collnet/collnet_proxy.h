// CollNetProxy: the thread that progresses every switch connection (CollNetPort) of
// the process. It starts with the first port and exits when the last one is removed.
// Ports have no descriptor to sleep on (a collnet's test() is the only way to learn of
// progress), so the thread spins for a moment after traffic, then naps: 50 us while
// operations are posted to a collnet, and growing to 1 ms while nothing is. An executor
// announcing a message wakes a napping proxy at once (wake()).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transports/collnet/collnet_port.h"

namespace braid {

class CollNetProxy {
 public:
  static CollNetProxy& get();
  void add(std::shared_ptr<CollNetPort> port);
  /// When this returns the proxy no longer touches `port`.
  void remove(const CollNetPort* port);
  /// Ends a nap now (cheap when the proxy is not napping).
  void wake() {
    if (!napping_.load(std::memory_order_seq_cst)) return;
    std::lock_guard<std::mutex> lk(napMu_);
    wakeups_++;
    napCv_.notify_one();
  }
  ~CollNetProxy() = delete;  // lives for the whole process

 private:
  CollNetProxy() = default;
  void loop();
  std::mutex lifeMu_;  ///< add/remove, starting and joining the thread
  std::mutex mu_;      ///< ports_, stop_ (held while progressing)
  std::vector<std::shared_ptr<CollNetPort>> ports_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<bool> napping_{false};
  std::mutex napMu_;
  std::condition_variable napCv_;
  uint64_t wakeups_ = 0;  ///< napMu_
};

}  // namespace braid
