// SwitchServer: see switch_server.h.
#include "src/tools/switch_server/switch_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <cstdio>
#include <cstring>
#include <new>

#include "src/config/log.h"
#include "src/config/error.h"

namespace braid {

namespace {

constexpr size_t kReadBudget = size_t(4) << 20;  ///< bytes read from one conn per turn
constexpr int64_t kCloseGraceMs = 2000;           ///< a closing conn's time to flush
constexpr int64_t kRetryMs = 100;                 ///< parent not listening yet: retry

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string reasonText(const std::string& s) {
  return s.size() > wire::kMaxReasonBytes ? s.substr(0, wire::kMaxReasonBytes) : s;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

SwitchServer::SwitchServer() = default;

SwitchServer::~SwitchServer() { stop(); }

std::string SwitchServer::start(const std::string& listenAddr, const SwitchOptions& options) {
  opts_ = options;
  if (opts_.pieceBytes < 4096) opts_.pieceBytes = 4096;
  opts_.pieceBytes -= opts_.pieceBytes % 64;
  SockAddr addr;
  if (!SockAddr::parse(listenAddr, &addr)) {
    error_ = "bad listen address '" + listenAddr + "' (HOST:PORT expected)";
    return "";
  }
  if (!opts_.parent.empty()) {
    if (!SockAddr::parse(opts_.parent, &parentAddr_)) {
      error_ = "bad parent address '" + opts_.parent + "' (HOST:PORT expected)";
      return "";
    }
    hasParent_ = true;
  }
  listener_.setLabel("listener");
  SockAddr bound;
  if (listener_.listen(addr, &bound) != ncclSuccess) {
    error_ = lastError(nullptr);
    return "";
  }
  listener_.setNonBlocking(true);
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) {
    error_ = std::string("eventfd: ") + std::strerror(errno);
    listener_.close();
    return "";
  }
  address_ = bound.toString();
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
  log(false, "braid-switch " + address_ + ": listening" +
                 (hasParent_ ? ", parent " + opts_.parent : std::string()) +
                 (opts_.requireSecret ? ", one job secret admitted" : ""));
  return address_;
}

void SwitchServer::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  uint64_t one = 1;
  ssize_t k = ::write(wakeFd_, &one, sizeof one);
  (void)k;
  thread_.join();
  conns_.clear();
  groups_.clear();
  groupCount_ = 0;
  connCount_ = 0;
  listener_.close();
  ::close(wakeFd_);
  wakeFd_ = -1;
}

void SwitchServer::log(bool warn, const std::string& line) {
  if (opts_.log) {
    opts_.log(warn, line);
  } else if (warn) {
    BRAID_WARN("%s", line.c_str());
  } else {
    BRAID_INFO(kLogNet, "%s", line.c_str());
  }
}

FrameConn* SwitchServer::addConn(int fd, std::string peer) {
  conns_.push_back(std::make_unique<FrameConn>(fd, std::move(peer)));
  return conns_.back().get();
}

// ---- the loop ---------------------------------------------------------------------------

void SwitchServer::loop() {
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.clear();
    fds.push_back({wakeFd_, POLLIN, 0});
    // Out of descriptors: leave new connections waiting in the backlog for a while.
    const bool acceptNow = monotonicMs() >= acceptPausedUntil_;
    fds.push_back({acceptNow ? listener_.fd() : -1, POLLIN, 0});
    const size_t n = conns_.size();
    for (size_t i = 0; i < n; ++i) {
      FrameConn* c = conns_[i].get();
      short ev = c->connecting ? short(POLLOUT) : short(POLLIN);
      if (!c->connecting && c->wantsWrite()) ev |= POLLOUT;
      fds.push_back({c->fd(), ev, 0});
    }
    int64_t now = monotonicMs();
    int64_t next = now + 250;
    if (!acceptNow) next = std::min(next, acceptPausedUntil_);
    for (const auto& c : conns_)
      if (c->deadlineMs >= 0) next = std::min(next, c->deadlineMs);
    for (const auto& g : groups_) {
      if (!g.second->formed && g.second->formDeadlineMs >= 0)
        next = std::min(next, g.second->formDeadlineMs);
      if (g.second->upRetryMs >= 0) next = std::min(next, g.second->upRetryMs);
    }
    int rc = ::poll(fds.data(), fds.size(), int(std::max<int64_t>(0, next - now)));
    if (rc < 0 && errno != EINTR) {
      log(true, "braid-switch " + address_ + ": poll failed: " + std::strerror(errno));
      break;
    }
    if (fds[0].revents) {
      uint64_t v;
      ssize_t k = ::read(wakeFd_, &v, sizeof v);
      (void)k;
    }
    if (stop_) break;
    if (fds[1].revents) acceptAll();
    for (size_t i = 0; i < n; ++i) {
      FrameConn* c = conns_[i].get();
      const short re = fds[i + 2].revents;
      if (!re || c->dead) continue;
      if (c->connecting) {
        finishConnect(c);
        continue;
      }
      if (re & (POLLIN | POLLHUP | POLLERR)) {
        SwitchGroup* g = c->group;
        std::string why;
        FrameConn::ReadResult r = c->readSome(this, kReadBudget, &why);
        if (r == FrameConn::ReadResult::kClosed) lostConn(c, why);
        if (g && !g->dead) g->pump();
      }
    }
    // Send what the loop produced (results, welcomes, failures) right away.
    for (size_t i = 0; i < conns_.size(); ++i) {
      FrameConn* c = conns_[i].get();
      if (c->dead || c->connecting) continue;
      if (c->wantsWrite()) {
        std::string why;
        if (!c->flush(&why)) {
          lostConn(c, why);
          continue;
        }
      }
      if (c->role == FrameConn::Role::kClosing && !c->wantsWrite() && !c->shutSent) {
        ::shutdown(c->fd(), SHUT_WR);
        c->shutSent = true;
      }
    }
    timers(monotonicMs());
    sweep();
  }
}

