// Socket: RAII TCP socket with deadlines and an abort flag, shared by the bootstrap
// the Socket network and others. Plus address helpers (NCCL_SOCKET_IFNAME selection).
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nccl.h"

namespace braid {

/// An IPv4/IPv6 address and port.
struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  /// Parses "ip:port", "[ip6]:port" or "host:port".
  static bool parse(const std::string& text, SockAddr* out);
  std::string toString() const;  ///< "ip:port"
  int port() const;
  void setPort(int port);
};

/// "a, b,,c" -> {"a", "b", "c"}: comma-separated items, blanks trimmed, empty ones
/// dropped (NCCL_SOCKET_IFNAME, NCCL_NET_PLUGIN, NCCL_IB_HCA lists).
std::vector<std::string> splitCommaList(const std::string& text);

/// The address this host should listen on, honouring NCCL_SOCKET_IFNAME (prefix
/// list, '^' to exclude, '=' for exact names); falls back to loopback. Port 0.
ncclResult_t pickLocalAddress(SockAddr* out, std::string* ifname);

/// Milliseconds on a monotonic clock (for deadlines).
int64_t monotonicMs();

/// Outcome of waitFd().
enum class WaitResult { kReady, kTimeout, kAborted, kError };
/// Waits until fd reports any of `events` (POLLIN / POLLOUT; hang-ups and errors count
/// as ready), until deadlineMs (monotonicMs() clock; < 0: never) or until *abort is
/// set, checked at least every 50 ms. EINTR is retried. Sets no error message.
WaitResult waitFd(int fd, short events, int64_t deadlineMs, const std::atomic<bool>* abort);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_), label_(o.label_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  /// Gives up ownership: returns the descriptor, which the caller must close.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

  /// Listen on addr (port 0 picks one; *bound gets the real address).
  ncclResult_t listen(const SockAddr& addr, SockAddr* bound);
  /// Accept one connection within timeoutMs (-1: forever), giving up if *abort.
  ncclResult_t accept(Socket* out, int timeoutMs, const std::atomic<bool>* abort) const;
  /// Connect, retrying refused connections until timeoutMs, or until `gone` (if given)
  /// says the listener's process is known to be gone (ncclRemoteError with its why).
  ncclResult_t connect(const SockAddr& addr, int timeoutMs, const std::atomic<bool>* abort,
                       const std::function<bool(std::string*)>& gone = nullptr);
  /// Send/receive exactly `bytes`, within timeoutMs (-1: forever). A closed peer gives
  /// ncclRemoteError; a timeout ncclSystemError; messages say which.
  ncclResult_t sendAll(const void* data, size_t bytes, int timeoutMs,
                       const std::atomic<bool>* abort);
  ncclResult_t recvAll(void* data, size_t bytes, int timeoutMs,
                       const std::atomic<bool>* abort);
  /// Nonblocking partial I/O: returns bytes moved (0 if it would block), or -1 on
  /// error/EOF (errno describes; EOF sets errno = ECONNRESET).
  ssize_t trySend(const void* data, size_t bytes);
  ssize_t tryRecv(void* data, size_t bytes);
  void setNonBlocking(bool on);
  void setNoDelay();
  /// Prefix of this socket's error messages ("bootstrap: connect to ... timed out");
  /// must be a string literal or otherwise outlive the socket. Default "socket".
  void setLabel(const char* label) { label_ = label; }
  const char* label() const { return label_; }
  /// Local / peer address as "ip:port" ("?" when unknown), for messages.
  std::string localAddress() const;
  std::string peerAddress() const;

 private:
  int fd_ = -1;
  const char* label_ = "socket";
};

}  // namespace braid
