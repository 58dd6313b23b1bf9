// net_socket transport: TCP between hosts (or on one host when selected).
//
//   setupRecv:   listen on this rank's netAddr (port 0); descriptor = address + token.
//   connectSend: connect, send the handshake {secret, token, channel, slot size}; never
//                waits for the receiver (one thread may run both ends).
//   finishRecv:  accept within ctx.timeoutMs; connections with a wrong secret or token
//                are closed (WARN) and the wait goes on.
// Both ends keep their FIFO in local memory; the NetProxy thread moves the bytes.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "src/core/error.h"
#include "transports/net_socket/net_proxy.h"
#include "transports/transport.h"

namespace braid {
namespace {

constexpr uint64_t kDescMagic = 0x4252414944534f43ull;       // "BRAIDSOC"
constexpr uint64_t kHandshakeMagic = 0x4252414944485348ull;  // "BRAIDHSH"

struct NetDesc {
  uint64_t magic;
  uint64_t token;
  uint64_t slotBytes;
  uint32_t nslots;
  int32_t rank;
  char addr[128];  ///< "ip:port" or "[ip6]:port" the receiver listens on
};
static_assert(sizeof(NetDesc) <= ConnDescriptor::kBytes, "descriptor too large");

/// First bytes on every data socket, sender -> receiver.
struct NetHandshake {
  uint64_t magic;
  uint64_t secret;
  uint64_t token;
  uint64_t slotBytes;
  int32_t channel;
  int32_t rank;
};

/// Device mode (ctx.device): registers the connection's FIFO for this rank's GPU and
/// returns the kernel's view of it (the proxy keeps using the host view).
ncclResult_t deviceView(const ConnectContext& ctx, NetConn* conn, const char* dir,
                        DevConn* out) {
  const int me = ctx.self ? ctx.self->rank : -1;
  const int peer = ctx.peer ? ctx.peer->rank : -1;
  const int dev = ctx.self ? ctx.self->cudaDev : -1;
  char what[96];
  std::snprintf(what, sizeof what, "net_socket: rank %d %s rank %d (channel %d)", me, dir, peer,
                ctx.channel);
  if (dev < 0)
    return setError(ncclSystemError, nullptr, "%s: device connection but this rank has no GPU",
                    what);
  void* devPtr = nullptr;
  BRAID_CHECK(conn->registerForDevice(dev, what, &devPtr));
  *out = DevConn::at(devPtr, ctx.geometry.nslots, ctx.geometry.slotBytes, /*hostMem=*/true);
  return ncclSuccess;
}

uint64_t randomToken() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(getpid()) << 32)};
  std::lock_guard<std::mutex> lk(mu);
  uint64_t t;
  do t = rng();
  while (t == 0);
  return t;
}

/// One end of a connection: the NetConn (FIFO + socket) and, on the receive side
/// until finishRecv, the listening socket.
class NetResource : public ConnResource {
 public:
  explicit NetResource(std::shared_ptr<NetConn> conn) : conn_(std::move(conn)) {}
  ~NetResource() override {
    // A copy inherited through fork() was never registered with the child's proxy.
    if (!registered_ || registeredBy_ != getpid()) return;
    // A send is complete once its bytes are in our FIFO; the peer may still be
    // receiving them. Let the proxy hand everything to the kernel before closing (TCP
    // then delivers it ahead of the FIN), unless the connection is broken.
    if (conn_->dir() == NetConn::Dir::kSend) {
      const int64_t deadline = monotonicMs() + flushTimeoutMs;
      while (!conn_->sendFlushed() && !conn_->failed() && monotonicMs() < deadline)
        usleep(100);
    }
    NetProxy::get().remove(conn_.get());
  }
  NetConn* conn() const { return conn_.get(); }
  void registerWithProxy() {
    NetProxy::get().add(conn_);
    registered_ = true;
    registeredBy_ = getpid();
  }

  ncclResult_t checkPeer(std::string* why) override {
    if (!conn_->failed() || conn_->failedLocally()) return ncclSuccess;
    if (why)
      *why = "socket connection " + std::string(conn_->dir() == NetConn::Dir::kSend ? "to" : "from") +
             " rank " + std::to_string(conn_->peerRank()) + " (" + conn_->peerAddr() +
             ") closed: " + conn_->reason();
    return ncclRemoteError;
  }

  Socket listener;
  uint64_t token = 0;
  int64_t flushTimeoutMs = 60000;  ///< bound on the flush at destruction