void SwitchServer::acceptAll() {
  for (;;) {
    int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        log(true, "braid-switch " + address_ + ": accept failed: " + std::strerror(errno) +
                      "; not accepting for 100 ms");
        acceptPausedUntil_ = monotonicMs() + 100;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log(true, "braid-switch " + address_ + ": accept failed: " + std::strerror(errno));
      }
      return;
    }
    setNoDelay(fd);
    Socket probe(fd);
    std::string peer = probe.peerAddress();
    probe.release();
    FrameConn* c = addConn(fd, peer);
    c->deadlineMs = monotonicMs() + opts_.timeoutMs;
  }
}

void SwitchServer::timers(int64_t now) {
  for (auto& cp : conns_) {
    FrameConn* c = cp.get();
    if (c->dead || c->deadlineMs < 0 || now < c->deadlineMs) continue;
    if (c->role == FrameConn::Role::kHello) {
      log(true, "braid-switch " + address_ + ": no hello from " + c->peer() + " within " +
                    std::to_string(opts_.timeoutMs) + " ms; closed");
      c->dead = true;
    } else if (c->role == FrameConn::Role::kClosing) {
      c->dead = true;
    }
  }
  for (auto& gp : groups_) {
    SwitchGroup* g = gp.second.get();
    if (g->dead) continue;
    if (!g->formed && g->formDeadlineMs >= 0 && now >= g->formDeadlineMs) {
      const std::string waitingFor =
          g->complete() ? "the parent switch " + opts_.parent : g->missing();
      failGroup(g, g->label() + ": timed out after " + std::to_string(opts_.timeoutMs) +
                       " ms waiting for " + waitingFor, false);
      continue;
    }
    if (g->upRetryMs >= 0 && now >= g->upRetryMs) {
      g->upRetryMs = -1;
      startUp(g);
    }
  }
}

void SwitchServer::sweep() {
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (it->second->dead) {
      for (auto& c : conns_)
        if (c->group == it->second.get()) c->group = nullptr;
      it = groups_.erase(it);
    } else {
      ++it;
    }
  }
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                              [](const std::unique_ptr<FrameConn>& c) { return c->dead; }),
               conns_.end());
  int open = 0;
  for (const auto& g : groups_) open += g.second->dead ? 0 : 1;
  groupCount_ = open;
  connCount_ = int(conns_.size());
}

// ---- connections going away -------------------------------------------------------------

