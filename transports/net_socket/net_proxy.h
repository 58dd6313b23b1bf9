// NetProxy: the thread that moves net_socket connections' bytes between their local
// FIFOs and their TCP sockets.
//
// One proxy thread per process serves every registered connection of every
// communicator: the transport interface has no per-communicator hook to start or stop
// a thread, a single poll() set scales to many sockets, and it keeps the thread count
// of ncclCommInitAll-style programs (many ranks per process) at one. The thread starts
// with the first registered connection and is joined when the last one is removed.
//
// Wire format: each FIFO slot crosses as {uint64 little-endian bytes} + payload and is
// committed as one slot on the receiving side, so slot boundaries (whole elements) are
// preserved; the receiver's slots must be at least as large as the sender's.
//
// The executor never signals the proxy: while a send connection waits for FIFO data
// (or a receive connection for FIFO space) the proxy polls with short timeouts, spinning
// briefly after recent traffic and backing off to 1 ms when idle.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/exec/fifo.h"
#include "src/net/socket.h"
#include "transports/p2p/p2p_transport.h"

namespace braid {

/// One direction of one net_socket connection: a local FIFO and its socket.
class NetConn {
 public:
  enum class Dir { kSend, kRecv };
  /// Allocates and initialises the local FIFO. Check fifoMem() != nullptr.
  NetConn(Dir dir, uint32_t nslots, uint64_t slotBytes, int peerRank);
  ~NetConn();
  NetConn(const NetConn&) = delete;
  NetConn& operator=(const NetConn&) = delete;

  void* fifoMem() const { return mem_; }
  /// Device connections: pins and maps the FIFO for GPU dev (cudaHostRegister); *devPtr
  /// is its device address. Undone when the NetConn goes, after the proxy let go of it.
  ncclResult_t registerForDevice(int dev, const char* what, void** devPtr) {
    return cuda_.registerRange(mem_, bytes_, dev, what, devPtr);
  }
  Dir dir() const { return dir_; }
  /// Hands the connected socket over (before registering with the proxy).
  void setSocket(Socket sock, std::string peerAddr);

  /// True once the connection broke (peer EOF/reset, protocol error, local abort).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// Whether the failure came from our own side closing the FIFO (not the peer's fault).
  bool failedLocally() const { return failedLocally_; }
  /// Why it failed (valid once failed() is true).
  const std::string& reason() const { return reason_; }
  const std::string& peerAddr() const { return peerAddr_; }
  /// Send direction: every byte the executor published has been handed to the kernel
  /// (safe to call from any thread).
  bool sendFlushed() const;
  int peerRank() const { return peerRank_; }

  // ---- proxy thread only ----
  /// Moves what it can without blocking; `revents` are the last poll() results for the
  /// socket. Returns true if anything moved.
  bool progress(short revents);
  /// poll() events wanted on the socket (0: none).
  short events() const;
  int fd() const { return sock_.fd(); }
  /// True if only a FIFO change (made by the executor) can unblock this connection.
  bool waitsOnFifo() const;
  short revents = 0;  ///< set by the proxy after each poll()

 private:
  bool progressSend(short revents);
  bool progressRecv(short revents);
  void fail(const std::string& why, bool local);
  /// Nonzero if the executor closed its end of the FIFO.
  uint32_t localClose() const;

  const Dir dir_;
  const int peerRank_;
  const uint64_t slotBytes_;
  void* mem_ = nullptr;
  size_t bytes_ = 0;        ///< of mem_ (whole pages)
  HostRegistration cuda_;   ///< device mode: mem_ registered with CUDA
  FifoReceiver rx_;  ///< send direction: drains the executor's FIFO
  FifoSender tx_;    ///< receive direction: fills the executor's FIFO
  Socket sock_;
  std::string peerAddr_;
  std::atomic<bool> failed_{false};
  bool failedLocally_ = false;
  std::string reason_;

  // Frame in progress.
  bool inFrame_ = false;       ///< send: a slot is being written to the socket
  const char* payload_ = nullptr;
  uint64_t frameBytes_ = 0;    ///< payload bytes of the current frame
  uint64_t moved_ = 0;         ///< bytes of header+payload already moved
  unsigned char hdr_[8] = {};  ///< wire header (little-endian frameBytes_)
  char* slot_ = nullptr;       ///< recv: acquired slot for the current frame
  bool ioBlocked_ = false;     ///< last socket call would block: wait for poll()
  bool waitingSpace_ = false;  ///< recv: FIFO full
};

/// The process-wide proxy (see the file comment).
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
