// NetProxy: see net_proxy.h.
#include "transports/net/net_proxy.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

namespace braid {

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
    for (auto& c : conns) moved |= c->progress();
    pfds.clear();
    polled.clear();
    pfds.push_back({eventFd_, POLLIN, 0});
    bool watch = false;
    for (auto& c : conns) {
      watch |= c->needsPolling();
      int fd;
      short ev;
      c->pollSpec(&fd, &ev);
      if (fd >= 0) {
        pfds.push_back({fd, ev, 0});
        polled.push_back(c.get());
      }
    }
    // Sleep policy: while some connection can only be noticed by looking (its FIFO, a
    // net without a descriptor, a connect in progress), look often: spin right after
    // traffic, then every 50 us, then every 1 ms when idle. Otherwise only descriptors
    // (and the eventfd) can make progress: still come back every 100 ms to notice a
    // FIFO closed by an aborting executor.
    timespec ts{0, 0};
    auto now = Clock::now();
    if (moved) lastMoved = now;
    auto idleUs =
        std::chrono::duration_cast<std::chrono::microseconds>(now - lastMoved).count();
    if (!watch) ts = {0, 100 * 1000 * 1000};
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
