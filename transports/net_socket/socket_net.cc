// The Socket network: an ncclNet_v11_t over TCP, Braid's network of last resort.
//
//   listen:  a socket on this rank's address (NCCL_SOCKET_IFNAME); the handle carries
//            the address and a random token (handles travel only over the job's
//            bootstrap, so the token proves the connection belongs to this listener).
//   connect: non-blocking connect, then the token; returns the comm once both are out.
//   accept:  non-blocking accept, then reads the token; others are closed with a WARN.
//   data:    each message is {uint64 little-endian size} + payload. Requests queue per
//            comm (at most NCCL_NET_MAX_REQUESTS) and move, in posting order, whenever
//            test() is called on any of them; a receive completes with the size the
//            sender sent, which must fit the posted buffer.
// The proxy sleeps in poll() on a comm's socket (NetExtensions::pollFd).
#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "src/bootstrap/unique_id.h"
#include "src/config/log.h"
#include "src/config/params.h"
#include "src/config/error.h"
#include "src/net/socket.h"
#include "transports/net/builtin_nets.h"

namespace braid {
namespace {

constexpr uint64_t kHandleMagic = 0x4252414944534f43ull;  // "BRAIDSOC"
constexpr int kMaxReqs = NCCL_NET_MAX_REQUESTS;

struct SocketHandle {
  uint64_t magic;
  uint64_t token;
  char addr[80];         ///< "ip:port" or "[ip6]:port"
  void* stage;           ///< sender side: connect() in progress (NCCL's convention)
};
static_assert(sizeof(SocketHandle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

uint64_t randomToken() {
  uint64_t t = 0;
  while (t == 0) t = bootstrapRandomSecret();
  return t;
}

std::string errnoText(int err) {
  if (err == ECONNRESET || err == EPIPE) return "peer closed the connection";
  return std::strerror(err);
}

struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool used = false;
  bool done = false;
  char* data = nullptr;
  uint64_t size = 0;        ///< send: bytes to send; recv: the posted capacity
  uint64_t result = 0;      ///< recv: bytes the sender sent
  uint64_t moved = 0;       ///< header + payload bytes moved so far
  unsigned char hdr[8] = {};
};

struct Comm {
  bool send = false;
  int fd = -1;
  std::string peer;
  Request reqs[kMaxReqs];
  uint32_t first = 0;  ///< oldest request still queued (ring index = count % kMaxReqs)
  uint32_t active = 0; ///< oldest request not yet done (requests complete in order)
  uint32_t next = 0;   ///< next request to post
  bool failed = false;
  bool cleanClose = false;  ///< the peer closed between messages (teardown)
  std::string why;
};

struct ListenComm {
  Socket listener;
  uint64_t token = 0;
  std::string addr;
  struct Pending {
    Socket sock;
    std::string from;
    unsigned char buf[16];
    size_t got = 0;
  };
  std::vector<Pending> pending;
};

/// The sender's connection in progress, kept in the handle between connect() calls.
struct ConnectStage {
  int fd = -1;
  bool connected = false;
  unsigned char hello[16];
  size_t sent = 0;
  std::string peer;
};

void failComm(Comm* c, std::string why) {
  if (c->failed) return;
  c->failed = true;
  c->why = std::move(why);
}

/// Moves queued requests of `c` without blocking, oldest first.
void progress(Comm* c) {
  while (!c->failed && c->active != c->next) {
    Request& q = c->reqs[c->active % kMaxReqs];
    if (c->send) {
      const uint64_t total = 8 + q.size;
      while (q.moved < total) {
        iovec iov[2];
        int n = 0;
        if (q.moved < 8) {
          iov[n++] = {q.hdr + q.moved, size_t(8 - q.moved)};
          if (q.size) iov[n++] = {q.data, size_t(q.size)};
        } else {
          iov[n++] = {q.data + (q.moved - 8), size_t(total - q.moved)};
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = size_t(n);
        ssize_t k = ::sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          failComm(c, errnoText(errno) + " (while sending)");
          return;
        }
        q.moved += uint64_t(k);
      }
      q.done = true;
      ++c->active;
    } else {
      while (q.moved < 8) {
        ssize_t k = ::recv(c->fd, q.hdr + q.moved, size_t(8 - q.moved), MSG_DONTWAIT);
        if (k == 0) {
          c->cleanClose = q.moved == 0;  // at a message boundary: an orderly close
          return failComm(c, "peer closed the connection");
        }
        if (k < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          return failComm(c, errnoText(errno));
        }
        q.moved += uint64_t(k);
        if (q.moved == 8) {
          uint64_t le;
          std::memcpy(&le, q.hdr, 8);
          q.result = le64toh(le);
          if (q.result > q.size)
            return failComm(c, "protocol error: a " + std::to_string(q.result) +
                                   "-byte message for a " + std::to_string(q.size) +
                                   "-byte receive");
        }
      }
      while (q.moved < 8 + q.result) {
        ssize_t k = ::recv(c->fd, q.data + (q.moved - 8), size_t(8 + q.result - q.moved),
                           MSG_DONTWAIT);
        if (k == 0) return failComm(c, "peer closed the connection (in the middle of a message)");
        if (k < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          return failComm(c, errnoText(errno) + " (in the middle of a message)");
        }
        q.moved += uint64_t(k);
      }
      q.done = true;
      ++c->active;
    }
  }
}

ncclResult_t sInit(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                   ncclProfilerCallback_t) {
  *ctx = nullptr;
  return ncclSuccess;
}

ncclResult_t sDevices(int* n) {
  *n = 1;
  return ncclSuccess;
}

ncclResult_t sGetProperties(int dev, ncclNetProperties_v11_t* p) {
  if (dev != 0) return setError(ncclInvalidArgument, nullptr, "Socket net: no device %d", dev);
  static std::string name;
  static std::once_flag once;
  std::call_once(once, [] {
    SockAddr a;
    std::string ifname;
    if (pickLocalAddress(&a, &ifname) == ncclSuccess && !ifname.empty()) name = ifname;
    else name = "tcp";
  });
  *p = ncclNetProperties_v11_t{};
  p->name = const_cast<char*>(name.c_str());
  p->pciPath = nullptr;
  p->ptrSupport = NCCL_PTR_HOST;
  p->regIsGlobal = 1;
  p->speed = 10000;
  p->latency = 0;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->vProps.ndevs = 1;
  p->maxP2pBytes = size_t(1) << 30;  // test() reports sizes as int
  p->maxCollBytes = size_t(1) << 30;
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t sListen(void*, int dev, void* handle, void** listenComm) {
  (void)dev;
  SockAddr addr;
  std::string ifname;
  BRAID_CHECK(pickLocalAddress(&addr, &ifname));
  auto* l = new ListenComm();
  l->listener.setLabel("Socket net");
  SockAddr bound;
  ncclResult_t r = l->listener.listen(addr, &bound);
  if (r != ncclSuccess) {
    delete l;
    return r;
  }
  l->listener.setNonBlocking(true);
  l->token = randomToken();
  l->addr = bound.toString();
  SocketHandle h{};
  h.magic = kHandleMagic;
  h.token = l->token;
  std::snprintf(h.addr, sizeof h.addr, "%s", l->addr.c_str());
  h.stage = nullptr;
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *listenComm = l;
  return ncclSuccess;
}

void closeFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

ncclResult_t sConnect(void*, int, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t**) {
  *sendComm = nullptr;
  SocketHandle h;
  std::memcpy(&h, handle, sizeof h);
  h.addr[sizeof h.addr - 1] = '\0';
  if (h.magic != kHandleMagic)
    return setError(ncclInvalidArgument, nullptr, "Socket net: connect with a foreign handle");
  auto* st = static_cast<ConnectStage*>(h.stage);
  auto giveUp = [&](ncclResult_t code, const std::string& why) {
    if (st) closeFd(&st->fd);
    delete st;
    static_cast<SocketHandle*>(handle)->stage = nullptr;
    return setError(code, nullptr, "Socket net: connect to %s: %s", h.addr, why.c_str());
  };
  if (!st) {
    SockAddr addr;
    if (!SockAddr::parse(h.addr, &addr))
      return setError(ncclInvalidArgument, nullptr, "Socket net: bad address '%s' in a handle",
                      h.addr);
    st = new ConnectStage();
    st->peer = h.addr;
    st->fd = ::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (st->fd < 0) return giveUp(ncclSystemError, errnoText(errno));
    uint64_t hello[2] = {htole64(kHandleMagic), htole64(h.token)};
    std::memcpy(st->hello, hello, sizeof hello);
    static_cast<SocketHandle*>(handle)->stage = st;
    if (::connect(st->fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) == 0)
      st->connected = true;
    else if (errno != EINPROGRESS)
      return giveUp(ncclSystemError, errnoText(errno));
  }
  if (!st->connected) {
    pollfd p{st->fd, POLLOUT, 0};
    if (::poll(&p, 1, 0) <= 0) return ncclSuccess;  // still connecting
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) return giveUp(ncclSystemError, errnoText(err));
    st->connected = true;
  }
  while (st->sent < sizeof st->hello) {
    ssize_t k = ::send(st->fd, st->hello + st->sent, sizeof st->hello - st->sent,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
      return giveUp(ncclRemoteError, errnoText(errno));
    }
    st->sent += size_t(k);
  }
  auto* c = new Comm();
  c->send = true;
  c->fd = st->fd;
  c->peer = st->peer;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  delete st;
  static_cast<SocketHandle*>(handle)->stage = nullptr;
  *sendComm = c;
  return ncclSuccess;
}

ncclResult_t sAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t**) {
  *recvComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  for (;;) {  // take every waiting connection
    int fd = ::accept4(l->listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    ListenComm::Pending p;
    p.sock = Socket(fd);
    p.from = p.sock.peerAddress();
    l->pending.push_back(std::move(p));
  }
  for (size_t i = 0; i < l->pending.size();) {
    ListenComm::Pending& p = l->pending[i];
    ssize_t k = ::recv(p.sock.fd(), p.buf + p.got, sizeof p.buf - p.got, MSG_DONTWAIT);
    bool drop = false;
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      BRAID_WARN("Socket net: a connection from %s to %s closed before its hello; ignored",
                 p.from.c_str(), l->addr.c_str());
      drop = true;
    } else if (k > 0) {
      p.got += size_t(k);
    }
    if (!drop && p.got == sizeof p.buf) {
      uint64_t hello[2];
      std::memcpy(hello, p.buf, sizeof hello);
      if (le64toh(hello[0]) != kHandleMagic || le64toh(hello[1]) != l->token) {
        BRAID_WARN("Socket net: rejected a connection from %s to %s: it does not carry this "
                   "listener's token", p.from.c_str(), l->addr.c_str());
        drop = true;
      } else {
        auto* c = new Comm();
        c->send = false;
        c->fd = p.sock.release();
        c->peer = p.from;
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        l->pending.erase(l->pending.begin() + long(i));
        *recvComm = c;
        return ncclSuccess;
      }
    }
    if (drop) l->pending.erase(l->pending.begin() + long(i));
    else ++i;
  }
  return ncclSuccess;
}

ncclResult_t sRegMr(void*, void*, size_t, int type, void** mhandle) {
  if (type != NCCL_PTR_HOST)
    return setError(ncclInvalidArgument, nullptr, "Socket net: only host memory (type %d)", type);
  static int token;
  *mhandle = &token;
  return ncclSuccess;
}

ncclResult_t sRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return setError(ncclInvalidUsage, nullptr, "Socket net: no dma-buf registration");
}

ncclResult_t sDeregMr(void*, void*) { return ncclSuccess; }

Request* newRequest(Comm* c) {
  if (c->next - c->first >= uint32_t(kMaxReqs)) return nullptr;
  Request& r = c->reqs[c->next % kMaxReqs];
  r = Request();
  r.comm = c;
  r.used = true;
  ++c->next;
  return &r;
}

ncclResult_t sIsend(void* sendComm, void* data, size_t size, int, void*, void*, void** request) {
  auto* c = static_cast<Comm*>(sendComm);
  Request* r = newRequest(c);
  if (r) {
    r->data = static_cast<char*>(data);
    r->size = size;
    uint64_t le = htole64(uint64_t(size));
    std::memcpy(r->hdr, &le, 8);
    progress(c);  // start at once: one proxy round less per message
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t sIrecv(void* recvComm, int n, void** data, size_t* sizes, int*, void**, void**,
                    void** request) {
  if (n != 1)
    return setError(ncclInternalError, nullptr, "Socket net: irecv of %d buffers (max 1)", n);
  auto* c = static_cast<Comm*>(recvComm);
  Request* r = newRequest(c);
  if (r) {
    r->data = static_cast<char*>(data[0]);
    r->size = sizes[0];
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t sIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t sTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  Comm* c = r->comm;
  progress(c);
  if (!r->done) {
    *done = 0;
    if (c->failed && c->cleanClose)
      return noteError(ncclRemoteError, "Socket net: connection %s %s: %s",
                       c->send ? "to" : "from", c->peer.c_str(), c->why.c_str());
    if (c->failed)
      return setError(ncclRemoteError, nullptr, "Socket net: connection %s %s: %s",
                      c->send ? "to" : "from", c->peer.c_str(), c->why.c_str());
    return ncclSuccess;
  }
  *done = 1;
  if (sizes) *sizes = int(c->send ? r->size : r->result);
  r->used = false;
  while (c->first != c->next && !c->reqs[c->first % kMaxReqs].used) ++c->first;
  return ncclSuccess;
}

ncclResult_t closeComm(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  closeFd(&c->fd);
  delete c;
  return ncclSuccess;
}

ncclResult_t sCloseListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return ncclSuccess;
}

ncclResult_t sFinalize(void*) { return ncclSuccess; }

int sPollFd(void* comm, short* events) {
  auto* c = static_cast<Comm*>(comm);
  *events = c->send ? POLLOUT : POLLIN;
  return c->fd;
}

void sAbandonConnect(void* handle) {
  auto* h = static_cast<SocketHandle*>(handle);
  auto* st = static_cast<ConnectStage*>(h->stage);
  if (!st) return;
  closeFd(&st->fd);
  delete st;
  h->stage = nullptr;
}

// A receiver never writes: readable means EOF or a reset.
bool sPeerGone(void* comm, std::string* why) {
  auto* c = static_cast<Comm*>(comm);
  char b;
  ssize_t k = ::recv(c->fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
  if (k > 0) {
    *why = "protocol error: unexpected bytes from the receiver " + c->peer;
    return true;
  }
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  *why = (k == 0 ? std::string("peer closed the connection") : errnoText(errno)) + " (" +
         c->peer + ")";
  return true;
}

ncclNet_v11_t makeTable() {
  ncclNet_v11_t t{};
  t.name = "Socket";
  t.init = sInit;
  t.devices = sDevices;
  t.getProperties = sGetProperties;
  t.listen = sListen;
  t.connect = sConnect;
  t.accept = sAccept;
  t.regMr = sRegMr;
  t.regMrDmaBuf = sRegMrDmaBuf;
  t.deregMr = sDeregMr;
  t.isend = sIsend;
  t.irecv = sIrecv;
  t.iflush = sIflush;
  t.test = sTest;
  t.closeSend = closeComm;
  t.closeRecv = closeComm;
  t.closeListen = sCloseListen;
  t.finalize = sFinalize;
  return t;
}

}  // namespace

const ncclNet_v11_t* socketNet() {
  static const ncclNet_v11_t table = [] {
    ncclNet_v11_t t = makeTable();
    return t;
  }();
  static std::once_flag once;
  std::call_once(once, [] {
    NetExtensions ext;
    ext.pollFd = sPollFd;
    ext.peerGone = sPeerGone;
    ext.abandonConnect = sAbandonConnect;
    registerNetExtensions(&table, ext);
  });
  return &table;
}

}  // namespace braid
