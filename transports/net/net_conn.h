// NetConn: one direction of one net-transport connection: the local FIFO the executor
// uses, the network comm (ncclNet_v11_t) that carries it, and the requests posted on it.
//
// Each FIFO slot crosses the network as one message (isend of the slot's bytes; irecv
// into a free slot of the receiver's FIFO, whose size the completion reports), so slot
// boundaries are kept and the receiver's slots must be at least as large as the
// sender's. On host connections the message ends with the slot's CallTag (16 bytes
// after the payload: each slot keeps room for it), which the receiving proxy puts back
// into the slot's SlotInfo, so the executor compares it as on any FIFO. Device
// connections carry no trailer (the CUDA executor does not tag its slots). Up to `inflight` messages are posted per direction; nets complete them in
// posting order.
//
// Goodbye: receives stay posted between operations (the FIFO is a stream), but some
// plugins refuse or leak a receive comm closed with receives posted. So at teardown,
// once everything published has been sent, the sender sends `inflight` empty messages
// (data slots are never empty): each completes one of the receiver's posted receives,
// and the receiver posts only as many more as goodbyes are still to come. Teardown waits a moment for
// this (NetResource::drained: the send end, and a plugin's receive end).
//
// Life: the transport creates it (FIFO allocated, registered for the GPU in device
// mode), sets it up (the receive side accepts and checks the sender's hello on the
// setup thread; the send side leaves connecting to the proxy, which must not block the
// setup thread: one thread may run both ends), then hands it to the NetProxy, whose
// thread alone calls progress(). After the proxy let it go the owner destroys it:
// memory deregistered, comm closed.
#pragma once
#include <poll.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "src/exec/fifo.h"
#include "transports/net/net_registry.h"
#include "transports/p2p/p2p_transport.h"

namespace braid {

/// First message on every connection, sender -> receiver (from the FIFO region).
struct NetHello {
  static constexpr uint64_t kMagic = 0x42524149444e4554ull;  // "BRAIDNET"
  uint64_t magic;
  uint64_t secret;     ///< the job secret: a connection without it is refused
  uint64_t slotBytes;  ///< must not exceed the receiver's
  int32_t channel;
  int32_t rank;
  uint64_t commHash;
};

class NetConn {
 public:
  enum class Dir { kSend, kRecv };
  /// Allocates and initialises the FIFO (check fifoMem() != nullptr). tagTrailer: the
  /// messages carry the slots' tags (both ends must agree: host connections do).
  NetConn(Dir dir, const Net* net, int dev, uint32_t nslots, uint64_t slotBytes, int peerRank,
          int inflight, bool tagTrailer);
  /// Bytes a message carries besides a slot's payload.
  static constexpr uint64_t kTrailerBytes = sizeof(CallTag);
  /// Room kept after each slot's payload for the trailer (whole cache lines).
  static constexpr uint64_t kTrailerRoom = 64;
  ~NetConn();
  NetConn(const NetConn&) = delete;
  NetConn& operator=(const NetConn&) = delete;

  void* fifoMem() const { return mem_; }
  Dir dir() const { return dir_; }
  int peerRank() const { return peerRank_; }
  const Net* net() const { return net_; }
  int dev() const { return dev_; }
  /// Device connections: maps the FIFO for GPU dev (cudaHostRegister). A GPU kernel
  /// cannot ring the proxy's doorbell: the proxy then watches this FIFO by polling.
  ncclResult_t registerForDevice(int dev, const char* what, void** devPtr) {
    hdr_->hasDoorbell = 0;
    return cuda_.registerRange(mem_, bytes_, dev, what, devPtr);
  }

  // ---- setup (owner thread, before the proxy has it) ----
  /// Send side: the proxy will call connect() with this handle until it succeeds or
  /// deadlineMs passes, then send `hello` first.
  void startConnect(const void* handle, size_t handleBytes, const NetHello& hello,
                    int64_t deadlineMs, std::string peerDesc);
  /// Receive side: `comm` accepted; registers the FIFO and receives the hello (until
  /// deadlineMs / abort). ncclSuccess with *ok false: not our sender (closed, logged).
  ncclResult_t acceptHello(void* comm, const NetHello& expect, int64_t deadlineMs,
                           const std::atomic<bool>* abort, bool* ok, std::string peerDesc);

