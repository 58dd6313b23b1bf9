// Bootstrap over TCP: join through the root, then rank-to-rank tagged messages.
//
// Every rank listens on one port. send(peer) uses one cached outgoing connection per
// peer; recv() polls the listener and every incoming connection, reading messages
// incrementally into a stash keyed by (peer, tag) until the one asked for is there.
// A send that cannot proceed (full socket buffers) keeps draining incoming messages,
// so two ranks sending large messages to each other never deadlock.
#include "src/bootstrap/bootstrap.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/bootstrap/root.h"
#include "src/bootstrap/wire.h"
#include "src/bootstrap/wire_check.h"
#include "src/config/params.h"
#include "src/config/error.h"
#include "src/net/socket.h"

namespace braid {
namespace {

constexpr int kSliceMs = 50;  // the abort flag is checked at least this often
constexpr int kProbeMs = 200;  // and the peer probe (setPeerProbe) this often
// Internal tags (the core's tags must stay below kInternalTagBase).
constexpr uint32_t kInternalTagBase = 0xFFFFFF00u;
constexpr uint32_t kTagAllGather = kInternalTagBase + 1;
constexpr uint32_t kTagBarrier = kInternalTagBase + 2;

std::string tagName(uint32_t tag) {
  if (tag == kTagAllGather) return "allGather";
  if (tag == kTagBarrier) return "barrier";
  return "tag " + std::to_string(tag);
}

// An incoming connection from a peer, read incrementally.
struct Incoming {
  Socket sock;
  int from = -1;  // known after the first header
  wire::MsgHeader hdr{};
  size_t hdrGot = 0;
  std::vector<char> body;
  size_t bodyGot = 0;
};

class SocketBootstrap : public Bootstrap {
 public:
  SocketBootstrap(int rank, int nranks, uint64_t secret, const BootstrapOptions& opts)
      : rank_(rank), nranks_(nranks), secret_(secret), opts_(opts) {
    label_ = "bootstrap rank " + std::to_string(rank);
    rootLabel_ = label_ + " -> root";
    peerLabels_.resize(size_t(nranks));
    for (int p = 0; p < nranks; ++p)
      peerLabels_[size_t(p)] = label_ + " -> rank " + std::to_string(p);
    out_.resize(size_t(nranks));
    closed_.assign(size_t(nranks), false);
  }

  ncclResult_t join(const UniqueIdInfo& info);

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  uint64_t secret() const override { return secret_; }
  const char* localIp() const override { return localIp_.c_str(); }

  ncclResult_t send(int peer, uint32_t tag, const void* data, size_t bytes) override;
  ncclResult_t recv(int peer, uint32_t tag, void* data, size_t bytes) override;
  ncclResult_t allGather(void* data, size_t bytes) override;
  ncclResult_t barrier() override;
  void setExtraAbortFlag(const std::atomic<bool>* flag) override { extraAbort_ = flag; }
  void setPeerProbe(PeerProbe probe) override { probe_ = std::move(probe); }

 private:
  bool aborted() const {
    return (opts_.abortFlag && opts_.abortFlag->load(std::memory_order_acquire)) ||
           (extraAbort_ && extraAbort_->load(std::memory_order_acquire));
  }
  int64_t deadline() const { return opts_.timeoutMs < 0 ? -1 : monotonicMs() + opts_.timeoutMs; }
  // One round: poll the listener, incoming sockets and optionally `extraFd`; handle
  // what is ready. *extraReady tells whether extraFd reported `extraEvents`.
  ncclResult_t pump(int waitMs, int extraFd, short extraEvents, bool* extraReady);
  void readIncoming(Incoming* in);  // closes in->sock on EOF or protocol errors
  bool takeStash(int peer, uint32_t tag, void* data, size_t bytes, ncclResult_t* res);

