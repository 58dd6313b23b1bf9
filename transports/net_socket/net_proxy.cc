// NetProxy and NetConn: see net_proxy.h.
#include "transports/net_socket/net_proxy.h"

#include <endian.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "src/config/log.h"

namespace braid {

// ---- NetConn ----------------------------------------------------------------------

NetConn::NetConn(Dir dir, uint32_t nslots, uint64_t slotBytes, int peerRank)
    : dir_(dir), peerRank_(peerRank), slotBytes_(slotBytes) {
  // Whole pages: a device connection registers them with CUDA (pinning pages shared
  // with other allocations would pin those too).
  constexpr size_t kPage = 4096;
  bytes_ = (FifoLayout::bytesFor(nslots, slotBytes) + kPage - 1) & ~(kPage - 1);
  mem_ = std::aligned_alloc(kPage, bytes_);
  if (!mem_) return;
  FifoLayout::init(mem_, nslots, slotBytes);
  if (dir_ == Dir::kSend) rx_.attach(mem_);
  else tx_.attach(mem_);
}

NetConn::~NetConn() {
  sock_.close();
  cuda_.reset();  // the proxy let go of us (we are its last reference, or it removed us)
  std::free(mem_);
}

bool NetConn::sendFlushed() const {
  const auto* h = static_cast<const FifoHeader*>(mem_);
  return h->head.load(std::memory_order_acquire) == h->tail.load(std::memory_order_acquire);
}

void NetConn::setSocket(Socket sock, std::string peerAddr) {
  sock_ = std::move(sock);
  sock_.setLabel("net_socket");
  sock_.setNonBlocking(true);
  sock_.setNoDelay();
  peerAddr_ = std::move(peerAddr);
}

uint32_t NetConn::localClose() const {
  // The executor closes its end with the reason of its own side.
  return dir_ == Dir::kSend ? rx_.closed() : tx_.closed();
}

void NetConn::fail(const std::string& why, bool local) {
  if (failed()) return;
  reason_ = why;
  failedLocally_ = local;
  // Let the executor see it promptly: our FIFO end stands for the remote one.
  if (dir_ == Dir::kSend) {
    if (!rx_.closed()) rx_.close(kFifoReceiverAborted);
  } else {
    if (!tx_.closed()) tx_.close(kFifoSenderAborted);
  }
  sock_.close();  // the peer sees EOF at once
  failed_.store(true, std::memory_order_release);
  if (!local)
    BRAID_INFO(kLogNet | kLogProxy, "net_socket: connection %s rank %d (%s) failed: %s",
               dir_ == Dir::kSend ? "to" : "from", peerRank_, peerAddr_.c_str(), why.c_str());
}

bool NetConn::waitsOnFifo() const {
  if (failed()) return false;
  return dir_ == Dir::kSend ? !ioBlocked_ : waitingSpace_;
}

short NetConn::events() const {
  if (failed() || !sock_.valid()) return 0;
  if (dir_ == Dir::kSend) return short(POLLIN | (ioBlocked_ ? POLLOUT : 0));
  return waitingSpace_ ? 0 : POLLIN;
}

bool NetConn::progress(short rev) {
  if (failed()) return false;
  if (localClose()) {
    fail("closed by this rank", true);
    return true;
  }
  return dir_ == Dir::kSend ? progressSend(rev) : progressRecv(rev);
}

namespace {
std::string errnoText(int err, const char* what) {
  if (err == ECONNRESET || err == EPIPE) return std::string("peer closed the connection") + what;
  return std::string(std::strerror(err)) + what;
}
}  // namespace

bool NetConn::progressSend(short rev) {
  if (rev & (POLLIN | POLLERR | POLLHUP)) {
    // The receiver never writes: readable means EOF, reset or a protocol violation.
    char junk[64];
    ssize_t n = sock_.tryRecv(junk, sizeof junk);
    if (n < 0) {
      fail(errnoText(errno, ""), false);
      return true;
    }
    if (n > 0) {
      fail("protocol error: unexpected bytes from the receiver", false);
      return true;
    }
  }
  if (ioBlocked_ && !(rev & (POLLOUT | POLLERR | POLLHUP))) return false;
  ioBlocked_ = false;
  bool moved = false;
  for (int frames = 0; frames < 16; ++frames) {
    if (!inFrame_) {
      const char* p = nullptr;
      uint64_t n = rx_.peek(&p);
      if (!p) break;  // FIFO empty (a zero-byte slot still sets p)
      inFrame_ = true;
      payload_ = p;
      frameBytes_ = n;
      moved_ = 0;
      uint64_t le = htole64(n);
      std::memcpy(hdr_, &le, sizeof hdr_);
    }
    const uint64_t total = sizeof hdr_ + frameBytes_;
    while (moved_ < total) {
      // Header and payload in one call: no lone 8-byte segment under TCP_NODELAY.
      iovec iov[2];
      int niov = 0;
      if (moved_ < sizeof hdr_) {
        iov[niov++] = {hdr_ + moved_, sizeof hdr_ - size_t(moved_)};
        if (frameBytes_) iov[niov++] = {const_cast<char*>(payload_), size_t(frameBytes_)};
      } else {
        iov[niov++] = {const_cast<char*>(payload_) + (moved_ - sizeof hdr_),
                       size_t(total - moved_)};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = size_t(niov);
      ssize_t n = ::sendmsg(sock_.fd(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          ioBlocked_ = true;
          return moved;
        }
        fail(errnoText(errno, " (while sending)"), false);
        return true;
      }
      moved_ += uint64_t(n);
      moved = true;
    }
    rx_.release(frameBytes_);  // the bytes are in the kernel: the slot is free again
    inFrame_ = false;
    moved = true;
  }
  return moved;
}

bool NetConn::progressRecv(short rev) {
  if (waitingSpace_) {
    if (!tx_.acquire()) return false;  // still full
  } else if (ioBlocked_ && !(rev & (POLLIN | POLLERR | POLLHUP))) {
    return false;
  }
  ioBlocked_ = false;
  bool moved = false;
  for (int frames = 0; frames < 16; ++frames) {
    if (moved_ < sizeof hdr_) {
      ssize_t n = sock_.tryRecv(hdr_ + moved_, sizeof hdr_ - size_t(moved_));
      if (n < 0) {
        fail(errnoText(errno, moved_ ? " (in the middle of a message)" : ""), false);
        return true;
      }
      if (n == 0) {
        ioBlocked_ = true;
        return moved;
      }
      moved_ += uint64_t(n);
      moved = true;
      if (moved_ < sizeof hdr_) continue;
      uint64_t le;
      std::memcpy(&le, hdr_, sizeof le);
      frameBytes_ = le64toh(le);
      if (frameBytes_ > slotBytes_) {
        fail("protocol error: a message of " + std::to_string(frameBytes_) +
                 " bytes exceeds the slot size " + std::to_string(slotBytes_) +
                 " (NCCL_BUFFSIZE / BRAID_FIFO_SLOTS differ between ranks?)",
             false);
        return true;
      }
      slot_ = nullptr;
    }
    if (!slot_) {
      slot_ = tx_.acquire();
      if (!slot_) {
        waitingSpace_ = true;
        return moved;
      }
      waitingSpace_ = false;
    }
    const uint64_t total = sizeof hdr_ + frameBytes_;
    while (moved_ < total) {
      uint64_t got = moved_ - sizeof hdr_;
      ssize_t n = sock_.tryRecv(slot_ + got, size_t(frameBytes_ - got));
      if (n < 0) {
        fail(errnoText(errno, " (in the middle of a message)"), false);
        return true;
      }
      if (n == 0) {
        ioBlocked_ = true;
        return moved;
      }
      moved_ += uint64_t(n);
      moved = true;
    }
    tx_.commit(frameBytes_);
    slot_ = nullptr;
    moved_ = 0;
    moved = true;
  }
  return moved;
}

// ---- NetProxy ---------------------------------------------------------------------

NetProxy& NetProxy::get() {
  // One instance per process: a child created by fork() starts afresh (the parent's
  // instance, its thread and its connections do not exist there; its copy is leaked).
  static std::mutex mu;
  static NetProxy* inst = nullptr;
  static pid_t instPid = 0;
  std::lock_guard<std::mutex> lk(mu);
  if (!inst || instPid != getpid()) {
    inst = new NetProxy();
    instPid = getpid();
  }
  return *inst;
}

NetProxy::NetProxy() { eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void NetProxy::wake() {
  if (eventFd_ < 0) return;
  uint64_t one = 1;
  ssize_t n = write(eventFd_, &one, sizeof one);
  (void)n;  // a full counter still wakes the poller
}

void NetProxy::add(std::shared_ptr<NetConn> c) {
  std::lock_guard<std::mutex> life(lifeMu_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    toAdd_.push_back(std::move(c));
  }
  if (count_++ == 0) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = false;
    }
    thread_ = std::thread([this] { loop(); });
  }
  wake();
}

void NetProxy::remove(const NetConn* c) {
  std::lock_guard<std::mutex> life(lifeMu_);
  if (count_ == 0) return;  // not ours (e.g. registered in the parent before a fork)
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(mu_);
    toRemove_.push_back(c);
    seq = ++removeSeq_;
  }
  wake();
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return removeDone_ >= seq; });
  }
  if (--count_ == 0) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    wake();
    thread_.join();
  }
}

