// Socket: RAII TCP sockets with deadlines and an abort flag; address helpers.
//
// Every blocking operation is a poll() loop in slices of at most kSliceMs, so an abort
// flag is noticed promptly and EINTR never surfaces. Data is moved with MSG_DONTWAIT
// (and MSG_NOSIGNAL), so the sockets work whether or not O_NONBLOCK is set.
#include "src/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "src/config/params.h"
#include "src/config/error.h"

namespace braid {
namespace {

constexpr int kSliceMs = 50;  // abort flag checked at least this often

bool aborted(const std::atomic<bool>* abort) {
  return abort && abort->load(std::memory_order_acquire);
}

int64_t deadlineFor(int timeoutMs) { return timeoutMs < 0 ? -1 : monotonicMs() + timeoutMs; }

// Transient connect() failures worth retrying until the deadline (the listener may not
// be up yet, or its backlog is momentarily full).
bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN ||
         err == EINTR;
}

std::string addrToString(const sockaddr* sa, socklen_t len) {
  if (!sa || len == 0) return "?";
  SockAddr a;
  memcpy(&a.ss, sa, std::min<size_t>(len, sizeof(a.ss)));
  a.len = len;
  return a.toString();
}

// NCCL_SOCKET_IFNAME: "a,b" prefixes; "^a,b" excludes; "=a,b" exact names; "^=a" both.
struct IfFilter {
  bool set = false;
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  explicit IfFilter(const std::string& spec) {
    std::string s = spec;
    if (s.empty()) return;
    set = true;
    if (!s.empty() && s[0] == '^') exclude = true, s.erase(0, 1);
    if (!s.empty() && s[0] == '=') exact = true, s.erase(0, 1);
    names = splitCommaList(s);
  }

  bool accepts(const char* ifname) const {
    bool hit = false;
    for (const std::string& n : names) {
      if (exact ? n == ifname : strncmp(ifname, n.c_str(), n.size()) == 0) {
        hit = true;
        break;
      }
    }
    return exclude ? !hit : hit;
  }
};

bool isSelfConnection(int fd) {
  sockaddr_storage a{}, b{};
  socklen_t la = sizeof(a), lb = sizeof(b);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0)
    return false;
  return la == lb && memcmp(&a, &b, la) == 0;
}

bool isLinkLocal6(const sockaddr* sa) {
  if (sa->sa_family != AF_INET6) return false;
  const auto* a6 = reinterpret_cast<const sockaddr_in6*>(sa);
  return IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr);
}

}  // namespace

// ---- SockAddr ---------------------------------------------------------------------

std::vector<std::string> splitCommaList(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    pos = comma + 1;
  }
  return out;
}

bool SockAddr::parse(const std::string& text, SockAddr* out) {
  if (!out) return false;
  std::string host, portText;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    host = text.substr(1, close - 1);
    portText = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    host = text.substr(0, colon);
    if (host.find(':') != std::string::npos) return false;  // bare IPv6 needs brackets
    portText = text.substr(colon + 1);
  }
  if (portText.empty() || portText.size() > 5 ||
      portText.find_first_not_of("0123456789") != std::string::npos)
    return false;
  int port = atoi(portText.c_str());
  if (port < 0 || port > 65535) return false;

  SockAddr a;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&a.ss);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
  if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a.len = sizeof(sockaddr_in6);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
    // Prefer IPv4 when a name resolves to both.
    const addrinfo* pick = res;
    for (const addrinfo* r = res; r; r = r->ai_next)
      if (r->ai_family == AF_INET) {
        pick = r;
        break;
      }
    bool ok = (pick->ai_family == AF_INET || pick->ai_family == AF_INET6) &&
              pick->ai_addrlen <= sizeof(a.ss);
    if (ok) {
      memcpy(&a.ss, pick->ai_addr, pick->ai_addrlen);
      a.len = pick->ai_addrlen;
    }
    freeaddrinfo(res);
    if (!ok) return false;
  }
  a.setPort(port);
  *out = a;
  return true;
}

std::string SockAddr::toString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a4 = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a4->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(port());
  }
  return "?";
}

int SockAddr::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

