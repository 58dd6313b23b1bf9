// CollNetProxy: the thread that progresses every switch connection (CollNetPort) of
// the process. It starts with the first port and exits when the last one is removed.
// Ports have no descriptor to sleep on (a collnet's test() is the only way to learn of
// progress), so the thread spins for a moment after traffic, then naps: 50 us, growing
// to 1 ms while nothing moves.
#pragma once
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
  ~CollNetProxy() = delete;  // lives for the whole process

 private:
  CollNetProxy() = default;
  void loop();
  std::mutex lifeMu_;  ///< add/remove, starting and joining the thread
  std::mutex mu_;      ///< ports_, stop_ (held while progressing)
  std::vector<std::shared_ptr<CollNetPort>> ports_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace braid
