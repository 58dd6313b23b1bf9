// net transport: connections between hosts (or on one host, when forced) over whatever
// network NetRegistry chose: Socket, IB verbs, UCX or an external NCCL net plugin.
//
//   setupRecv:   listen() on the net device for this channel; the descriptor carries
//                the net's name, the handle and the FIFO geometry.
//   connectSend: hands the handle to the proxy, which calls connect() until it succeeds
//                (never waits here: one thread may run both ends) and sends a hello
//                {job secret, channel, slot size} as the first message.
//   finishRecv:  accept() within ctx.timeoutMs and check the hello: connections with a
//                wrong secret or for another channel are closed (WARN) and the wait
//                goes on.
// Both ends keep their FIFO in local memory registered with the net; the NetProxy
// thread moves slots as messages.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "src/config/params.h"
#include "src/config/error.h"
#include "src/net/socket.h"
#include "transports/net/net_proxy.h"
#include "src/exec/transport.h"

namespace braid {
namespace {

constexpr uint64_t kDescMagic = 0x4252414944444553ull;  // "BRAIDDES"

struct NetDesc {
  uint64_t magic;
  uint64_t slotBytes;
  uint32_t nslots;
  int32_t rank;
  char net[40];  ///< name of the receiver's net: both ends must use the same
  unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
};
static_assert(sizeof(NetDesc) <= ConnDescriptor::kBytes, "descriptor too large");

/// Device mode (ctx.device): registers the FIFO for this rank's GPU and returns the
/// kernel's view of it (the proxy keeps using the host view).
ncclResult_t deviceView(const ConnectContext& ctx, NetConn* conn, const char* dir,
                        DevConn* out) {
  const int me = ctx.self ? ctx.self->rank : -1;
  const int peer = ctx.peer ? ctx.peer->rank : -1;
  const int dev = ctx.self ? ctx.self->cudaDev : -1;
  char what[96];
  std::snprintf(what, sizeof what, "net: rank %d %s rank %d (channel %d)", me, dir, peer,
                ctx.channel);
  if (dev < 0)
    return setError(ncclSystemError, nullptr, "%s: device connection but this rank has no GPU",
                    what);
  void* devPtr = nullptr;
  BRAID_CHECK(conn->registerForDevice(dev, what, &devPtr));
  *out = DevConn::at(devPtr, ctx.geometry.nslots, ctx.geometry.slotBytes, /*hostMem=*/true);
  return ncclSuccess;
}

int inflightFor(const FifoGeometry& g) {
  int64_t n = param::kNetMaxInflight.get();
  // One request below the nets' limit: the hello is in flight with the first data.
  n = std::max<int64_t>(1, std::min<int64_t>({n, NCCL_NET_MAX_REQUESTS - 1, int64_t(g.nslots)}));
  return int(n);
}

/// A FIFO slot travels as one message (host connections: with its tag after it): it
/// must fit the device's largest transfer.
ncclResult_t checkSlotFits(const Net* net, int dev, uint64_t slotBytes, bool device) {
  const size_t most = net->devices[size_t(dev)].maxP2pBytes;
  const uint64_t trailer = device ? 0 : NetConn::kTrailerBytes;
  if (most > 0 && slotBytes + trailer > most)
    return setError(ncclInvalidUsage, nullptr,
                    "%s net: FIFO slots of %llu bytes (and a %llu-byte call tag) exceed "
                    "device %d's largest transfer (%zu bytes): lower NCCL_BUFFSIZE or raise "
                    "BRAID_FIFO_SLOTS",
                    net->name.c_str(), (unsigned long long)slotBytes,
                    (unsigned long long)trailer, dev, most);
  return ncclSuccess;
}

std::string peerDesc(const Net* net, const ConnectContext& ctx) {
  std::string s = net->name + " net";
  if (ctx.peer && ctx.peer->hostname[0])
    s += ", host " + std::string(ctx.peer->hostname, strnlen(ctx.peer->hostname,
                                                             sizeof ctx.peer->hostname));
  return s;
}

/// One end of a connection: the NetConn and, on the receive side until finishRecv,
/// the listening comm.
class NetResource : public ConnResource {
 public:
  explicit NetResource(std::shared_ptr<NetConn> conn) : conn_(std::move(conn)) {}
  ~NetResource() override {
    if (listenComm) conn_->net()->table->closeListen(listenComm);
    // A copy inherited through fork() was never registered with the child's proxy.
    if (!registered_ || registeredBy_ != getpid()) return;
    // A comm's teardown waited for drained() (all its ends under one deadline);
    // otherwise (a send end used on its own) wait here, within this end's bound.
    if (!drainAsked_ && conn_->dir() == NetConn::Dir::kSend) {
      const int64_t deadline = monotonicMs() + flushTimeoutMs;
      while (!drained() && monotonicMs() < deadline) usleep(100);
    }
    NetProxy::get().remove(conn_.get());
  }
  // A send is complete once its bytes are in our FIFO; the peer may still be receiving
  // them: drained once the proxy handed everything to the net, or the connection broke.
  // Then the goodbyes (net_conn.h): sent by the send end, awaited by a plugin's receive
  // end, for kGoodbyeMs at most (the peer may have closed already or be catching up; without
  // them the receive comm closes with receives posted).
  bool drained() override {
    drainAsked_ = true;
    if (!registered_ || registeredBy_ != getpid() || conn_->failed()) return true;
    const bool send = conn_->dir() == NetConn::Dir::kSend;
    if (send && !conn_->sendFlushed()) return false;
    // Built-in nets close receive comms with receives posted without complaint: only a
    // plugin's receive end waits for the goodbyes (ranks of one thread are destroyed
    // one after the other, and would each wait out the bound).
    if (!send && !conn_->net()->external) return true;
    if (goodbyeSinceMs_ < 0) {
      goodbyeSinceMs_ = monotonicMs();
      if (send) conn_->requestGoodbye();
    }
    return conn_->goodbyeDone() || monotonicMs() - goodbyeSinceMs_ > kGoodbyeMs;
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
      *why = "net connection " + std::string(conn_->dir() == NetConn::Dir::kSend ? "to" : "from") +
             " rank " + std::to_string(conn_->peerRank()) + " (" + conn_->peerDesc() +
             ") failed: " + conn_->reason();
    return ncclRemoteError;
  }

