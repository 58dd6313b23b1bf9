// NetProxy: the thread that progresses every net-transport connection of the process.
//
// One proxy thread per process serves every registered connection of every
// communicator and every network: the transport interface has no per-communicator hook
// to start or stop a thread, and it keeps the thread count of ncclCommInitAll-style
// programs (many ranks per process) at one. The thread starts with the first
// registered connection and is joined when the last one is removed.
//
// The executor never signals the proxy: while a connection waits for FIFO data (send)
// or FIFO space (receive), or on a net that offers no file descriptor to poll, the
// proxy polls with short timeouts, spinning briefly after recent traffic and backing
// off to 1 ms when idle. Nets with a descriptor (Socket) let it sleep in poll().
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transports/net/net_conn.h"

namespace braid {

class NetProxy {
 public:
  static NetProxy& get();
  /// Starts serving `c` (starting the thread if needed).
  void add(std::shared_ptr<NetConn> c);
  /// Stops serving `c`; when this returns the proxy no longer touches it.
  void remove(const NetConn* c);
  ~NetProxy() = delete;  // lives for the whole process (used during exit)

 private:
  NetProxy();
  void loop();
  void wake();
  /// Applies pending adds/removes; returns false when the thread should exit.
  bool applyChanges(std::vector<std::shared_ptr<NetConn>>* conns);

  std::mutex lifeMu_;  ///< serialises add/remove and starting/joining the thread
  std::mutex mu_;      ///< guards the fields below
  std::condition_variable cv_;
  std::vector<std::shared_ptr<NetConn>> toAdd_;
  std::vector<const NetConn*> toRemove_;
  uint64_t removeSeq_ = 0;
  uint64_t removeDone_ = 0;
  bool stop_ = false;
  size_t count_ = 0;  ///< registered connections (lifeMu_)
  std::thread thread_;
  int eventFd_ = -1;
};

}  // namespace braid