  // ---- state (any thread) ----
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  bool failedLocally() const { return failedLocally_; }
  const std::string& reason() const { return reason_; }
  const std::string& peerDesc() const { return peerDesc_; }
  /// Send side: connected, and every published slot has been sent (its request
  /// completed).
  bool sendFlushed() const;
  /// Send side, at teardown: once flushed, send the goodbyes (see above).
  void requestGoodbye() {
    if (goodbyeWanted_.exchange(true, std::memory_order_seq_cst)) return;
    fifoRingDoorbell(hdr_);  // a sleeping proxy would not look for it (see armDoorbell)
  }
  /// Send side: the goodbyes went out; receive side: they came (nothing is posted any
  /// more). Or the connection failed.
  bool goodbyeDone() const { return goodbyeDone_.load(std::memory_order_acquire) || failed(); }

  // ---- proxy thread only ----
  /// Moves what it can; returns true if anything happened.
  bool progress();
  /// Before the proxy sleeps: a descriptor to poll while this connection waits on the
  /// network (fd -1: none). Sets *ready when the net says it can move now, *nap when it
  /// waits on a net that gave no descriptor.
  void pollSpec(int* fd, short* events, bool* ready, bool* nap) const;
  /// True while only polling (a FIFO without a doorbell, a net without a poll fd, a
  /// pending connect) can tell that this connection can move: the proxy then naps.
  bool needsPolling() const;
  /// Before the proxy sleeps: arms the FIFO's doorbell (the executor wakes the proxy
  /// when it publishes, consumes or closes). False if the FIFO moved since progress()
  /// last looked (do not sleep). disarm() after waking.
  bool armDoorbell();
  void disarmDoorbell();
  /// The proxy's eventfd, which the executor writes to wake it.
  void setWakeFd(int fd) { hdr_->proxyWakeFd = fd; }
  short revents = 0;  ///< set by the proxy after each poll() on pollSpec's descriptor

 private:
  bool progressConnect();
  bool progressSend();
  bool progressGoodbye();
  bool progressRecv();
  void fail(const std::string& why, bool local);
  void closeComm();
  bool idle() const;
  bool waitsOnNet() const;
  std::string netError(const char* call, ncclResult_t r) const;
  ncclResult_t registerFifo();
  uint32_t localClose() const;

  const Dir dir_;
  const Net* net_;
  const int dev_;
  const int peerRank_;
  const uint32_t nslots_;
  const uint64_t slotBytes_;  ///< payload bytes per slot
  const uint64_t trailer_;    ///< kTrailerBytes, or 0 (device connections)
  const uint64_t stride_;     ///< distance between slots in the FIFO
  const int inflight_;
  void* mem_ = nullptr;
  size_t bytes_ = 0;          ///< of mem_ (whole pages): FIFO, then the hello
  FifoHeader* hdr_ = nullptr;
  SlotInfo* slots_ = nullptr;
  char* data_ = nullptr;
  NetHello* hello_ = nullptr;  ///< in mem_, so the FIFO's registration covers it
  HostRegistration cuda_;

  void* comm_ = nullptr;      ///< sendComm / recvComm
  void* mhandle_ = nullptr;   ///< registration of mem_
  bool connecting_ = false;
  std::vector<unsigned char> handle_;  ///< send side: the listener's handle (connect state)
  int64_t deadlineMs_ = 0;
  int64_t flushUntilMs_ = 0;  ///< closed for a mismatch: deliver what was published until then
  bool helloToSend_ = false;
  void* helloReq_ = nullptr;
  std::vector<void*> reqs_;   ///< ring of posted requests (inflight_)
  uint64_t done_ = 0;         ///< slots whose request completed
  uint64_t posted_ = 0;       ///< slots with a request posted
  uint64_t seenTail_ = 0;     ///< send: the FIFO tail progress() last saw
  uint64_t seenHead_ = 0;     ///< receive: the FIFO head progress() last saw

  std::atomic<bool> established_{false};  ///< connected and the hello delivered
  std::atomic<bool> goodbyeWanted_{false};
  std::atomic<bool> goodbyeDone_{false};
  std::vector<void*> goodbyeReqs_;  ///< send side: the goodbyes' requests
  int goodbyesPosted_ = 0;
  int goodbyesDone_ = 0;
  bool goodbyeSeen_ = false;  ///< send side: progress() has seen goodbyeWanted_
  int goodbyesReceived_ = 0;  ///< receive side: then only inflight_ receives in all
  std::atomic<bool> failed_{false};
  bool failedLocally_ = false;
  std::string reason_;
  std::string peerDesc_;
};

}  // namespace braid