  void* listenComm = nullptr;
  int64_t flushTimeoutMs = 60000;  ///< bound on the flush at destruction, if not drained

 private:
  std::shared_ptr<NetConn> conn_;
  bool registered_ = false;
  bool drainAsked_ = false;
  int64_t goodbyeSinceMs_ = -1;
  static constexpr int64_t kGoodbyeMs = 200;
  pid_t registeredBy_ = 0;
};

class NetTransport : public Transport {
 public:
  TransportId id() const override { return TransportId::kNet; }
  const char* name() const override { return "net"; }
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }

  ncclResult_t setupRecv(const ConnectContext& ctx, RecvSide* out,
                         ConnDescriptor* desc) override {
    const FifoGeometry& g = ctx.geometry;
    const int peer = ctx.peer ? ctx.peer->rank : -1;
    if (g.nslots == 0 || g.slotBytes == 0)
      return setError(ncclInvalidArgument, nullptr,
                      "net: FIFO geometry %u slots x %llu bytes is empty", g.nslots,
                      (unsigned long long)g.slotBytes);
    const Net* net = nullptr;
    BRAID_CHECK(NetRegistry::get().select(ctx.netName, &net));
    const int dev = ctx.channel % int(net->devices.size());
    BRAID_CHECK(checkSlotFits(net, dev, g.slotBytes, ctx.device));
    auto conn = std::make_shared<NetConn>(NetConn::Dir::kRecv, net, dev, g.nslots, g.slotBytes,
                                          peer, inflightFor(g), /*tagTrailer=*/!ctx.device);
    if (!conn->fifoMem())
      return setError(ncclSystemError, nullptr,
                      "net: cannot allocate the FIFO for the connection from rank %d", peer);
    DevConn devView;
    if (ctx.device) BRAID_CHECK(deviceView(ctx, conn.get(), "<-", &devView));
    auto res = std::make_unique<NetResource>(conn);
    NetDesc d{};
    ncclResult_t r = net->table->listen(net->ctx, dev, d.handle, &res->listenComm);
    if (r != ncclSuccess)
      return setError(r, nullptr, "%s net: listen on device %d failed (error %d): %s",
                      net->name.c_str(), dev, int(r), lastError(nullptr));
    d.magic = kDescMagic;
    d.slotBytes = g.slotBytes;
    d.nslots = g.nslots;
    d.rank = ctx.self ? ctx.self->rank : -1;
    std::snprintf(d.net, sizeof d.net, "%s", net->name.c_str());
    *desc = ConnDescriptor{};
    desc->transport = uint32_t(TransportId::kNet);
    std::memcpy(desc->data, &d, sizeof d);
    out->fifo.attach(conn->fifoMem());
    out->dev = devView;
    out->res = std::move(res);
    BRAID_INFO(kLogNet, "net: rank %d <- rank %d channel %d: listening on %s device %d (%s)",
               d.rank, peer, ctx.channel, net->name.c_str(), dev,
               net->devices[size_t(dev)].name ? net->devices[size_t(dev)].name : "?");
    return ncclSuccess;
  }