bool NetProxy::applyChanges(std::vector<std::shared_ptr<NetConn>>* conns) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& c : toAdd_) conns->push_back(std::move(c));
  toAdd_.clear();
  if (!toRemove_.empty()) {
    for (const NetConn* r : toRemove_)
      for (size_t i = 0; i < conns->size(); ++i)
        if ((*conns)[i].get() == r) {
          (*conns)[i] = std::move(conns->back());
          conns->pop_back();
          break;
        }
    toRemove_.clear();
    removeDone_ = removeSeq_;
    cv_.notify_all();
  }
  return !stop_;
}

void NetProxy::loop() {
  pthread_setname_np(pthread_self(), "braid-netproxy");
  using Clock = std::chrono::steady_clock;
  std::vector<std::shared_ptr<NetConn>> conns;
  std::vector<pollfd> pfds;
  std::vector<NetConn*> polled;
  auto lastMoved = Clock::now();
  while (applyChanges(&conns)) {
    bool moved = false;
    for (auto& c : conns) {
      moved |= c->progress(c->revents);
      c->revents = 0;
    }
    pfds.clear();
    polled.clear();
    pfds.push_back({eventFd_, POLLIN, 0});
    bool fifoWatch = false;
    for (auto& c : conns) {
      fifoWatch |= c->waitsOnFifo();
      if (short ev = c->events()) {
        pfds.push_back({c->fd(), ev, 0});
        polled.push_back(c.get());
      }
    }
    // Sleep policy: the executor cannot wake us, so while some connection waits on its
    // FIFO, poll it often: spin right after traffic, then 50 us, then 1 ms when idle.
    // Otherwise only sockets (and the eventfd) can make progress: still come back every
    // 100 ms to notice a FIFO closed by an aborting executor.
    timespec ts{0, 0};
    auto now = Clock::now();
    if (moved) lastMoved = now;
    auto idleUs =
        std::chrono::duration_cast<std::chrono::microseconds>(now - lastMoved).count();
    if (!fifoWatch) ts = {0, 100 * 1000 * 1000};
    else if (moved || idleUs < 200) ts = {0, 0};
    else if (idleUs < 20000) ts = {0, 50 * 1000};
    else ts = {0, 1000 * 1000};
    if (ts.tv_nsec == 0 && !moved) sched_yield();  // spinning: be polite on busy hosts
    int n = ::ppoll(pfds.data(), pfds.size(), &ts, nullptr);
    if (n > 0) {
      if (pfds[0].revents) {
        uint64_t v;
        ssize_t r = read(eventFd_, &v, sizeof v);
        (void)r;
      }
      for (size_t i = 1; i < pfds.size(); ++i) polled[i - 1]->revents = pfds[i].revents;
    }
  }
  conns.clear();
}

}  // namespace braid