void SockAddr::setPort(int port) {
  if (ss.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(uint16_t(port));
  else if (ss.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(uint16_t(port));
}

// ---- interface selection ------------------------------------------------------------

ncclResult_t pickLocalAddress(SockAddr* out, std::string* ifname) {
  if (!out) return setError(ncclInvalidArgument, nullptr, "pickLocalAddress: out is NULL");
  const std::string spec = param::kSocketIfname.get();
  IfFilter filter(spec);

  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return setError(ncclSystemError, nullptr, "pickLocalAddress: getifaddrs failed: %s",
                    strerror(errno));

  // Ranked candidates: lower rank wins; the first interface of a rank wins among equals.
  const ifaddrs* best = nullptr;
  int bestRank = 1 << 30;
  std::string seen;
  for (const ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (isLinkLocal6(ifa->ifa_addr)) continue;  // would need a scope id
    if (seen.find(std::string(ifa->ifa_name) + " ") == std::string::npos)
      seen += std::string(ifa->ifa_name) + " ";
    const bool v6 = family == AF_INET6;
    int rank;
    if (filter.set) {
      if (!filter.accepts(ifa->ifa_name)) continue;
      rank = v6 ? 1 : 0;
    } else {
      const bool loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
      const bool docker = strncmp(ifa->ifa_name, "docker", 6) == 0;
      rank = loop ? 4 : docker ? 2 : 0;
      if (v6) rank += 1;
    }
    if (rank < bestRank) {
      bestRank = rank;
      best = ifa;
    }
  }

  ncclResult_t res = ncclSuccess;
  if (best) {
    SockAddr a;
    size_t len = best->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&a.ss, best->ifa_addr, len);
    a.len = socklen_t(len);
    a.setPort(0);
    *out = a;
    if (ifname) *ifname = best->ifa_name;
  } else if (filter.set) {
    if (!seen.empty()) seen.pop_back();
    res = setError(ncclSystemError, nullptr,
                   "pickLocalAddress: no up interface with an IP address matches "
                   "NCCL_SOCKET_IFNAME='%s' (interfaces: %s)",
                   spec.c_str(), seen.empty() ? "none" : seen.c_str());
  } else {
    SockAddr::parse("127.0.0.1:0", out);
    if (ifname) *ifname = "lo";
  }
  freeifaddrs(list);
  return res;
}

// ---- waiting --------------------------------------------------------------------------

int64_t monotonicMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

WaitResult waitFd(int fd, short events, int64_t deadlineMs, const std::atomic<bool>* abort) {
  for (;;) {
    if (aborted(abort)) return WaitResult::kAborted;
    int slice = kSliceMs;
    if (deadlineMs >= 0) {
      int64_t left = deadlineMs - monotonicMs();
      if (left <= 0) slice = 0;
      else if (left < slice) slice = int(left);
    }
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, slice);
    if (n < 0) {
      if (errno == EINTR) continue;
      return WaitResult::kError;
    }
    if (n > 0) return WaitResult::kReady;  // includes POLLERR / POLLHUP
    if (deadlineMs >= 0 && monotonicMs() >= deadlineMs) {
      return aborted(abort) ? WaitResult::kAborted : WaitResult::kTimeout;
    }
  }
}

// ---- Socket ---------------------------------------------------------------------------

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    label_ = o.label_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::string Socket::localAddress() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (fd_ < 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return addrToString(reinterpret_cast<sockaddr*>(&ss), len);
}

std::string Socket::peerAddress() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (fd_ < 0 || getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return addrToString(reinterpret_cast<sockaddr*>(&ss), len);
}

ncclResult_t Socket::listen(const SockAddr& addr, SockAddr* bound) {
  close();
  const std::string where = addr.toString();
  int fd = ::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return setError(ncclSystemError, nullptr, "%s: socket() for listening on %s failed: %s",
                    label_, where.c_str(), strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    int err = errno;
    ::close(fd);
    return setError(ncclSystemError, nullptr, "%s: cannot bind to %s: %s", label_,
                    where.c_str(), strerror(err));
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    int err = errno;
    ::close(fd);
    return setError(ncclSystemError, nullptr, "%s: listen on %s failed: %s", label_,
                    where.c_str(), strerror(err));
  }
  fd_ = fd;
  if (bound) {
    SockAddr b;
    b.len = sizeof(b.ss);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&b.ss), &b.len) != 0) {
      int err = errno;
      close();
      return setError(ncclSystemError, nullptr, "%s: getsockname after listening on %s: %s",
                      label_, where.c_str(), strerror(err));
    }
    *bound = b;
  }
  return ncclSuccess;
}