  int rank_;
  int nranks_;
  uint64_t secret_;
  BootstrapOptions opts_;
  const std::atomic<bool>* extraAbort_ = nullptr;  ///< see setExtraAbortFlag
  PeerProbe probe_;  ///< see setPeerProbe
  std::string label_;
  std::string rootLabel_;
  std::vector<std::string> peerLabels_;  // socket labels must outlive the sockets
  std::string localIp_;
  Socket listener_;
  std::vector<SockAddr> peers_;
  std::vector<Socket> out_;  // cached outgoing connection per peer
  std::vector<std::unique_ptr<Incoming>> in_;
  std::vector<bool> closed_;  // the peer closed its connection to us
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<char>>> stash_;
};

ncclResult_t SocketBootstrap::join(const UniqueIdInfo& info) {
  SockAddr rootAddr;
  if (!SockAddr::parse(info.rootAddr, &rootAddr))
    return setError(ncclInvalidArgument, nullptr, "bootstrap: bad root address '%s'", info.rootAddr);

  Socket root;
  root.setLabel(rootLabel_.c_str());
  BRAID_CHECK(root.connect(rootAddr, opts_.timeoutMs, opts_.abortFlag));

  // Listen on the interface that reaches the root, unless NCCL_SOCKET_IFNAME says which.
  SockAddr local;
  if (!param::kSocketIfname.get().empty()) {
    BRAID_CHECK(pickLocalAddress(&local, nullptr));
  } else {
    local.len = sizeof(local.ss);
    if (getsockname(root.fd(), reinterpret_cast<sockaddr*>(&local.ss), &local.len) != 0)
      return setError(ncclSystemError, nullptr, "%s: getsockname on the root connection: %s",
                      label_.c_str(), strerror(errno));
    local.setPort(0);
  }
  listener_.setLabel(label_.c_str());
  SockAddr bound;
  BRAID_CHECK(listener_.listen(local, &bound));
  listener_.setNonBlocking(true);
  const std::string boundText = bound.toString();
  localIp_ = boundText.substr(0, boundText.rfind(':'));
  if (!localIp_.empty() && localIp_[0] == '[') localIp_ = localIp_.substr(1, localIp_.size() - 2);

  wire::RootHello hello{};
  hello.magic = wire::kHelloMagic;
  hello.version = wire::kIdVersion;
  hello.secret = secret_;
  hello.rank = rank_;
  hello.nranks = nranks_;
  snprintf(hello.addr, sizeof(hello.addr), "%s", boundText.c_str());
  BRAID_CHECK(root.sendAll(&hello, sizeof(hello), opts_.timeoutMs, opts_.abortFlag));

  // Wait for every rank to join (the root answers once all did, or with an error).
  WaitResult w = waitFd(root.fd(), POLLIN, deadline(), opts_.abortFlag);
  if (w == WaitResult::kAborted)
    return setError(ncclSystemError, nullptr,
                    "bootstrap: rank %d of %d: aborted while waiting for the other ranks to join",
                    rank_, nranks_);
  if (w == WaitResult::kTimeout)
    return setError(ncclSystemError, nullptr,
                    "bootstrap: rank %d of %d: not every rank joined the root at %s within %d ms "
                    "(was every rank started with the same unique id and nranks?)",
                    rank_, nranks_, info.rootAddr, opts_.timeoutMs);
  wire::RootReply reply{};
  BRAID_CHECK(root.recvAll(&reply, sizeof(reply), opts_.timeoutMs, opts_.abortFlag));
  if (reply.magic != wire::kReplyMagic)
    return setError(ncclSystemError, nullptr, "bootstrap: rank %d: %s is not a Braid bootstrap root",
                    rank_, info.rootAddr);
  std::vector<char> body(reply.msgLen);
  BRAID_CHECK(root.recvAll(body.data(), body.size(), opts_.timeoutMs, opts_.abortFlag));
  const std::string text(body.begin(), body.end());
  switch (reply.status) {
    case wire::kOk:
      break;
    case wire::kSecretMismatch:
      return setError(ncclInvalidArgument, nullptr,
                      "ncclCommInitRank: the unique id belongs to another job (secret mismatch): "
                      "the bootstrap root at %s rejected rank %d",
                      info.rootAddr, rank_);
    case wire::kBadNranks:
    case wire::kDuplicateRank:
    case wire::kBadRank:
      return setError(ncclInvalidArgument, nullptr, "%s", text.c_str());
    default:
      return setError(ncclSystemError, nullptr, "bootstrap: rank %d of %d cannot join: %s", rank_,
                      nranks_, text.c_str());
  }
  int badRank = -1;
  switch (wire::parseRankTable(&body, nranks_, &peers_, &badRank)) {
    case wire::TableVerdict::kOk:
      break;
    case wire::TableVerdict::kBadSize:
      return setError(ncclSystemError, nullptr,
                      "bootstrap: rank %d: rank table of %zu bytes, expected %zu", rank_,
                      body.size(), size_t(nranks_) * wire::kAddrLen);
    case wire::TableVerdict::kBadAddress:
      return setError(ncclSystemError, nullptr, "bootstrap: rank %d: bad address '%s' for rank %d",
                      rank_, &body[size_t(badRank) * wire::kAddrLen], badRank);
  }
  BRAID_INFO(kLogBootstrap, "bootstrap: rank %d of %d joined; listening on %s", rank_, nranks_,
             boundText.c_str());
  return ncclSuccess;
}

bool SocketBootstrap::takeStash(int peer, uint32_t tag, void* data, size_t bytes,
                                ncclResult_t* res) {
  auto it = stash_.find({peer, tag});
  if (it == stash_.end() || it->second.empty()) return false;
  std::vector<char> msg = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) stash_.erase(it);
  if (msg.size() != bytes) {
    *res = setError(ncclInternalError, nullptr,
                    "bootstrap: rank %d got %zu bytes from rank %d (%s) but expected %zu", rank_,
                    msg.size(), peer, tagName(tag).c_str(), bytes);
    return true;
  }
  if (bytes) memcpy(data, msg.data(), bytes);
  *res = ncclSuccess;
  return true;
}

void SocketBootstrap::readIncoming(Incoming* in) {
  for (;;) {
    if (in->hdrGot < sizeof(in->hdr)) {
      char* dst = reinterpret_cast<char*>(&in->hdr) + in->hdrGot;
      ssize_t n = in->sock.tryRecv(dst, sizeof(in->hdr) - in->hdrGot);
      if (n < 0) {
        if (in->from >= 0) closed_[size_t(in->from)] = true;
        if (in->hdrGot != 0)
          BRAID_WARN("%s: connection from rank %d closed in the middle of a message header",
                     label_.c_str(), in->from);
        in->sock.close();
        return;
      }
      if (n == 0) return;
      in->hdrGot += size_t(n);
      if (in->hdrGot < sizeof(in->hdr)) continue;
      const wire::MsgHeader& h = in->hdr;
      const wire::HeaderVerdict verdict = wire::checkMsgHeader(h, secret_, nranks_, in->from);
      if (verdict == wire::HeaderVerdict::kForeignSecret) {
        BRAID_WARN("%s: closed a connection from %s presenting another job's secret",
                   label_.c_str(), in->sock.peerAddress().c_str());
        in->sock.close();
        return;
      }
      if (verdict == wire::HeaderVerdict::kMalformed) {
        BRAID_WARN("%s: closed a connection from %s sending a malformed header (from %d, %llu bytes)",
                   label_.c_str(), in->sock.peerAddress().c_str(), h.from,
                   static_cast<unsigned long long>(h.bytes));
        if (in->from >= 0) closed_[size_t(in->from)] = true;
        in->sock.close();
        return;
      }
      if (in->from < 0) closed_[size_t(h.from)] = false;  // a (re)connected peer
      in->from = h.from;
      in->body.assign(size_t(h.bytes), 0);
      in->bodyGot = 0;
    }
    if (in->bodyGot < in->body.size()) {
      ssize_t n = in->sock.tryRecv(in->body.data() + in->bodyGot, in->body.size() - in->bodyGot);
      if (n < 0) {
        closed_[size_t(in->from)] = true;
        BRAID_WARN("%s: connection from rank %d closed in the middle of a message (%zu of %zu bytes)",
                   label_.c_str(), in->from, in->bodyGot, in->body.size());
        in->sock.close();
        return;
      }
      if (n == 0) return;
      in->bodyGot += size_t(n);
      if (in->bodyGot < in->body.size()) continue;
    }
    stash_[{in->from, in->hdr.tag}].push_back(std::move(in->body));
    in->body = std::vector<char>();
    in->hdrGot = 0;
    in->bodyGot = 0;
  }
}

ncclResult_t SocketBootstrap::pump(int waitMs, int extraFd, short extraEvents, bool* extraReady) {
  std::vector<pollfd> fds;
  fds.reserve(in_.size() + 2);
  fds.push_back({listener_.fd(), POLLIN, 0});
  for (auto& in : in_) fds.push_back({in->sock.fd(), POLLIN, 0});
  if (extraFd >= 0) fds.push_back({extraFd, extraEvents, 0});
  if (extraReady) *extraReady = false;
  int n = ::poll(fds.data(), fds.size(), waitMs);
  if (n < 0) {
    if (errno == EINTR) return ncclSuccess;
    return setError(ncclSystemError, nullptr, "%s: poll failed: %s", label_.c_str(), strerror(errno));
  }
  if (n == 0) return ncclSuccess;
  if (extraFd >= 0 && fds.back().revents != 0 && extraReady) *extraReady = true;
  for (size_t i = 0; i < in_.size(); ++i)
    if (fds[1 + i].revents != 0) readIncoming(in_[i].get());
  for (size_t i = in_.size(); i-- > 0;)
    if (!in_[i]->sock.valid()) in_.erase(in_.begin() + long(i));
  if (fds[0].revents != 0) {
    for (;;) {
      int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) break;  // EAGAIN: nothing more pending (the listener is nonblocking)
      auto in = std::make_unique<Incoming>();
      in->sock = Socket(fd);
      in->sock.setLabel(label_.c_str());
      in->sock.setNoDelay();
      readIncoming(in.get());  // the first message often arrives with the connection
      if (in->sock.valid()) in_.push_back(std::move(in));
    }
  }
  return ncclSuccess;
}