  ncclResult_t connectSend(const ConnectContext& ctx, const ConnDescriptor& desc,
                           SendSide* out) override {
    NetDesc d;
    std::memcpy(&d, desc.data, sizeof d);
    d.net[sizeof d.net - 1] = '\0';
    const int peer = ctx.peer ? ctx.peer->rank : d.rank;
    const FifoGeometry& g = ctx.geometry;
    if (desc.transport != uint32_t(TransportId::kNet) || d.magic != kDescMagic)
      return setError(ncclInternalError, nullptr,
                      "net: descriptor from rank %d is not a net one (transport %u)", peer,
                      desc.transport);
    if (g.slotBytes > d.slotBytes)
      return setError(ncclInvalidUsage, nullptr,
                      "net: slot size %llu here but %llu on rank %d: NCCL_BUFFSIZE / "
                      "BRAID_FIFO_SLOTS must be equal on every rank",
                      (unsigned long long)g.slotBytes, (unsigned long long)d.slotBytes, peer);
    const Net* net = nullptr;
    BRAID_CHECK(NetRegistry::get().select(ctx.netName, &net));
    if (net->name.compare(0, sizeof d.net - 1, d.net) != 0)
      return setError(ncclInvalidUsage, nullptr,
                      "net: rank %d listens on the %s network but this rank uses %s: NCCL_NET "
                      "/ NCCL_NET_PLUGIN / NCCL_IB_DISABLE must agree on every rank", peer,
                      d.net, net->name.c_str());
    const int dev = ctx.channel % int(net->devices.size());
    BRAID_CHECK(checkSlotFits(net, dev, g.slotBytes, ctx.device));
    auto conn = std::make_shared<NetConn>(NetConn::Dir::kSend, net, dev, g.nslots, g.slotBytes,
                                          peer, inflightFor(g), /*tagTrailer=*/!ctx.device);
    if (!conn->fifoMem())
      return setError(ncclSystemError, nullptr,
                      "net: cannot allocate the FIFO for the connection to rank %d", peer);
    DevConn devView;
    if (ctx.device) BRAID_CHECK(deviceView(ctx, conn.get(), "->", &devView));
    NetHello h{};
    h.magic = NetHello::kMagic;
    h.secret = ctx.secret;
    h.slotBytes = g.slotBytes;
    h.channel = ctx.channel;
    h.rank = ctx.self ? ctx.self->rank : -1;
    h.commHash = ctx.commHash;
    const int64_t deadline = ctx.timeoutMs < 0 ? -1 : monotonicMs() + ctx.timeoutMs;
    conn->startConnect(d.handle, sizeof d.handle, h, deadline, peerDesc(net, ctx));
    auto res = std::make_unique<NetResource>(conn);
    res->flushTimeoutMs = ctx.timeoutMs < 0 ? 60000 : ctx.timeoutMs;
    res->registerWithProxy();
    out->fifo.attach(conn->fifoMem());
    out->allowDirect = false;
    out->dev = devView;
    out->res = std::move(res);
    BRAID_INFO(kLogNet, "net: rank %d -> rank %d channel %d: connecting over %s device %d",
               h.rank, peer, ctx.channel, net->name.c_str(), dev);
    return ncclSuccess;
  }

  ncclResult_t finishRecv(const ConnectContext& ctx, RecvSide* side) override {
    auto* res = static_cast<NetResource*>(side->res.get());
    const int peer = ctx.peer ? ctx.peer->rank : -1;
    if (!res || !res->listenComm)
      return setError(ncclInternalError, nullptr,
                      "net: finishRecv for rank %d without setupRecv", peer);
    NetConn* conn = res->conn();
    const Net* net = conn->net();
    const int64_t deadline = ctx.timeoutMs < 0 ? -1 : monotonicMs() + ctx.timeoutMs;
    NetHello expect{};
    expect.secret = ctx.secret;
    expect.channel = ctx.channel;
    expect.rank = ctx.self ? ctx.self->rank : -1;
    expect.commHash = ctx.commHash;
    for (unsigned spins = 0;; ++spins) {
      void* comm = nullptr;
      ncclNetDeviceHandle_v11_t* devHandle = nullptr;
      ncclResult_t r = net->table->accept(res->listenComm, &comm, &devHandle);
      if (r != ncclSuccess)
        return setError(r, nullptr, "%s net: accept for rank %d (channel %d) failed (error %d)",
                        net->name.c_str(), peer, ctx.channel, int(r));
      if (comm) {
        bool ok = false;
        BRAID_CHECK(conn->acceptHello(comm, expect, deadline, ctx.abortFlag, &ok,
                                      peerDesc(net, ctx)));
        if (ok) break;
        continue;  // not ours: keep listening
      }
      if (ctx.abortFlag && ctx.abortFlag->load())
        return setError(ncclSystemError, nullptr,
                        "net: aborted while waiting for rank %d to connect (channel %d)", peer,
                        ctx.channel);
      if (deadline >= 0 && monotonicMs() > deadline)
        return setError(ncclSystemError, nullptr,
                        "net: rank %d did not connect (channel %d) within %d ms", peer,
                        ctx.channel, ctx.timeoutMs);
      if (spins > 64) usleep(spins > 2048 ? 1000 : 50);
    }
    net->table->closeListen(res->listenComm);
    res->listenComm = nullptr;
    res->registerWithProxy();
    BRAID_INFO(kLogNet, "net: rank %d <- rank %d channel %d: accepted over %s",
               ctx.self ? ctx.self->rank : -1, peer, ctx.channel, net->name.c_str());
    return ncclSuccess;
  }
};

}  // namespace

Transport& netTransport() {
  static NetTransport t;
  return t;
}

}  // namespace braid
