// Connection setup of the IB net (see ib_setup.h).
#include "transports/net_ib/ib_setup.h"
#ifdef BRAID_HAVE_IBVERBS
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "src/bootstrap/unique_id.h"
#include "src/config/log.h"
#include "src/config/params.h"
#include "src/config/error.h"

namespace braid {
namespace ib {
namespace {

constexpr uint64_t kHandleMagic = 0x4252414944494231ull;   // "BRAIDIB1"
constexpr uint64_t kConnectMagic = 0x4252414944434f4eull;  // "BRAIDCON"
constexpr uint64_t kAcceptMagic = 0x4252414944414343ull;   // "BRAIDACC"
constexpr char kReady = 'R';

// Moves the rest of a fixed-size message without blocking. Returns 1 when complete,
// 0 when it would block, -1 on error or end of stream (errno says which).
int moveSome(Socket& s, bool send, void* buf, size_t len, size_t* done) {
  while (*done < len) {
    uint8_t* p = static_cast<uint8_t*>(buf) + *done;
    ssize_t n = send ? s.trySend(p, len - *done) : s.tryRecv(p, len - *done);
    if (n < 0) return -1;
    if (n == 0) return 0;
    *done += size_t(n);
  }
  return 1;
}

int qpsPerConnection() { return int(std::clamp<int64_t>(param::kIbQpsPerConn.get(), 1, kMaxQps)); }

uint64_t randomToken() { return bootstrapRandomSecret(); }

// A connection the sender is making; kept between connect() calls.
struct Connecting {
  Socket sock;
  std::string target;
  int stage = 0;
  std::unique_ptr<IbComm> comm;
  ConnInfo out{};
  ConnInfo in{};
  size_t moved = 0;
};

std::mutex gConnectingMu;
std::map<uint64_t, std::unique_ptr<Connecting>> gConnecting;

ncclResult_t connectSome(const IbDevice* dev, int trafficClass, const IbHandle* handle,
                         Connecting* c, bool* finished) {
  *finished = false;
  if (c->stage == 0) {
    SockAddr addr;
    std::memcpy(&addr.ss, handle->addr, handle->addrLen);
    addr.len = handle->addrLen;
    c->target = addr.toString();
    int fd = ::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return setError(ncclSystemError, nullptr, "IB: socket() to connect to %s failed: %s",
                      c->target.c_str(), strerror(errno));
    c->sock = Socket(fd);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0 &&
        errno != EINPROGRESS)
      return setError(ncclSystemError, nullptr, "IB: connect to %s failed: %s", c->target.c_str(),
                      strerror(errno));
    c->stage = 1;
  }
  if (c->stage == 1) {
    pollfd pfd{c->sock.fd(), POLLOUT, 0};
    if (::poll(&pfd, 1, 0) <= 0) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0)
      return setError(ncclRemoteError, nullptr, "IB: connect to %s failed: %s", c->target.c_str(),
                      strerror(err));
    c->sock.setNoDelay();
    c->comm.reset(new IbComm(dev, true, trafficClass));
    c->comm->adoptSocket(std::move(c->sock));
    BRAID_CHECK(c->comm->create(qpsPerConnection()));
    c->comm->describe(&c->out);
    c->out.magic = kConnectMagic;
    c->out.token = handle->token;
    c->stage = 2;
    c->moved = 0;
  }
  Socket& s = c->comm->socket();
  if (c->stage == 2) {
    int r = moveSome(s, true, &c->out, sizeof(c->out), &c->moved);
    if (r < 0)
      return setError(ncclRemoteError, nullptr, "IB: sending connection info to %s failed: %s",
                      c->target.c_str(), strerror(errno));
    if (r == 0) return ncclSuccess;
    c->stage = 3;
    c->moved = 0;
  }
  if (c->stage == 3) {
    int r = moveSome(s, false, &c->in, sizeof(c->in), &c->moved);
    if (r < 0)
      return setError(ncclRemoteError, nullptr,
                      "IB: %s closed the connection during setup (%s): a wrong or stale "
                      "handle token?",
                      c->target.c_str(), strerror(errno));
    if (r == 0) return ncclSuccess;
    if (c->in.magic != kAcceptMagic || c->in.nqps != c->out.nqps || c->in.mtu < IBV_MTU_256 ||
        c->in.mtu > IBV_MTU_4096)
      return setError(ncclRemoteError, nullptr, "IB: %s answered with malformed connection info",
                      c->target.c_str());
    BRAID_CHECK(c->comm->connectTo(c->in));
    c->stage = 4;
    c->moved = 0;
  }
  char ready = kReady;
  int r = moveSome(s, true, &ready, 1, &c->moved);
  if (r < 0)
    return setError(ncclRemoteError, nullptr, "IB: %s closed the connection during setup: %s",
                    c->target.c_str(), strerror(errno));
  *finished = r == 1;
  return ncclSuccess;
}

}  // namespace

