// NetProxy: see net_proxy.h.
#include "transports/net/net_proxy.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "src/config/error.h"
#include "src/exec/progress_assist.h"

namespace braid {
namespace {
// How long the proxy keeps spinning after the last movement before it sleeps.
constexpr int64_t kSpinUs = 200;
// How long after executors last helped the proxy keeps napping (1 ms) before it arms
// the doorbells and sleeps.
constexpr int64_t kHelpedNapMs = 20;
// The instance executors help (this process's).
std::atomic<NetProxy*> gHelped{nullptr};
}  // namespace

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

NetProxy::NetProxy() {
  eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  static std::once_flag once;
  std::call_once(once, [] {
    // A child of fork() must not progress its parent's connections.
    pthread_atfork(nullptr, nullptr, [] {
      gHelped.store(nullptr, std::memory_order_relaxed);
      ProgressAssist::resetInForkChild();
    });
  });
  gHelped.store(this, std::memory_order_release);
  ProgressAssist::registerEngine([] {
    NetProxy* p = gHelped.load(std::memory_order_acquire);
    return p && p->help();
  });
}

bool NetProxy::help() {
  std::unique_lock<std::mutex> lk(progressMu_, std::try_to_lock);
  if (!lk.owns_lock()) return false;
  // Other communicators' connections may fail here: their errors reach their executors
  // through checkPeer, not this thread's ncclGetLastError.
  const KeepThreadError keep;
  return progressAll();
}

bool NetProxy::progressAll() {
  bool moved = false;
  for (auto& c : conns_) moved |= c->progress();
  return moved;
}

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

bool NetProxy::applyChanges() {
  std::vector<std::shared_ptr<NetConn>>* conns = &conns_;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& c : toAdd_) {
    c->setWakeFd(eventFd_);
    conns->push_back(std::move(c));
  }
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
  std::vector<pollfd> pfds;
  std::vector<NetConn*> polled;
  auto lastMoved = Clock::now();
  auto lastHelped = lastMoved - std::chrono::seconds(1);
  uint64_t seenEntries = ProgressAssist::entries();
  for (;;) {
    std::unique_lock<std::mutex> lk(progressMu_);
    if (!applyChanges()) break;
    const bool moved = progressAll();
    // Spin right after traffic: the next message is usually microseconds away, and a
    // spinning proxy needs no wake-up.
    const auto now = Clock::now();
    if (moved) lastMoved = now;
    const auto idleUs =
        std::chrono::duration_cast<std::chrono::microseconds>(now - lastMoved).count();
    if (moved || idleUs < kSpinUs) {
      lk.unlock();
      sched_yield();  // be polite on busy hosts
      continue;
    }
    pfds.clear();
    polled.clear();
    pfds.push_back({eventFd_, POLLIN, 0});
    timespec ts{0, 100 * 1000 * 1000};
    const uint64_t entries = ProgressAssist::entries();
    if (ProgressAssist::waiting() > 0 || entries != seenEntries) lastHelped = now;
    seenEntries = entries;
    if (now - lastHelped < std::chrono::milliseconds(kHelpedNapMs)) {
      // Executors are progressing the connections (or were a moment ago, and likely
      // come back for the next operation): only cover what they leave, without making
      // them ring doorbells.
      ts = {0, 1000 * 1000};
    } else {
      // Sleep in poll() on the eventfd (doorbells rung by the executors, adds and
      // removes) and the nets' descriptors. Where only looking can tell (a FIFO a GPU
      // writes, a net without a descriptor, a connect in progress), nap: 50 us, then
      // 1 ms after 20 ms without traffic. Otherwise come back every 100 ms anyway.
      bool ready = false, nap = eventFd_ < 0;  // no eventfd: no doorbells either
      for (auto& c : conns_) {
        if (!c->armDoorbell()) ready = true;
        nap |= c->needsPolling();
      }
      if (!ready)
        for (auto& c : conns_) {
          int fd;
          short ev;
          c->pollSpec(&fd, &ev, &ready, &nap);
          if (fd >= 0) {
            pfds.push_back({fd, ev, 0});
            polled.push_back(c.get());
          }
        }
      if (ready) ts = {0, 0};
      else if (nap) ts = {0, idleUs < 20000 ? 50 * 1000 : 1000 * 1000};
    }
    lk.unlock();
    const int n = ::ppoll(pfds.data(), pfds.size(), &ts, nullptr);
    lk.lock();
    // polled[] is still valid: only this thread removes connections.
    for (auto& c : conns_) c->disarmDoorbell();
    if (n > 0) {
      if (pfds[0].revents) {
        uint64_t v;
        ssize_t r = read(eventFd_, &v, sizeof v);
        (void)r;
      }
      for (size_t i = 1; i < pfds.size(); ++i) polled[i - 1]->revents = pfds[i].revents;
    }
  }
  std::lock_guard<std::mutex> lk(progressMu_);
  conns_.clear();
}

}  // namespace braid