ncclResult_t SocketBootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  if (peer < 0 || peer >= nranks_)
    return setError(ncclInvalidArgument, nullptr, "bootstrap: rank %d: send to rank %d of %d",
                    rank_, peer, nranks_);
  if (bytes && !data)
    return setError(ncclInvalidArgument, nullptr, "bootstrap: rank %d: send of %zu bytes from NULL",
                    rank_, bytes);
  if (peer == rank_) {
    const char* p = static_cast<const char*>(data);
    stash_[{peer, tag}].emplace_back(p, p + bytes);
    return ncclSuccess;
  }
  Socket& s = out_[size_t(peer)];
  if (!s.valid()) {
    s.setLabel(peerLabels_[size_t(peer)].c_str());
    std::function<bool(std::string*)> gone;
    if (probe_) gone = [this, peer](std::string* why) { return probe_(peer, why); };
    BRAID_CHECK(s.connect(peers_[size_t(peer)], opts_.timeoutMs, opts_.abortFlag, gone));
  }
  wire::MsgHeader h{secret_, rank_, tag, bytes};
  // Small messages go out in one piece; larger ones as header then payload.
  std::vector<char> small;
  const char* parts[2] = {reinterpret_cast<const char*>(&h), static_cast<const char*>(data)};
  size_t sizes[2] = {sizeof(h), bytes};
  if (bytes <= 4096) {
    small.resize(sizeof(h) + bytes);
    memcpy(small.data(), &h, sizeof(h));
    if (bytes) memcpy(small.data() + sizeof(h), data, bytes);
    parts[0] = small.data();
    sizes[0] = small.size();
    sizes[1] = 0;
  }
  const int64_t end = deadline();
  size_t total = sizes[0] + sizes[1], done = 0;
  while (done < total) {
    int part = done < sizes[0] ? 0 : 1;
    size_t off = part == 0 ? done : done - sizes[0];
    ssize_t n = s.trySend(parts[part] + off, sizes[part] - off);
    if (n < 0) {
      int err = errno;
      s.close();
      return setError(ncclRemoteError, nullptr,
                      "bootstrap: rank %d: sending %s to rank %d at %s failed after %zu of %zu "
                      "bytes: %s",
                      rank_, tagName(tag).c_str(), peer, peers_[size_t(peer)].toString().c_str(),
                      done, total, strerror(err));
    }
    done += size_t(n);
    if (done == total || n > 0) continue;
    // The socket is full: the peer is not reading yet. Keep receiving meanwhile.
    if (aborted())
      return setError(ncclSystemError, nullptr, "bootstrap: rank %d: send to rank %d (%s) aborted",
                      rank_, peer, tagName(tag).c_str());
    int64_t now = monotonicMs();
    if (end >= 0 && now >= end)
      return setError(ncclSystemError, nullptr,
                      "bootstrap: rank %d: send to rank %d (%s) made no progress for %d ms "
                      "(%zu of %zu bytes sent)",
                      rank_, peer, tagName(tag).c_str(), opts_.timeoutMs, done, total);
    int wait = end < 0 ? kSliceMs : int(std::min<int64_t>(kSliceMs, end - now));
    BRAID_CHECK(pump(wait, s.fd(), POLLOUT, nullptr));
  }
  return ncclSuccess;
}

