// NetConn: see net_conn.h.
#include "transports/net/net_conn.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "src/config/log.h"
#include "src/config/error.h"
#include "src/net/socket.h"

namespace braid {

NetConn::NetConn(Dir dir, const Net* net, int dev, uint32_t nslots, uint64_t slotBytes,
                 int peerRank, int inflight, bool tagTrailer)
    : dir_(dir),
      net_(net),
      dev_(dev),
      peerRank_(peerRank),
      nslots_(nslots),
      slotBytes_(slotBytes),
      trailer_(tagTrailer ? kTrailerBytes : 0),
      stride_(slotBytes + (tagTrailer ? kTrailerRoom : 0)),
      inflight_(inflight) {
  // Whole pages: device mode registers them with CUDA, nets with the NIC.
  constexpr size_t kPage = 4096;
  const size_t fifo = (FifoLayout::bytesFor(nslots, stride_) + 63) & ~size_t(63);
  bytes_ = (fifo + sizeof(NetHello) + kPage - 1) & ~(kPage - 1);
  mem_ = std::aligned_alloc(kPage, bytes_);
  if (!mem_) return;
  std::memset(mem_, 0, bytes_);
  hdr_ = FifoLayout::init(mem_, nslots, stride_, slotBytes);
  slots_ = reinterpret_cast<SlotInfo*>(hdr_ + 1);
  data_ = static_cast<char*>(mem_) + FifoLayout::dataOffset(nslots);
  hello_ = reinterpret_cast<NetHello*>(static_cast<char*>(mem_) + fifo);
  hdr_->hasDoorbell = 1;  // the wake fd comes with the proxy (setWakeFd)
  reqs_.assign(size_t(inflight_), nullptr);
}

NetConn::~NetConn() {
  // The proxy has let go. Requests still posted belong to the comm we close now; the
  // net frees them with it. A connect still under way is given up.
  if (connecting_ && net_->ext.abandonConnect) net_->ext.abandonConnect(handle_.data());
  closeComm();
  cuda_.reset();
  std::free(mem_);
}

void NetConn::closeComm() {
  if (!comm_) return;
  if (mhandle_) net_->table->deregMr(comm_, mhandle_);
  if (dir_ == Dir::kSend) net_->table->closeSend(comm_);
  else net_->table->closeRecv(comm_);
  comm_ = nullptr;
  mhandle_ = nullptr;
}

bool NetConn::idle() const {
  return !connecting_ && comm_ && done_ == posted_ && !helloToSend_ && !helloReq_;
}

std::string NetConn::netError(const char* call, ncclResult_t r) const {
  std::string text = std::string(net_->name) + " net: " + call + " failed (error " +
                     std::to_string(int(r)) + ")";
  // Built-in nets leave their message as this thread's last error (a plugin's text is
  // in the log only: the thread's last error may be an older, unrelated one).
  const char* last = net_->external ? nullptr : lastError(nullptr);
  if (last && *last) text += ": " + std::string(last);
  return text;
}

ncclResult_t NetConn::registerFifo() {
  ncclResult_t r = net_->table->regMr(comm_, mem_, bytes_, NCCL_PTR_HOST, &mhandle_);
  if (r != ncclSuccess)
    return setError(r, nullptr, "%s", netError("regMr of the connection's FIFO", r).c_str());
  return ncclSuccess;
}

void NetConn::startConnect(const void* handle, size_t handleBytes, const NetHello& hello,
                           int64_t deadlineMs, std::string peerDesc) {
  handle_.assign(static_cast<const unsigned char*>(handle),
                 static_cast<const unsigned char*>(handle) + handleBytes);
  *hello_ = hello;
  deadlineMs_ = deadlineMs;
  connecting_ = true;
  helloToSend_ = true;
  peerDesc_ = std::move(peerDesc);
}

ncclResult_t NetConn::acceptHello(void* comm, const NetHello& expect, int64_t deadlineMs,
                                  const std::atomic<bool>* abort, bool* ok,
                                  std::string peerDesc) {
  *ok = false;
  comm_ = comm;
  peerDesc_ = std::move(peerDesc);
  BRAID_CHECK(registerFifo());
  void* buf = hello_;
  size_t size = sizeof(NetHello);
  int tag = 0;
  void* req = nullptr;
  auto drop = [&](const char* why) {
    BRAID_WARN("%s net: rejected a connection for rank %d <- rank %d (channel %d): %s",
               net_->name.c_str(), expect.rank, peerRank_, expect.channel, why);
    net_->table->deregMr(comm_, mhandle_);
    net_->table->closeRecv(comm_);
    comm_ = nullptr;
    mhandle_ = nullptr;
  };
  for (unsigned spins = 0; !req; ++spins) {
    void* phandle = nullptr;  // no profiler handles; some plugins read the array
    ncclResult_t r = net_->table->irecv(comm_, 1, &buf, &size, &tag, &mhandle_, &phandle, &req);
    if (r != ncclSuccess) {
      // Posting a receive fails here, not at the peer: waiting for another sender
      // would only run into the setup timeout.
      const std::string why = netError("irecv of the hello", r);
      drop(why.c_str());
      return setError(r, nullptr, "%s", why.c_str());
    }
    if (req) break;
    if ((abort && abort->load()) || (deadlineMs >= 0 && monotonicMs() > deadlineMs)) {
      drop("the net never took the hello's receive before the deadline");
      return ncclSuccess;
    }
    if (spins > 16) usleep(100);
  }
  int done = 0, got = 0;
  for (unsigned spins = 0;; ++spins) {
    ncclResult_t r = net_->table->test(req, &done, &got);
    if (r != ncclSuccess) {
      drop(netError("receiving the hello", r).c_str());
      return ncclSuccess;
    }
    if (done) break;
    if ((abort && abort->load()) || (deadlineMs >= 0 && monotonicMs() > deadlineMs)) {
      drop("no hello before the deadline");
      return ncclSuccess;
    }
    if (spins > 64) usleep(spins > 1024 ? 1000 : 50);
  }
  const NetHello h = *hello_;
  if (size_t(got) != sizeof(NetHello) || h.magic != NetHello::kMagic || h.secret != expect.secret) {
    drop("wrong job secret");
    return ncclSuccess;
  }
  if (h.channel != expect.channel || h.commHash != expect.commHash || h.rank != peerRank_) {
    drop("it is for another connection");
    return ncclSuccess;
  }
  if (h.slotBytes > slotBytes_)
    return setError(ncclInvalidUsage, nullptr,
                    "%s net: rank %d uses %llu-byte slots, this rank %llu: NCCL_BUFFSIZE / "
                    "BRAID_FIFO_SLOTS must be equal on every rank", net_->name.c_str(), peerRank_,
                    (unsigned long long)h.slotBytes, (unsigned long long)slotBytes_);
  *ok = true;
  established_.store(true, std::memory_order_release);
  return ncclSuccess;
}

bool NetConn::sendFlushed() const {
  // Even with nothing published, wait for the connection to be made: the receiver is
  // in its accept and would otherwise wait out its setup timeout.
  return established_.load(std::memory_order_acquire) &&
         hdr_->head.load(std::memory_order_acquire) ==
             hdr_->tail.load(std::memory_order_acquire);
}

uint32_t NetConn::localClose() const { return hdr_->closed.load(std::memory_order_acquire); }

void NetConn::fail(const std::string& why, bool local) {
  if (failed()) return;
  reason_ = why;
  failedLocally_ = local;
  // Our FIFO end stands for the remote one: let the executor see the failure.
  uint32_t open = kFifoOpen;  // keep the executor's own reason if it closed first
  hdr_->closed.compare_exchange_strong(
      open, dir_ == Dir::kSend ? kFifoReceiverAborted : kFifoSenderAborted,
      std::memory_order_acq_rel);
  // Close at once: the peer sees it (EOF, a QP error) instead of waiting on us.
  closeComm();
  if (connecting_ && net_->ext.abandonConnect) net_->ext.abandonConnect(handle_.data());
  connecting_ = false;
  failed_.store(true, std::memory_order_release);
  if (!local)
    BRAID_INFO(kLogNet | kLogProxy, "%s net: connection %s rank %d (%s) failed: %s",
               net_->name.c_str(), dir_ == Dir::kSend ? "to" : "from", peerRank_,
               peerDesc_.c_str(), why.c_str());
}

bool NetConn::progress() {
  if (failed()) return false;
  // What the FIFO looked like to this pass (armDoorbell compares), also while connecting.
  if (dir_ == Dir::kSend) seenTail_ = hdr_->tail.load(std::memory_order_acquire);
  else seenHead_ = hdr_->head.load(std::memory_order_acquire);
  if (const uint32_t why = localClose()) {
    // A rank that found a collective mismatch first delivers what it had published (for
    // up to a second), so that its peer finds the mismatch on the data too and names
    // both calls, instead of only seeing the connection go.
    if (why == kFifoMismatch && dir_ == Dir::kSend && comm_ && !connecting_ &&
        established_.load(std::memory_order_acquire) &&
        (posted_ < seenTail_ || done_ < posted_)) {
      if (flushUntilMs_ == 0) flushUntilMs_ = monotonicMs() + 1000;
      if (monotonicMs() < flushUntilMs_) return progressSend();
    }
    fail("closed by this rank", true);
    return true;
  }
  if (connecting_) return progressConnect();
  if (!comm_) return false;
  return dir_ == Dir::kSend ? progressSend() : progressRecv();
}

bool NetConn::progressConnect() {
  ncclNetDeviceHandle_v11_t* devHandle = nullptr;
  void* comm = nullptr;
  ncclResult_t r = net_->table->connect(net_->ctx, dev_, handle_.data(), &comm, &devHandle);
  if (r != ncclSuccess) {
    fail(netError("connect", r), false);
    return true;
  }
  if (!comm) {
    if (deadlineMs_ >= 0 && monotonicMs() > deadlineMs_)
      fail("could not connect within the setup timeout (BRAID_BOOTSTRAP_TIMEOUT_MS)", false);
    return false;
  }
  comm_ = comm;
  connecting_ = false;
  if (registerFifo() != ncclSuccess) {
    fail(lastError(nullptr), false);
    return true;
  }
  return true;
}

bool NetConn::progressSend() {
  bool moved = false;
  const ncclNet_v11_t* t = net_->table;
  int done = 0, size = 0;
  const uint64_t tail = seenTail_;
  if (goodbyeWanted_.load(std::memory_order_acquire)) goodbyeSeen_ = true;
  if (helloToSend_) {
    ncclResult_t r = t->isend(comm_, hello_, sizeof(NetHello), 0, mhandle_, nullptr, &helloReq_);
    if (r != ncclSuccess) {
      fail(netError("isend of the hello", r), false);
      return true;
    }
    if (!helloReq_) return false;
    helloToSend_ = false;  // posted (the buffer stays valid: it lives with the FIFO)
    moved = true;
  }
  if (helloReq_) {
    ncclResult_t r = t->test(helloReq_, &done, &size);
    if (r != ncclSuccess) {
      fail(netError("sending the hello", r), false);
      return true;
    }
    if (done) {
      helloReq_ = nullptr;
      moved = true;
      established_.store(true, std::memory_order_release);
    }
  }
  // Nothing in flight: a readable descriptor can only mean the receiver went away.
  if (idle() && net_->ext.peerGone && (revents & (POLLIN | POLLHUP | POLLERR))) {
    revents = 0;
    std::string why;
    if (net_->ext.peerGone(comm_, &why)) {
      fail(why, false);
      return true;
    }
  }
  // Complete in posting order: each completed send frees its FIFO slot.
  while (done_ < posted_) {
    void*& req = reqs_[done_ % uint64_t(inflight_)];
    ncclResult_t r = t->test(req, &done, &size);
    if (r != ncclSuccess) {
      fail(netError("test of a send", r), false);
      return true;
    }
    if (!done) break;
    req = nullptr;
    ++done_;
    hdr_->head.store(done_, std::memory_order_release);
    moved = true;
  }
  if (goodbyeSeen_ && posted_ == tail && done_ == posted_ &&
      established_.load(std::memory_order_acquire))
    return progressGoodbye() || moved;
  while (posted_ < tail && posted_ - done_ < uint64_t(inflight_)) {
    const uint64_t slot = posted_ % nslots_;
    char* at = data_ + slot * stride_;
    const uint64_t bytes = slots_[slot].bytes;
    if (trailer_) std::memcpy(at + bytes, &slots_[slot].tag, trailer_);  // room: kTrailerRoom
    void* req = nullptr;
    ncclResult_t r = t->isend(comm_, at, size_t(bytes + trailer_), 0, mhandle_, nullptr, &req);
    if (r != ncclSuccess) {
      fail(netError("isend", r), false);
      return true;
    }
    if (!req) break;  // the net cannot take it yet
    reqs_[posted_ % uint64_t(inflight_)] = req;
    ++posted_;
    moved = true;
  }
  return moved;
}

bool NetConn::progressGoodbye() {
  if (goodbyeDone_.load(std::memory_order_relaxed)) return false;
  const ncclNet_v11_t* t = net_->table;
  bool moved = false;
  auto giveUp = [&](const char* call, ncclResult_t r) {
    // The receiver may have closed first: no error for a finished connection.
    BRAID_INFO(kLogNet, "%s net: goodbye to rank %d not delivered: %s", net_->name.c_str(),
               peerRank_, netError(call, r).c_str());
    goodbyesDone_ = goodbyesPosted_;  // their requests go with the comm
    goodbyeDone_.store(true, std::memory_order_release);
    return true;
  };
  if (goodbyeReqs_.empty()) goodbyeReqs_.assign(size_t(inflight_), nullptr);
  while (goodbyesPosted_ < inflight_) {
    void* req = nullptr;
    ncclResult_t r = t->isend(comm_, data_, 0, 0, mhandle_, nullptr, &req);
    if (r != ncclSuccess) return giveUp("isend of a goodbye", r);
    if (!req) break;
    goodbyeReqs_[size_t(goodbyesPosted_++)] = req;
    moved = true;
  }
  while (goodbyesDone_ < goodbyesPosted_) {
    int done = 0, size = 0;
    ncclResult_t r = t->test(goodbyeReqs_[size_t(goodbyesDone_)], &done, &size);
    if (r != ncclSuccess) return giveUp("test of a goodbye", r);
    if (!done) break;
    ++goodbyesDone_;
    moved = true;
  }
  if (goodbyesDone_ == inflight_) goodbyeDone_.store(true, std::memory_order_release);
  return moved;
}

bool NetConn::progressRecv() {
  bool moved = false;
  const ncclNet_v11_t* t = net_->table;
  while (done_ < posted_) {
    void*& req = reqs_[done_ % uint64_t(inflight_)];
    int done = 0, size = 0;
    ncclResult_t r = t->test(req, &done, &size);
    if (r != ncclSuccess) {
      fail(netError("test of a receive", r), false);
      return true;
    }
    if (!done) break;
    req = nullptr;
    if (size == 0) {  // a goodbye: the sender is closing; its data all came before
      ++done_;
      ++goodbyesReceived_;
      moved = true;
      continue;
    }
    // Senders never send empty data slots: an empty one would read as "no data".
    if (size < 0 || uint64_t(size) <= trailer_ || uint64_t(size) > slotBytes_ + trailer_ ||
        goodbyesReceived_ > 0) {
      fail(goodbyesReceived_ > 0 ? std::string("protocol error: data after the sender's goodbye")
                            : "protocol error: a message of " + std::to_string(size) +
                                  " bytes for a slot of " + std::to_string(slotBytes_) +
                                  (trailer_ ? " and its tag" : ""),
           false);
      return true;
    }
    SlotInfo& s = slots_[done_ % nslots_];
    s.bytes = uint64_t(size) - trailer_;
    s.direct = 0;
    if (trailer_) std::memcpy(&s.tag, data_ + (done_ % nslots_) * stride_ + s.bytes, trailer_);
    else s.tag = CallTag();
    ++done_;
    hdr_->tail.store(done_, std::memory_order_release);  // publish the slot
    moved = true;
  }
  if (goodbyesReceived_ >= inflight_ && done_ == posted_)
    goodbyeDone_.store(true, std::memory_order_release);
  const uint64_t head = seenHead_;  // the executor's consumption
  // After a goodbye, only the receives the remaining goodbyes need.
  while (posted_ - head < nslots_ && posted_ - done_ < uint64_t(inflight_) &&
         (goodbyesReceived_ == 0 ||
          uint64_t(goodbyesReceived_) + (posted_ - done_) < uint64_t(inflight_))) {
    void* buf = data_ + (posted_ % nslots_) * stride_;
    size_t size = size_t(slotBytes_ + trailer_);
    int tag = 0;
    void* req = nullptr;
    void* phandle = nullptr;
    ncclResult_t r = t->irecv(comm_, 1, &buf, &size, &tag, &mhandle_, &phandle, &req);
    if (r != ncclSuccess) {
      fail(netError("irecv", r), false);
      return true;
    }
    if (!req) break;
    reqs_[posted_ % uint64_t(inflight_)] = req;
    ++posted_;
    moved = true;
  }
  return moved;
}

bool NetConn::waitsOnNet() const {
  if (helloToSend_ || helloReq_ || done_ < posted_) return true;
  // Goodbyes in flight, or waiting for the net to take them (a receive to match).
  if (goodbyeSeen_ && !goodbyeDone_.load(std::memory_order_relaxed)) return true;
  // A send the net could not take yet (e.g. no receive posted by the peer).
  return dir_ == Dir::kSend && posted_ < seenTail_;
}

void NetConn::pollSpec(int* fd, short* events, bool* ready, bool* nap) const {
  *fd = -1;
  *events = 0;
  if (failed() || connecting_ || !comm_ || !net_->ext.pollFd) return;
  const bool waiting = waitsOnNet();
  if (waiting) {
    *fd = net_->ext.pollFd(comm_, events);
  } else if (dir_ == Dir::kSend && net_->ext.peerGone) {
    *fd = net_->ext.pollFd(comm_, events);  // to notice a receiver that went away
    *events = POLLIN;
  }
  if (*fd == kNetPollReady) {
    *fd = -1;
    *ready = true;
  } else if (*fd < 0 && waiting) {
    *nap = true;  // this comm has no descriptor after all
  }
}

bool NetConn::needsPolling() const {
  if (failed()) return false;
  if (connecting_ || !comm_) return true;
  if (waitsOnNet() && net_->ext.pollFd == nullptr) return true;
  // Otherwise the executor's side of the FIFO: the doorbell tells, if it has one.
  return hdr_->hasDoorbell == 0;
}

bool NetConn::armDoorbell() {
  if (failed() || !hdr_->hasDoorbell) return true;
  hdr_->proxyAsleep.store(1, std::memory_order_seq_cst);
  // requestGoodbye() sets its flag, then rings: seq_cst on both sides, like the counters.
  const bool moved =
      hdr_->closed.load(std::memory_order_seq_cst) != 0 ||
      (dir_ == Dir::kSend
           ? hdr_->tail.load(std::memory_order_seq_cst) != seenTail_ ||
                 goodbyeWanted_.load(std::memory_order_seq_cst) != goodbyeSeen_
           : hdr_->head.load(std::memory_order_seq_cst) != seenHead_);
  if (moved) hdr_->proxyAsleep.store(0, std::memory_order_relaxed);
  return !moved;
}

void NetConn::disarmDoorbell() { hdr_->proxyAsleep.store(0, std::memory_order_relaxed); }

}  // namespace braid