ncclResult_t ibConnectStep(const IbDevice* dev, int trafficClass, const IbHandle* handle,
                           IbComm** comm) {
  *comm = nullptr;
  if (handle->magic != kHandleMagic || handle->addrLen == 0 ||
      handle->addrLen > sizeof(handle->addr))
    return setError(ncclInvalidArgument, nullptr,
                    "IB connect: the handle is not an IB net listen handle");
  std::unique_ptr<Connecting> c;
  {
    // Taken out while it progresses, so connections to other handles proceed in
    // parallel on other threads.
    std::lock_guard<std::mutex> lock(gConnectingMu);
    auto it = gConnecting.find(handle->token);
    if (it != gConnecting.end()) {
      c = std::move(it->second);
      gConnecting.erase(it);
    }
  }
  if (!c) c.reset(new Connecting);
  bool finished = false;
  ncclResult_t res = connectSome(dev, trafficClass, handle, c.get(), &finished);
  if (res != ncclSuccess) return res;  // c (socket, QPs) released here
  if (finished) {
    *comm = c->comm.release();
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(gConnectingMu);
  gConnecting[handle->token] = std::move(c);
  return ncclSuccess;
}

void abandonConnect(void* handle) {
  const auto* h = static_cast<const IbHandle*>(handle);
  if (h->magic != kHandleMagic) return;
  std::unique_ptr<Connecting> c;  // destroyed (socket, QPs) outside the lock
  std::lock_guard<std::mutex> lock(gConnectingMu);
  auto it = gConnecting.find(h->token);
  if (it == gConnecting.end()) return;
  c = std::move(it->second);
  gConnecting.erase(it);
}

// A connection the receiver is accepting.
struct IbListenComm::Pending {
  Socket sock;
  std::string from;
  int stage = 1;
  std::unique_ptr<IbComm> comm;
  ConnInfo in{};
  ConnInfo out{};
  size_t moved = 0;
};

IbListenComm::IbListenComm(const IbDevice* dev, int trafficClass)
    : dev_(dev), trafficClass_(trafficClass) {}

IbListenComm::~IbListenComm() = default;

ncclResult_t IbListenComm::listen(IbHandle* handle) {
  SockAddr addr;
  std::string ifname;
  BRAID_CHECK(pickLocalAddress(&addr, &ifname));
  listener_.setLabel("IB net");
  SockAddr bound;
  BRAID_CHECK(listener_.listen(addr, &bound));
  if (bound.len > sizeof(handle->addr))
    return setError(ncclInternalError, nullptr, "IB listen: address %s too long for a handle",
                    bound.toString().c_str());
  token_ = randomToken();
  std::memset(handle, 0, sizeof(*handle));
  handle->magic = kHandleMagic;
  handle->token = token_;
  handle->addrLen = bound.len;
  std::memcpy(handle->addr, &bound.ss, bound.len);
  BRAID_INFO(kLogNet, "IB %s: listening on %s (%s)", dev_->name.c_str(), bound.toString().c_str(),
             ifname.c_str());
  return ncclSuccess;
}

ncclResult_t IbListenComm::accept(IbComm** comm) {
  *comm = nullptr;
  for (;;) {
    int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return setError(ncclSystemError, nullptr, "IB: accept on %s failed: %s",
                      listener_.localAddress().c_str(), strerror(errno));
    }
    std::unique_ptr<Pending> p(new Pending);
    p->sock = Socket(fd);
    p->sock.setNoDelay();
    p->from = p->sock.peerAddress();
    pending_.push_back(std::move(p));
  }
  for (size_t i = 0; i < pending_.size(); ++i) {
    ncclResult_t res = ncclSuccess;
    if (!step(pending_[i].get(), comm, &res)) continue;
    pending_.erase(pending_.begin() + long(i));
    return res;
  }
  return ncclSuccess;
}

bool IbListenComm::step(Pending* p, IbComm** comm, ncclResult_t* res) {
  if (p->stage == 1) {
    int r = moveSome(p->sock, false, &p->in, sizeof(p->in), &p->moved);
    if (r < 0) {
      BRAID_WARN("IB: dropped a connection from %s before setup completed: %s", p->from.c_str(),
                 strerror(errno));
      return true;
    }
    if (r == 0) return false;
    // The token was only ever given out over the job's bootstrap: anything without it
    // is not one of our peers.
    if (p->in.magic != kConnectMagic || p->in.token != token_) {
      BRAID_WARN("IB: rejected a connection from %s to %s: wrong handle token", p->from.c_str(),
                 listener_.localAddress().c_str());
      return true;
    }
    if (p->in.nqps < 1 || p->in.nqps > kMaxQps || p->in.mtu < IBV_MTU_256 ||
        p->in.mtu > IBV_MTU_4096) {
      BRAID_WARN("IB: rejected a connection from %s: malformed connection info", p->from.c_str());
      return true;
    }
    p->comm.reset(new IbComm(dev_, false, trafficClass_));
    p->comm->adoptSocket(std::move(p->sock));
    *res = p->comm->create(int(p->in.nqps));
    if (*res == ncclSuccess) *res = p->comm->connectTo(p->in);
    if (*res != ncclSuccess) return true;
    p->comm->describe(&p->out);
    p->out.magic = kAcceptMagic;
    p->out.token = 0;
    p->stage = 2;
    p->moved = 0;
  }
  Socket& s = p->comm->socket();
  if (p->stage == 2) {
    int r = moveSome(s, true, &p->out, sizeof(p->out), &p->moved);
    if (r < 0) {
      BRAID_WARN("IB: %s went away during setup: %s", p->from.c_str(), strerror(errno));
      return true;
    }
    if (r == 0) return false;
    p->stage = 3;
    p->moved = 0;
  }
  char ready = 0;
  int r = moveSome(s, false, &ready, 1, &p->moved);
  if (r < 0 || (r == 1 && ready != kReady)) {
    BRAID_WARN("IB: %s went away during setup: %s", p->from.c_str(),
               r < 0 ? strerror(errno) : "bad ready byte");
    return true;
  }
  if (r == 0) return false;
  *comm = p->comm.release();
  return true;
}

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
