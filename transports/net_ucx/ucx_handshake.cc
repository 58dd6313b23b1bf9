// The UCX net's connection handshake (see ucx_handshake.h).
#include "transports/net_ucx/ucx_handshake.h"

#if BRAID_HAVE_UCX
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "src/bootstrap/unique_id.h"
#include "src/config/error.h"
#include "transports/net_ucx/ucx_comm.h"
#include "transports/net_ucx/ucx_worker.h"

namespace braid {
namespace {

constexpr uint64_t kHandleMagic = 0x4252414955435848ull;  // "BRAIUCXH"
constexpr uint64_t kHelloMagic = 0x4252414955435831ull;   // "BRAIUCX1"
constexpr uint64_t kReplyMagic = 0x4252414955435832ull;   // "BRAIUCX2"
constexpr uint32_t kVersion = 1;
// A UCP worker address is tens to a few hundred bytes (more with many IB ports); a
// larger claim is garbage, not a peer.
constexpr uint32_t kMaxAddressBytes = 64 * 1024;
// A connection that has not finished its handshake in this long is dropped, so a
// stray client cannot hold a listener's state forever.
constexpr int64_t kHandshakeMs = 120000;

enum ReplyStatus : uint32_t { kAccepted = 0, kBadToken = 1, kBadVersion = 2 };

struct Hello {
  uint64_t magic;
  uint64_t token;
  uint32_t version;
  uint32_t addrLen;
};

struct Reply {
  uint64_t magic;
  uint32_t status;
  uint32_t addrLen;
  uint32_t tagId;
  uint32_t reserved;
};

template <typename T>
std::string packMessage(const T& header, const std::string& tail) {
  std::string out(reinterpret_cast<const char*>(&header), sizeof(T));
  out += tail;
  return out;
}

template <typename T>
T unpackHeader(const std::string& bytes) {
  T h;
  memcpy(&h, bytes.data(), sizeof(T));
  return h;
}

uint64_t randomToken() {
  uint64_t t = 0;
  while (t == 0) t = bootstrapRandomSecret();
  return t;
}

}  // namespace

// ---- UcxWireBuffer --------------------------------------------------------------------

int UcxWireBuffer::push(Socket& s) {
  while (done < bytes.size()) {
    ssize_t n = s.trySend(bytes.data() + done, bytes.size() - done);
    if (n < 0) return -1;
    if (n == 0) return 0;
    done += size_t(n);
  }
  return 1;
}

int UcxWireBuffer::pull(Socket& s) {
  while (done < bytes.size()) {
    ssize_t n = s.tryRecv(&bytes[done], bytes.size() - done);
    if (n < 0) return -1;
    if (n == 0) return 0;
    done += size_t(n);
  }
  return 1;
}

// ---- sender ---------------------------------------------------------------------------

UcxConnector::UcxConnector(UcxWorker* worker, const UcxHandle& handle)
    : worker_(worker), token_(handle.token) {
  memcpy(&target_.ss, handle.addr, handle.addrLen);
  target_.len = socklen_t(handle.addrLen);
  where_ = target_.toString();
}

ncclResult_t UcxConnector::connect(UcxWorker* worker, UcxHandle* handle, UcxComm** comm) {
  *comm = nullptr;
  if (handle->magic != kHandleMagic || handle->addrLen == 0 ||
      handle->addrLen > sizeof(handle->addr))
    return setError(ncclInvalidArgument, nullptr,
                    "UCX net: connect: the handle does not come from the UCX net's listen()");
  if (!handle->pending) handle->pending = new UcxConnector(worker, *handle);
  UcxConnector* c = handle->pending;
  ncclResult_t res = c->step(comm);
  if (res != ncclSuccess || *comm) {  // finished, one way or the other
    delete c;
    handle->pending = nullptr;
  }
  return res;
}

void UcxConnector::abandon(UcxHandle* handle) {
  if (handle->magic != kHandleMagic || !handle->pending) return;
  delete handle->pending;
  handle->pending = nullptr;
}

ncclResult_t UcxConnector::start() {
  const char* where = where_.c_str();
  int fd = ::socket(target_.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return setError(ncclSystemError, nullptr, "UCX net: socket() to connect to %s failed: %s",
                    where, strerror(errno));
  sock_ = Socket(fd);
  sock_.setLabel("UCX net");
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&target_.ss), target_.len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS)
    return setError(ncclRemoteError, nullptr, "UCX net: connect to %s failed: %s",
                    where, strerror(errno));
  sock_.setNoDelay();
  Hello hello{kHelloMagic, token_, kVersion, uint32_t(worker_->address().size())};
  out_.bytes = packMessage(hello, worker_->address());
  in_.expect(sizeof(Reply));
  stage_ = rc == 0 ? Stage::kSendHello : Stage::kConnecting;
  return ncclSuccess;
}