ncclResult_t SocketBootstrap::recv(int peer, uint32_t tag, void* data, size_t bytes) {
  if (peer < 0 || peer >= nranks_)
    return setError(ncclInvalidArgument, nullptr, "bootstrap: rank %d: recv from rank %d of %d",
                    rank_, peer, nranks_);
  if (bytes && !data)
    return setError(ncclInvalidArgument, nullptr, "bootstrap: rank %d: recv of %zu bytes into NULL",
                    rank_, bytes);
  ncclResult_t res = ncclSuccess;
  if (takeStash(peer, tag, data, bytes, &res)) return res;
  if (peer == rank_)
    return setError(ncclInvalidUsage, nullptr,
                    "bootstrap: rank %d: recv from itself (%s) without a matching send", rank_,
                    tagName(tag).c_str());
  const int64_t end = deadline();
  int64_t lastProbe = monotonicMs();
  for (;;) {
    if (aborted())
      return setError(ncclSystemError, nullptr,
                      "bootstrap: rank %d: recv from rank %d (%s) aborted", rank_, peer,
                      tagName(tag).c_str());
    if (closed_[size_t(peer)])
      return setError(ncclRemoteError, nullptr,
                      "bootstrap: rank %d closed its connection before sending %s to rank %d",
                      peer, tagName(tag).c_str(), rank_);
    int64_t now = monotonicMs();
    if (end >= 0 && now >= end)
      return setError(ncclSystemError, nullptr, "bootstrap: no message from rank %d (%s) after %d ms",
                      peer, tagName(tag).c_str(), opts_.timeoutMs);
    // Every few slices: is the peer still there (a process of this machine that died
    // before it ever connected to us would otherwise be waited for until the timeout)?
    if (probe_ && now - lastProbe >= kProbeMs) {
      lastProbe = now;
      std::string why;
      if (probe_(peer, &why)) {
        // It may have sent the message just before it went: take what has arrived.
        for (int round = 0; round < 8; ++round) {
          BRAID_CHECK(pump(round == 0 ? 0 : 5, -1, 0, nullptr));
          if (takeStash(peer, tag, data, bytes, &res)) return res;
        }
        return setError(ncclRemoteError, nullptr, "bootstrap: rank %d: waiting for %s from rank "
                        "%d: %s", rank_, tagName(tag).c_str(), peer, why.c_str());
      }
    }
    int wait = end < 0 ? kSliceMs : int(std::min<int64_t>(kSliceMs, end - now));
    BRAID_CHECK(pump(wait, -1, 0, nullptr));
    if (takeStash(peer, tag, data, bytes, &res)) return res;
  }
}

