// NetProxy: the thread that progresses every net-transport connection of the process.
//
// One proxy thread per process serves every registered connection of every
// communicator and every network: the transport interface has no per-communicator hook
// to start or stop a thread, and it keeps the thread count of ncclCommInitAll-style
// programs (many ranks per process) at one. The thread starts with the first
// registered connection and is joined when the last one is removed.
//
// The proxy spins for a moment after traffic, then sleeps in poll() on an eventfd and
// the nets' descriptors (the Socket net's sockets, the IB net's completion channels).
// Executors ring the eventfd when they publish into, consume from or close a FIFO
// whose proxy sleeps (the doorbell in src/exec/fifo.h), so a message posted to an idle
// proxy goes out at once. Where only looking can tell (FIFOs written by a GPU kernel,
// nets without a descriptor such as external plugins, connects in progress) it naps
// instead: 50 us, then 1 ms when idle.
//
// Executors waiting in their loop progress the connections themselves (help(), through
// src/exec/progress_assist.h): no hop to this thread. Whoever progresses holds
// progressMu_, so a net comm is used by one thread at a time. While executors wait the
// proxy only naps, and goes back to spinning when its own pass finds work (a busy
// executor streaming through other transports helps only when idle).
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
  /// One progress pass from another thread, unless one is running; true if it moved.
  bool help();
  ~NetProxy() = delete;  // lives for the whole process (used during exit)

 private:
  NetProxy();
  void loop();
  void wake();
  /// Applies pending adds/removes; returns false when the thread should exit.
  /// Under progressMu_.
  bool applyChanges();
  bool progressAll();  ///< under progressMu_

  std::mutex progressMu_;  ///< held by whoever progresses conns_ (proxy or helper)
  std::vector<std::shared_ptr<NetConn>> conns_;  ///< progressMu_

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