ncclResult_t Socket::accept(Socket* out, int timeoutMs, const std::atomic<bool>* abort) const {
  if (!out) return setError(ncclInvalidArgument, nullptr, "%s: accept: out is NULL", label_);
  if (fd_ < 0) return setError(ncclInternalError, nullptr, "%s: accept on a closed socket", label_);
  const int64_t deadline = deadlineFor(timeoutMs);
  for (;;) {
    WaitResult w = waitFd(fd_, POLLIN, deadline, abort);
    if (w == WaitResult::kAborted)
      return setError(ncclSystemError, nullptr, "%s: accept on %s aborted", label_,
                      localAddress().c_str());
    if (w == WaitResult::kTimeout)
      return setError(ncclSystemError, nullptr, "%s: no connection on %s within %d ms", label_,
                      localAddress().c_str(), timeoutMs);
    if (w == WaitResult::kError)
      return setError(ncclSystemError, nullptr, "%s: poll on listener %s failed: %s", label_,
                      localAddress().c_str(), strerror(errno));
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      s.setLabel(label_);
      s.setNoDelay();
      *out = std::move(s);
      return ncclSuccess;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED ||
        errno == EPROTO)
      continue;
    return setError(ncclSystemError, nullptr, "%s: accept on %s failed: %s", label_,
                    localAddress().c_str(), strerror(errno));
  }
}

ncclResult_t Socket::connect(const SockAddr& addr, int timeoutMs, const std::atomic<bool>* abort,
                             const std::function<bool(std::string*)>& gone) {
  close();
  const std::string where = addr.toString();
  const int64_t deadline = deadlineFor(timeoutMs);
  int backoffMs = 1;
  int lastErr = 0;
  for (;;) {
    if (aborted(abort))
      return setError(ncclSystemError, nullptr, "%s: connect to %s aborted", label_,
                      where.c_str());
    int fd = ::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      return setError(ncclSystemError, nullptr, "%s: socket() to connect to %s failed: %s",
                      label_, where.c_str(), strerror(errno));
    int rc;
    do {
      rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len);
    } while (rc != 0 && errno == EINTR);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      WaitResult w = waitFd(fd, POLLOUT, deadline, abort);
      if (w == WaitResult::kReady) {
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      } else {
        ::close(fd);
        if (w == WaitResult::kAborted)
          return setError(ncclSystemError, nullptr, "%s: connect to %s aborted", label_,
                          where.c_str());
        if (w == WaitResult::kTimeout)
          return setError(ncclSystemError, nullptr, "%s: connect to %s timed out after %d ms",
                          label_, where.c_str(), timeoutMs);
        return setError(ncclSystemError, nullptr, "%s: poll while connecting to %s: %s",
                        label_, where.c_str(), strerror(errno));
      }
    }
    if (err == 0 && isSelfConnection(fd)) {
      // Connecting to a local port nobody listens on can pick that very port as the
      // source port (TCP simultaneous open): the socket talks to itself. Not listening.
      err = ECONNREFUSED;
    }
    if (err == 0) {
      // Back to blocking mode, like accepted sockets; I/O uses MSG_DONTWAIT anyway.
      int flags = fcntl(fd, F_GETFL);
      if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      fd_ = fd;
      setNoDelay();
      return ncclSuccess;
    }
    ::close(fd);
    lastErr = err;
    if (!retryableConnectError(err))
      return setError(ncclSystemError, nullptr, "%s: connect to %s failed: %s", label_,
                      where.c_str(), strerror(err));
    // Not listening yet (or backlog full): back off a little and try again, unless the
    // process that should listen is known to be gone.
    std::string why;
    if (gone && gone(&why))
      return setError(ncclRemoteError, nullptr, "%s: connect to %s refused: %s", label_,
                      where.c_str(), why.c_str());
    int64_t now = monotonicMs();
    if (deadline >= 0 && now >= deadline)
      return setError(ncclSystemError, nullptr,
                      "%s: connect to %s timed out after %d ms (last error: %s)", label_,
                      where.c_str(), timeoutMs, strerror(lastErr));
    int sleepMs = backoffMs;
    if (deadline >= 0) sleepMs = int(std::min<int64_t>(sleepMs, deadline - now));
    std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
    backoffMs = std::min(backoffMs * 2, kSliceMs);
  }
}