void SwitchServer::closeConn(FrameConn* c, int64_t graceMs) {
  c->role = FrameConn::Role::kClosing;
  c->group = nullptr;
  c->port = -1;
  c->deadlineMs = monotonicMs() + graceMs;
}

void SwitchServer::refuse(FrameConn* c, const std::string& why) {
  log(true, "braid-switch " + address_ + ": refused " + c->peer() + ": " + why);
  c->queueControl(wire::kRefuse, 0, reasonText("braid-switch " + address_ + ": " + why));
  closeConn(c, kCloseGraceMs);
}

void SwitchServer::lostConn(FrameConn* c, const std::string& why) {
  SwitchGroup* g = c->group;
  const FrameConn::Role role = c->role;
  const int port = c->port;
  c->dead = true;
  c->group = nullptr;
  if (!g || g->dead) return;
  if (role == FrameConn::Role::kPort) {
    g->join(port, nullptr);
    failGroup(g, g->label() + ": " + g->portName(port) + " went away (" + why + ")", false);
  } else if (role == FrameConn::Role::kUp) {
    g->up = nullptr;
    failGroup(g, g->label() + ": the parent switch " + opts_.parent + " went away (" + why + ")",
              true);
  }
}

void SwitchServer::failGroup(SwitchGroup* g, const std::string& why, bool fromUp) {
  if (g->dead) return;
  g->dead = true;
  log(true, why);
  const uint32_t kind = g->formed ? wire::kFail : wire::kRefuse;
  const std::string text = reasonText(why);
  for (int p = 0; p < g->numPorts(); ++p) {
    FrameConn* c = g->portConn(p);
    if (!c) continue;
    c->queueControl(kind, 0, text);
    closeConn(c, kCloseGraceMs);
    g->join(p, nullptr);
  }
  if (g->up) {
    if (!fromUp && !g->up->connecting) g->up->queueControl(wire::kFail, 0, text);
    if (g->up->connecting) g->up->dead = true;
    else closeConn(g->up, kCloseGraceMs);
    g->up = nullptr;
  }
}

void SwitchServer::finishGroup(SwitchGroup* g) {
  log(false, g->label() + ": closed by all members");
  if (g->up) {
    g->up->queueControl(wire::kBye, 0, std::string());
    closeConn(g->up, kCloseGraceMs);
    g->up = nullptr;
  }
  g->dead = true;
}

// ---- forming groups ---------------------------------------------------------------------

void SwitchServer::onHello(FrameConn* c, const std::string& payload) {
  Hello h;
  std::string why;
  if (!parseHello(payload, &h, &why)) return refuse(c, why);
  const wire::HelloMsg& m = h.msg;
  const bool fromLeaf = (m.flags & wire::kFromLeaf) != 0;
  const std::string who = (fromLeaf ? "leaf switch " : "rank ") + std::to_string(m.rank);
  if (opts_.requireSecret && m.secret != opts_.secret)
    return refuse(c, who + " of group " + hex64(m.groupId) +
                         ": job secret not admitted by this switch (it was started with "
                         "--secret-file)");
  SwitchGroup* g = nullptr;
  auto it = groups_.find(m.groupId);
  if (it == groups_.end()) {
    if (!fromLeaf && m.nleaves > 1 && !hasParent_)
      return refuse(c, "group " + hex64(m.groupId) + " spans " + std::to_string(m.nleaves) +
                           " switches, but this switch has no --parent to join them");
    if (fromLeaf && m.nleaves < 2)
      return refuse(c, "a leaf switch joined group " + hex64(m.groupId) +
                           " that spans one switch");
    SwitchGroup::Config cfg;
    cfg.layout = h;
    cfg.leafPorts = fromLeaf;
    cfg.myLeaf = fromLeaf ? 0 : h.leafOf[m.rank];
    cfg.hasUp = !fromLeaf && m.nleaves > 1;
    cfg.pieceBytes = opts_.pieceBytes;
    cfg.label = "braid-switch " + address_ + " group " + hex64(m.groupId);
    auto grp = std::make_unique<SwitchGroup>(std::move(cfg));
    grp->formDeadlineMs = monotonicMs() + opts_.timeoutMs;
    g = grp.get();
    groups_[m.groupId] = std::move(grp);
    groupCount_ = groupCount_ + 1;
    log(false, g->label() + ": opened by " + who + " (" + std::to_string(m.nranks) +
                   " ranks, " + std::to_string(m.nleaves) + " switches" +
                   (fromLeaf ? ", root of the tree)" : ")"));
  } else {
    g = it->second.get();
    const Hello& first = g->config().layout;
    if (g->dead) return refuse(c, "group " + hex64(m.groupId) + " is closing");
    if (m.secret != g->secret())
      return refuse(c, who + ": job secret differs from the one group " + hex64(m.groupId) +
                           " was opened with (another job?)");
    if (g->formed)
      return refuse(c, who + ": group " + hex64(m.groupId) + " is already complete");
    if (fromLeaf != g->config().leafPorts || m.nranks != first.msg.nranks ||
        m.nleaves != first.msg.nleaves || h.leafOf != first.leafOf)
      return refuse(c, who + ": its group layout differs from the one group " +
                           hex64(m.groupId) + " was opened with");
    if (!fromLeaf && h.leafOf[m.rank] != g->config().myLeaf)
      return refuse(c, who + " belongs to switch " + std::to_string(h.leafOf[m.rank]) +
                           " of the group, but its other members here to switch " +
                           std::to_string(g->config().myLeaf));
  }
  const int port = g->portFor(m.rank);
  if (port < 0) return refuse(c, who + " does not belong to group " + hex64(m.groupId) + " here");
  if (g->joined(port)) return refuse(c, who + " joined group " + hex64(m.groupId) + " twice");
  g->join(port, c);
  c->role = FrameConn::Role::kPort;
  c->group = g;
  c->port = port;
  c->deadlineMs = -1;
  if (!g->complete()) return;
  if (g->config().hasUp) startUp(g);
  else groupFormed(g);
}