 private:
  std::shared_ptr<NetConn> conn_;
  bool registered_ = false;
  pid_t registeredBy_ = 0;
};

class NetSocketTransport : public Transport {
 public:
  TransportId id() const override { return TransportId::kNetSocket; }
  const char* name() const override { return "socket"; }
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }

  ncclResult_t setupRecv(const ConnectContext& ctx, RecvSide* out,
                         ConnDescriptor* desc) override {
    const FifoGeometry& g = ctx.geometry;
    const int peer = ctx.peer ? ctx.peer->rank : -1;
    if (g.nslots == 0 || g.slotBytes == 0)
      return setError(ncclInvalidArgument, nullptr,
                      "net_socket: FIFO geometry %u slots x %llu bytes is empty", g.nslots,
                      (unsigned long long)g.slotBytes);
    SockAddr addr;
    std::string ip = ctx.self ? std::string(ctx.self->netAddr, strnlen(ctx.self->netAddr,
                                                                       sizeof ctx.self->netAddr))
                              : std::string();
    if (ip.empty()) {
      BRAID_CHECK(pickLocalAddress(&addr, nullptr));
    } else {
      std::string text = ip.find(':') != std::string::npos && ip[0] != '[' ? "[" + ip + "]:0"
                                                                           : ip + ":0";
      if (!SockAddr::parse(text, &addr))
        return setError(ncclInvalidArgument, nullptr,
                        "net_socket: cannot parse this rank's network address '%s'", ip.c_str());
    }
    auto conn = std::make_shared<NetConn>(NetConn::Dir::kRecv, g.nslots, g.slotBytes, peer);
    if (!conn->fifoMem())
      return setError(ncclSystemError, nullptr,
                      "net_socket: cannot allocate the FIFO for the connection from rank %d",
                      peer);
    DevConn dev;
    if (ctx.device) BRAID_CHECK(deviceView(ctx, conn.get(), "<-", &dev));
    auto res = std::make_unique<NetResource>(conn);
    res->listener.setLabel("net_socket");
    SockAddr bound;
    BRAID_CHECK(res->listener.listen(addr, &bound));
    res->token = randomToken();

    NetDesc d{};
    d.magic = kDescMagic;
    d.token = res->token;
    d.slotBytes = g.slotBytes;
    d.nslots = g.nslots;
    d.rank = ctx.self ? ctx.self->rank : -1;
    std::snprintf(d.addr, sizeof d.addr, "%s", bound.toString().c_str());
    *desc = ConnDescriptor{};
    desc->transport = uint32_t(TransportId::kNetSocket);
    std::memcpy(desc->data, &d, sizeof d);
    out->fifo.attach(conn->fifoMem());
    out->dev = dev;
    out->res = std::move(res);
    BRAID_INFO(kLogNet, "net_socket: rank %d <- rank %d channel %d: listening on %s", d.rank,
               peer, ctx.channel, d.addr);
    return ncclSuccess;
  }

  ncclResult_t connectSend(const ConnectContext& ctx, const ConnDescriptor& desc,
                           SendSide* out) override {
    NetDesc d;
    std::memcpy(&d, desc.data, sizeof d);
    d.addr[sizeof d.addr - 1] = '\0';
    const int peer = ctx.peer ? ctx.peer->rank : d.rank;
    const FifoGeometry& g = ctx.geometry;
    if (desc.transport != uint32_t(TransportId::kNetSocket) || d.magic != kDescMagic)
      return setError(ncclInternalError, nullptr,
                      "net_socket: descriptor from rank %d is not a socket one (transport %u)",
                      peer, desc.transport);
    if (g.slotBytes > d.slotBytes)
      return setError(ncclInvalidUsage, nullptr,
                      "net_socket: slot size %llu here but %llu on rank %d: NCCL_BUFFSIZE / "
                      "BRAID_FIFO_SLOTS must be equal on every rank",
                      (unsigned long long)g.slotBytes, (unsigned long long)d.slotBytes, peer);
    SockAddr addr;
    if (!SockAddr::parse(d.addr, &addr))
      return setError(ncclInternalError, nullptr,
                      "net_socket: bad address '%s' in the descriptor of rank %d", d.addr, peer);
    auto conn = std::make_shared<NetConn>(NetConn::Dir::kSend, g.nslots, g.slotBytes, peer);
    if (!conn->fifoMem())
      return setError(ncclSystemError, nullptr,
                      "net_socket: cannot allocate the FIFO for the connection to rank %d", peer);
    // Before connecting: a failure here leaves the receiver no half-made connection.
    DevConn dev;
    if (ctx.device) BRAID_CHECK(deviceView(ctx, conn.get(), "->", &dev));
    Socket sock;
    sock.setLabel("net_socket");
    BRAID_CHECK(sock.connect(addr, ctx.timeoutMs, ctx.abortFlag));
    NetHandshake h{};
    h.magic = kHandshakeMagic;
    h.secret = ctx.secret;
    h.token = d.token;
    h.slotBytes = g.slotBytes;
    h.channel = ctx.channel;
    h.rank = ctx.self ? ctx.self->rank : -1;
    BRAID_CHECK(sock.sendAll(&h, sizeof h, ctx.timeoutMs, ctx.abortFlag));
    conn->setSocket(std::move(sock), d.addr);
    auto res = std::make_unique<NetResource>(conn);
    res->flushTimeoutMs = ctx.timeoutMs;
    res->registerWithProxy();
    out->fifo.attach(conn->fifoMem());
    out->allowDirect = false;
    out->dev = dev;
    out->res = std::move(res);
    BRAID_INFO(kLogNet, "net_socket: rank %d -> rank %d channel %d: connected to %s", h.rank,
               peer, ctx.channel, d.addr);
    return ncclSuccess;
  }

  ncclResult_t finishRecv(const ConnectContext& ctx, RecvSide* side) override {
    auto* res = static_cast<NetResource*>(side->res.get());
    const int peer = ctx.peer ? ctx.peer->rank : -1;
    if (!res || !res->listener.valid())
      return setError(ncclInternalError, nullptr,
                      "net_socket: finishRecv for rank %d without setupRecv", peer);
    const int64_t deadline = ctx.timeoutMs < 0 ? -1 : monotonicMs() + ctx.timeoutMs;
    for (;;) {
      int left = deadline < 0 ? -1 : int(std::max<int64_t>(0, deadline - monotonicMs()));
      Socket s;
      ncclResult_t rc = res->listener.accept(&s, left, ctx.abortFlag);
      if (rc != ncclSuccess) {
        if (ctx.abortFlag && ctx.abortFlag->load())
          return setError(rc, nullptr,
                          "net_socket: aborted while waiting for rank %d to connect (channel %d)",
                          peer, ctx.channel);
        return setError(rc, nullptr,
                        "net_socket: rank %d did not connect (channel %d) within %d ms", peer,
                        ctx.channel, ctx.timeoutMs);
      }
      left = deadline < 0 ? -1 : int(std::max<int64_t>(0, deadline - monotonicMs()));
      NetHandshake h{};
      std::string from = s.peerAddress();
      if (s.recvAll(&h, sizeof h, left, ctx.abortFlag) != ncclSuccess) {
        BRAID_WARN("net_socket: connection from %s (expected rank %d) sent no handshake; "
                   "ignored", from.c_str(), peer);
        continue;
      }
      if (h.magic != kHandshakeMagic || h.secret != ctx.secret) {
        BRAID_WARN("net_socket: rejected a connection from %s (expected rank %d): wrong job "
                   "secret", from.c_str(), peer);
        continue;
      }
      if (h.token != res->token || h.channel != ctx.channel) {
        BRAID_WARN("net_socket: rejected a connection from %s (expected rank %d, channel %d): "
                   "it is for another connection (channel %d)", from.c_str(), peer,
                   ctx.channel, int(h.channel));
        continue;
      }
      if (h.slotBytes > ctx.geometry.slotBytes)
        return setError(ncclInvalidUsage, nullptr,
                        "net_socket: rank %d uses %llu-byte slots, this rank %llu: "
                        "NCCL_BUFFSIZE / BRAID_FIFO_SLOTS must be equal on every rank", peer,
                        (unsigned long long)h.slotBytes,
                        (unsigned long long)ctx.geometry.slotBytes);
      res->listener.close();
      res->conn()->setSocket(std::move(s), from);
      res->registerWithProxy();
      BRAID_INFO(kLogNet, "net_socket: rank %d <- rank %d channel %d: accepted %s",
                 ctx.self ? ctx.self->rank : -1, peer, ctx.channel, from.c_str());
      return ncclSuccess;
    }
  }
};

}  // namespace

Transport& netSocketTransport() {
  static NetSocketTransport t;
  return t;
}

}  // namespace braid