ncclResult_t UcxConnector::step(UcxComm** comm) {
  *comm = nullptr;
  const char* where = where_.c_str();
  if (stage_ == Stage::kStart) BRAID_CHECK(start());
  if (stage_ == Stage::kConnecting) {
    pollfd p{sock_.fd(), POLLOUT, 0};
    int n = ::poll(&p, 1, 0);
    if (n == 0 || (n < 0 && errno == EINTR)) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof(err);
    if (n < 0 || getsockopt(sock_.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0)
      return setError(ncclRemoteError, nullptr, "UCX net: connect to %s failed: %s",
                      where, strerror(err));
    stage_ = Stage::kSendHello;
  }
  if (stage_ == Stage::kSendHello) {
    int r = out_.push(sock_);
    if (r < 0)
      return setError(ncclRemoteError, nullptr, "UCX net: sending the handshake to %s failed: %s",
                      where, strerror(errno));
    if (r == 0) return ncclSuccess;
    stage_ = Stage::kRecvReply;
  }
  if (stage_ == Stage::kRecvReply) {
    int r = in_.pull(sock_);
    if (r < 0)
      return setError(ncclRemoteError, nullptr,
                      "UCX net: %s closed the handshake before replying (%s)", where,
                      strerror(errno));
    if (r == 0) return ncclSuccess;
    Reply reply = unpackHeader<Reply>(in_.bytes);
    if (reply.magic != kReplyMagic)
      return setError(ncclRemoteError, nullptr, "UCX net: %s is not a Braid UCX listener",
                      where);
    if (reply.status == kBadToken)
      return setError(ncclRemoteError, nullptr,
                      "UCX net: %s rejected the connection: wrong token (handle not from this "
                      "job's bootstrap?)", where);
    if (reply.status != kAccepted || reply.addrLen == 0 || reply.addrLen > kMaxAddressBytes)
      return setError(ncclRemoteError, nullptr,
                      "UCX net: %s rejected the connection (status %u, address %u bytes)",
                      where, reply.status, reply.addrLen);
    tagId_ = reply.tagId;
    in_.expect(reply.addrLen);
    stage_ = Stage::kRecvAddress;
  }
  // Stage::kRecvAddress
  int r = in_.pull(sock_);
  if (r < 0)
    return setError(ncclRemoteError, nullptr,
                    "UCX net: %s closed the handshake while sending its address (%s)",
                    where, strerror(errno));
  if (r == 0) return ncclSuccess;
  std::lock_guard<std::mutex> lock(worker_->mu());
  return UcxComm::create(worker_, /*isSend=*/true, std::move(sock_), in_.bytes, tagId_, comm);
}

// ---- receiver -------------------------------------------------------------------------

ncclResult_t UcxListener::create(UcxWorker* worker, UcxHandle* handle, UcxListener** out) {
  SockAddr local;
  std::string ifname;
  BRAID_CHECK(pickLocalAddress(&local, &ifname));
  UcxListener* l = new UcxListener(worker);
  l->listen_.setLabel("UCX net");
  SockAddr bound;
  ncclResult_t res = l->listen_.listen(local, &bound);
  if (res != ncclSuccess) {
    delete l;
    return res;
  }
  if (bound.len > sizeof(handle->addr)) {
    delete l;
    return setError(ncclInternalError, nullptr, "UCX net: address %s does not fit the handle",
                    bound.toString().c_str());
  }
  l->where_ = bound.toString();
  l->token_ = randomToken();
  memset(handle, 0, sizeof(*handle));
  handle->magic = kHandleMagic;
  handle->token = l->token_;
  handle->addrLen = uint32_t(bound.len);
  memcpy(handle->addr, &bound.ss, bound.len);
  handle->pending = nullptr;
  BRAID_INFO(kLogNet, "UCX net: listening on %s (%s)", l->where_.c_str(), ifname.c_str());
  *out = l;
  return ncclSuccess;
}

void UcxListener::reject(Pending& p, uint32_t status, const char* why) {
  BRAID_WARN("UCX net: listener %s dropped a connection from %s: %s", where_.c_str(),
             p.peer.c_str(), why);
  // Best effort, once: tell an honest but misconfigured peer why (it learns nothing it
  // could use: the reply carries no address).
  Reply reply{kReplyMagic, status, 0, 0, 0};
  p.sock.trySend(&reply, sizeof(reply));
}

int UcxListener::advance(Pending& p, UcxComm** comm, ncclResult_t* res) {
  if (p.stage == Stage::kRecvHello) {
    int r = p.in.pull(p.sock);
    if (r < 0) {
      BRAID_INFO(kLogNet, "UCX net: connection from %s closed during the handshake",
                 p.peer.c_str());
      return -1;
    }
    if (r == 0) return 0;
    Hello hello = unpackHeader<Hello>(p.in.bytes);
    if (hello.magic != kHelloMagic || hello.token != token_) {
      reject(p, kBadToken, "wrong token (not a peer of this job)");
      return -1;
    }
    if (hello.version != kVersion || hello.addrLen == 0 || hello.addrLen > kMaxAddressBytes) {
      reject(p, kBadVersion, "unsupported handshake version or address size");
      return -1;
    }
    p.in.expect(hello.addrLen);
    p.stage = Stage::kRecvAddress;
  }
  if (p.stage == Stage::kRecvAddress) {
    int r = p.in.pull(p.sock);
    if (r < 0) {
      BRAID_INFO(kLogNet, "UCX net: connection from %s closed during the handshake",
                 p.peer.c_str());
      return -1;
    }
    if (r == 0) return 0;
    p.peerAddress = p.in.bytes;
    {
      std::lock_guard<std::mutex> lock(worker_->mu());
      p.tagId = worker_->nextTagId();
    }
    Reply reply{kReplyMagic, kAccepted, uint32_t(worker_->address().size()), p.tagId, 0};
    p.out.bytes = packMessage(reply, worker_->address());
    p.stage = Stage::kSendReply;
  }
  // Stage::kSendReply
  int r = p.out.push(p.sock);
  if (r < 0) {
    BRAID_INFO(kLogNet, "UCX net: connection from %s closed during the handshake: %s",
               p.peer.c_str(), strerror(errno));
    return -1;
  }
  if (r == 0) return 0;
  std::lock_guard<std::mutex> lock(worker_->mu());
  *res = UcxComm::create(worker_, /*isSend=*/false, std::move(p.sock), p.peerAddress, p.tagId,
                         comm);
  return 1;
}

ncclResult_t UcxListener::accept(UcxComm** comm) {
  *comm = nullptr;
  for (;;) {
    int fd = ::accept4(listen_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      return setError(ncclSystemError, nullptr, "UCX net: accept on %s failed: %s",
                      where_.c_str(), strerror(errno));
    }
    pending_.emplace_back();
    Pending& p = pending_.back();
    p.sock = Socket(fd);
    p.sock.setLabel("UCX net");
    p.sock.setNoDelay();
    p.peer = p.sock.peerAddress();
    p.in.expect(sizeof(Hello));
    p.startMs = monotonicMs();
  }
  const int64_t now = monotonicMs();
  for (auto it = pending_.begin(); it != pending_.end();) {
    ncclResult_t res = ncclSuccess;
    int r = advance(*it, comm, &res);
    if (r == 0 && now - it->startMs > kHandshakeMs) {
      BRAID_WARN("UCX net: listener %s dropped a connection from %s: no handshake in %lld ms",
                 where_.c_str(), it->peer.c_str(), static_cast<long long>(kHandshakeMs));
      r = -1;
    }
    if (r == 0) {
      ++it;
      continue;
    }
    it = pending_.erase(it);
    if (r == 1) return res;  // one comm per call
  }
  return ncclSuccess;
}

}  // namespace braid
#endif  // BRAID_HAVE_UCX