// Ring: at step s, pass block (rank - s) to the next rank, take block (rank - s - 1)
// from the previous one. nranks - 1 steps.
ncclResult_t SocketBootstrap::allGather(void* data, size_t bytes) {
  if (nranks_ == 1) return ncclSuccess;
  if (bytes && !data)
    return setError(ncclInvalidArgument, nullptr, "bootstrap: rank %d: allGather into NULL", rank_);
  char* base = static_cast<char*>(data);
  const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  for (int s = 0; s < nranks_ - 1; ++s) {
    const int sendBlock = (rank_ - s + nranks_) % nranks_;
    const int recvBlock = (rank_ - s - 1 + 2 * nranks_) % nranks_;
    BRAID_CHECK(send(next, kTagAllGather, base + size_t(sendBlock) * bytes, bytes));
    BRAID_CHECK(recv(prev, kTagAllGather, base + size_t(recvBlock) * bytes, bytes));
  }
  return ncclSuccess;
}

// Dissemination: in round k, signal rank + 2^k and wait for rank - 2^k.
ncclResult_t SocketBootstrap::barrier() {
  for (int d = 1; d < nranks_; d <<= 1) {
    char token = 0;
    BRAID_CHECK(send((rank_ + d) % nranks_, kTagBarrier, &token, 1));
    BRAID_CHECK(recv((rank_ - d + nranks_) % nranks_, kTagBarrier, &token, 1));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t Bootstrap::create(const ncclUniqueId& id, int rank, int nranks,
                               const BootstrapOptions& opts, std::unique_ptr<Bootstrap>* out) {
  if (!out) return setError(ncclInvalidArgument, nullptr, "bootstrap: out is NULL");
  if (nranks < 1)
    return setError(ncclInvalidArgument, nullptr, "ncclCommInitRank: nranks=%d must be at least 1",
                    nranks);
  if (rank < 0 || rank >= nranks)
    return setError(ncclInvalidArgument, nullptr, "ncclCommInitRank: rank=%d is outside [0, %d)",
                    rank, nranks);
  UniqueIdInfo info;
  BRAID_CHECK(bootstrapDecodeId(id, &info));
  if (info.fromEnv && rank == 0) {
    // NCCL_COMM_ID: rank 0 hosts the root at the agreed address.
    SockAddr rootAddr;
    if (!SockAddr::parse(info.rootAddr, &rootAddr))
      return setError(ncclInvalidArgument, nullptr, "bootstrap: bad root address '%s'", info.rootAddr);
    Socket listener;
    listener.setLabel("bootstrap root (NCCL_COMM_ID)");
    BRAID_CHECK(listener.listen(rootAddr, nullptr));
    const int64_t rootTimeout = param::kBootstrapTimeoutMs.get();
    BRAID_CHECK(bootstrapStartRoot(std::move(listener), info.secret,
                                   int(std::min<int64_t>(rootTimeout, INT32_MAX))));
  }
  auto b = std::make_unique<SocketBootstrap>(rank, nranks, info.secret, opts);
  BRAID_CHECK(b->join(info));
  *out = std::move(b);
  return ncclSuccess;
}

}  // namespace braid