void SwitchServer::groupFormed(SwitchGroup* g) {
  g->formed = true;
  for (int p = 0; p < g->numPorts(); ++p)
    if (FrameConn* c = g->portConn(p)) c->queueControl(wire::kWelcome, 0, std::string());
  log(false, g->label() + ": complete (" + std::to_string(g->numPorts()) + " ports)");
}

void SwitchServer::startUp(SwitchGroup* g) {
  int fd = ::socket(parentAddr_.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return failGroup(g, g->label() + ": socket() for the parent: " + std::strerror(errno), false);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&parentAddr_.ss), parentAddr_.len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) {
    const int err = errno;
    ::close(fd);
    if (err == ECONNREFUSED) {
      g->upRetryMs = monotonicMs() + kRetryMs;
      return;
    }
    return failGroup(g, g->label() + ": cannot reach the parent switch " + opts_.parent + ": " +
                            std::strerror(err), false);
  }
  setNoDelay(fd);
  FrameConn* up = addConn(fd, opts_.parent);
  up->role = FrameConn::Role::kUp;
  up->group = g;
  up->connecting = true;
  g->up = up;
  Hello h = g->config().layout;
  h.msg.flags = wire::kFromLeaf;
  h.msg.rank = g->config().myLeaf;
  up->queueRaw(h.encode());
}

void SwitchServer::finishConnect(FrameConn* c) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(c->fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  SwitchGroup* g = c->group;
  if (err == 0) {
    c->connecting = false;
    return;
  }
  c->dead = true;
  c->group = nullptr;
  if (!g || g->dead) return;
  g->up = nullptr;
  if (err == ECONNREFUSED) {
    g->upRetryMs = monotonicMs() + kRetryMs;
    return;
  }
  failGroup(g, g->label() + ": cannot reach the parent switch " + opts_.parent + ": " +
                   std::strerror(err), false);
}

// ---- frames -----------------------------------------------------------------------------