ncclResult_t Socket::sendAll(const void* data, size_t bytes, int timeoutMs,
                             const std::atomic<bool>* abort) {
  if (fd_ < 0) return setError(ncclInternalError, nullptr, "%s: send on a closed socket", label_);
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  const int64_t deadline = deadlineFor(timeoutMs);
  while (done < bytes) {
    ssize_t n = trySend(p + done, bytes - done);
    if (n < 0)
      return setError(errno == ECONNRESET || errno == EPIPE ? ncclRemoteError : ncclSystemError,
                      nullptr, "%s: send to %s failed after %zu of %zu bytes: %s", label_,
                      peerAddress().c_str(), done, bytes, strerror(errno));
    done += size_t(n);
    if (done == bytes) break;
    if (n > 0) continue;
    WaitResult w = waitFd(fd_, POLLOUT, deadline, abort);
    if (w == WaitResult::kAborted)
      return setError(ncclSystemError, nullptr, "%s: send to %s aborted", label_,
                      peerAddress().c_str());
    if (w == WaitResult::kTimeout)
      return setError(ncclSystemError, nullptr,
                      "%s: send to %s timed out after %d ms (%zu of %zu bytes sent)", label_,
                      peerAddress().c_str(), timeoutMs, done, bytes);
    if (w == WaitResult::kError)
      return setError(ncclSystemError, nullptr, "%s: poll while sending to %s: %s", label_,
                      peerAddress().c_str(), strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t Socket::recvAll(void* data, size_t bytes, int timeoutMs,
                             const std::atomic<bool>* abort) {
  if (fd_ < 0) return setError(ncclInternalError, nullptr, "%s: recv on a closed socket", label_);
  char* p = static_cast<char*>(data);
  size_t done = 0;
  const int64_t deadline = deadlineFor(timeoutMs);
  while (done < bytes) {
    ssize_t n = tryRecv(p + done, bytes - done);
    if (n < 0) {
      if (errno == ECONNRESET)
        return setError(ncclRemoteError, nullptr,
                        "%s: connection from %s closed by the peer (%zu of %zu bytes received)",
                        label_, peerAddress().c_str(), done, bytes);
      return setError(ncclSystemError, nullptr, "%s: recv from %s failed: %s", label_,
                      peerAddress().c_str(), strerror(errno));
    }
    done += size_t(n);
    if (done == bytes) break;
    if (n > 0) continue;
    WaitResult w = waitFd(fd_, POLLIN, deadline, abort);
    if (w == WaitResult::kAborted)
      return setError(ncclSystemError, nullptr, "%s: recv from %s aborted", label_,
                      peerAddress().c_str());
    if (w == WaitResult::kTimeout)
      return setError(ncclSystemError, nullptr,
                      "%s: recv from %s timed out after %d ms (%zu of %zu bytes received)",
                      label_, peerAddress().c_str(), timeoutMs, done, bytes);
    if (w == WaitResult::kError)
      return setError(ncclSystemError, nullptr, "%s: poll while receiving from %s: %s", label_,
                      peerAddress().c_str(), strerror(errno));
  }
  return ncclSuccess;
}

ssize_t Socket::trySend(const void* data, size_t bytes) {
  if (bytes == 0) return 0;
  for (;;) {
    ssize_t n = ::send(fd_, data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

ssize_t Socket::tryRecv(void* data, size_t bytes) {
  if (bytes == 0) return 0;
  for (;;) {
    ssize_t n = ::recv(fd_, data, bytes, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0) {
      errno = ECONNRESET;
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

void Socket::setNonBlocking(bool on) {
  if (fd_ < 0) return;
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0) return;
  fcntl(fd_, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void Socket::setNoDelay() {
  if (fd_ < 0) return;
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace braid