FrameConn::Target SwitchServer::onHeader(FrameConn* c, const wire::FrameHeader& h) {
  FrameConn::Target t;
  t.control = true;
  SwitchGroup* g = c->group;
  std::string why;
  char buf[160];
  switch (c->role) {
    case FrameConn::Role::kHello:
      if (h.kind != wire::kHello || h.len < sizeof(wire::HelloMsg) ||
          h.len > wire::kMaxControlBytes) {
        std::snprintf(buf, sizeof buf,
                      "not a braid-switch hello (frame kind %u, %u bytes) from %s", h.kind,
                      h.len, c->peer().c_str());
        refuse(c, buf);
        t.stop = true;
      }
      return t;
    case FrameConn::Role::kPort:
      switch (h.kind) {
        case wire::kOp:
          if (h.len == sizeof(wire::OpDesc)) return t;
          break;
        case wire::kBye:
          if (h.len == 0) return t;
          break;
        case wire::kFail:
          if (h.len <= wire::kMaxReasonBytes) return t;
          break;
        case wire::kData:
          t.control = false;
          t.data = g->dataTarget(c->port, h, &why);
          if (t.data) return t;
          failGroup(g, g->label() + ": " + why, false);
          t.stop = true;
          return t;
        default:
          break;
      }
      std::snprintf(buf, sizeof buf, ": protocol error: frame kind %u with %u bytes from ",
                    h.kind, h.len);
      failGroup(g, g->label() + buf + g->portName(c->port), false);
      t.stop = true;
      return t;
    case FrameConn::Role::kUp:
      switch (h.kind) {
        case wire::kWelcome:
        case wire::kDone:
          if (h.len == 0) return t;
          break;
        case wire::kRefuse:
        case wire::kFail:
          if (h.len <= wire::kMaxReasonBytes) return t;
          break;
        case wire::kData:
          t.control = false;
          t.data = g->upDataTarget(h, &why);
          if (t.data) return t;
          failGroup(g, g->label() + ": " + why, false);
          t.stop = true;
          return t;
        default:
          break;
      }
      std::snprintf(buf, sizeof buf, ": protocol error: frame kind %u with %u bytes from ",
                    h.kind, h.len);
      failGroup(g, g->label() + buf + "the parent switch " + opts_.parent, false);
      t.stop = true;
      return t;
    case FrameConn::Role::kClosing:
      break;
  }
  t.stop = true;
  return t;
}

void SwitchServer::onData(FrameConn* c, const wire::FrameHeader& h, uint64_t n) {
  SwitchGroup* g = c->group;
  if (!g || g->dead) return;
  if (c->role == FrameConn::Role::kPort) g->onData(c->port, h.seq, n);
  else if (c->role == FrameConn::Role::kUp) g->onUpData(h.seq, n);
}

bool SwitchServer::onControl(FrameConn* c, const wire::FrameHeader& h, std::string payload) {
  SwitchGroup* g = c->group;
  std::string why;
  if (c->role == FrameConn::Role::kHello) {
    onHello(c, payload);
    return c->role == FrameConn::Role::kPort;
  }
  if (!g || g->dead) return false;
  if (c->role == FrameConn::Role::kPort) {
    switch (h.kind) {
      case wire::kOp: {
        wire::OpDesc d;
        std::memcpy(&d, payload.data(), sizeof d);
        bool ok = false;
        try {
          ok = g->onOp(c->port, h.seq, d, &why);
        } catch (const std::bad_alloc&) {
          // Buffers for an operation this large cannot be had: this group fails, the
          // switch and its other groups go on.
          why = "out of memory for operation #" + std::to_string(h.seq) + " (" +
                std::to_string(d.count) + " elements)";
        }
        if (!ok) {
          failGroup(g, g->label() + ": " + why, false);
          return false;
        }
        return true;
      }
      case wire::kBye: {
        const int port = c->port;
        if (!g->onBye(port, &why)) {
          failGroup(g, g->label() + ": " + why, false);
          return false;
        }
        closeConn(c, kCloseGraceMs);
        if (g->allLeft()) finishGroup(g);
        return false;
      }
      default:  // kFail from a leaf switch: its reason names the member that failed
        failGroup(g, payload.empty() ? g->label() + ": " + g->portName(c->port) + " failed"
                                     : payload, false);
        return false;
    }
  }
  // The parent link.
  switch (h.kind) {
    case wire::kWelcome:
      if (!g->formed) groupFormed(g);
      return true;
    case wire::kDone:
      if (!g->onUpDone(h.seq, &why)) {
        failGroup(g, g->label() + ": " + why, false);
        return false;
      }
      return true;
    case wire::kRefuse:
      failGroup(g, g->label() + ": the parent switch " + opts_.parent + " refused: " + payload,
                true);
      return false;
    default:  // kFail
      failGroup(g, payload, true);
      return false;
  }
}

}  // namespace braid
