#include "src/exec/connect.h"

#include <algorithm>
#include <map>

#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/exec/board.h"

namespace braid {
namespace {

constexpr uint32_t kTagConnBase = 0x10000;
constexpr uint32_t kTagDevConnBase = 0x20000;

ConnectContext contextFor(Comm* c, int peer, int channel, bool device) {
  ConnectContext ctx;
  ctx.self = &c->peers[c->rank];
  ctx.peer = &c->peers[peer];
  ctx.channel = channel;
  ctx.geometry = c->settings.geometry;
  ctx.secret = c->bootstrap->secret();
  ctx.commHash = c->commHash;
  ctx.timeoutMs = c->settings.bootstrapTimeoutMs;
  ctx.abortFlag = &c->abortFlag;
  ctx.device = device;
  ctx.netName = c->settings.netName;
  return ctx;
}

/// Host FIFO ends between ranks of one board ring the other end's wake word (local and
/// shm transports: their peer's progress is that rank's own thread); any other
/// transport's progress comes from a proxy, so a comm with one never sleeps.
template <class End>
void ringPeer(Comm* c, int peer, const Transport* t, End* fifo) {
  const bool rings = t->id() == TransportId::kLocal || t->id() == TransportId::kShm;
  if (c->board && rings) fifo->setPeerWake(&c->board->wake(peer));
  else c->connsRing = false;
}

int keyPeer(uint64_t key) { return int(uint32_t(key)); }
int keyChannel(uint64_t key) { return int(key >> 32); }

}  // namespace

void Connector::note(Comm* c, const Plan& plan) {
  auto& sends = device_ ? c->devSends : c->sends;
  auto& recvs = device_ ? c->devRecvs : c->recvs;
  auto add = [c](std::vector<std::pair<Comm*, uint64_t>>& list, uint64_t key) {
    std::pair<Comm*, uint64_t> item{c, key};
    if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
  };
  for (const Program& p : plan.programs)
    for (const Step& s : p.steps) {
      if (s.sendPeer >= 0 && !sends.count(Comm::connKey(s.sendPeer, s.channel)))
        add(missingSend_, Comm::connKey(s.sendPeer, s.channel));
      if (s.recvPeer >= 0 && !recvs.count(Comm::connKey(s.recvPeer, s.channel)))
        add(missingRecv_, Comm::connKey(s.recvPeer, s.channel));
    }
}

void Connector::forget(const Comm* c) {
  auto mine = [c](const std::pair<Comm*, uint64_t>& item) { return item.first == c; };
  missingSend_.erase(std::remove_if(missingSend_.begin(), missingSend_.end(), mine),
                     missingSend_.end());
  missingRecv_.erase(std::remove_if(missingRecv_.begin(), missingRecv_.end(), mine),
                     missingRecv_.end());
}

bool Connector::pending(const Comm* c) const {
  auto mine = [c](const std::pair<Comm*, uint64_t>& item) { return item.first == c; };
  return std::any_of(missingSend_.begin(), missingSend_.end(), mine) ||
         std::any_of(missingRecv_.begin(), missingRecv_.end(), mine);
}

ncclResult_t Connector::connect() {
  struct Pending {
    Comm* comm;
    uint64_t key;
    Transport* t;
  };
  const bool dev = device_;
  const uint32_t tagBase = dev ? kTagDevConnBase : kTagConnBase;
  auto choose = [dev](Comm* c, int peer, Transport** t) {
    return dev ? c->chooseDeviceTransport(peer, t) : c->chooseTransport(peer, t);
  };
  std::vector<Pending> newRecvs;
  std::map<std::pair<Comm*, uint64_t>, ConnDescriptor> selfDescs;
  // Sorted: every rank sets its connections up in the same (comm, peer, channel) order.
  std::sort(missingRecv_.begin(), missingRecv_.end());
  std::sort(missingSend_.begin(), missingSend_.end());
  // Phase 1: receive sides, descriptors out.
  for (const auto& item : missingRecv_) {
    Comm* c = item.first;
    const uint64_t key = item.second;
    int peer = keyPeer(key), ch = keyChannel(key);
    Transport* t = nullptr;
    BRAID_CHECK(choose(c, peer, &t));
    RecvSide side;
    ConnDescriptor desc;
    BRAID_CHECK(t->setupRecv(contextFor(c, peer, ch, dev), &side, &desc));
    desc.transport = uint32_t(t->id());
    if (!dev) ringPeer(c, peer, t, &side.fifo);
    (dev ? c->devRecvs : c->recvs).emplace(key, std::move(side));
    newRecvs.push_back({c, key, t});
    if (peer == c->rank) selfDescs[{c, key}] = desc;
    else BRAID_CHECK(c->bootstrap->send(peer, tagBase + uint32_t(ch), &desc, sizeof(desc)));
    BRAID_INFO(kLogInit, "%s: %schannel %d from rank %d via %s", c->who().c_str(),
               dev ? "device " : "", ch, peer, t->name());
  }
  // Phase 2: send sides, from the peers' descriptors.
  for (const auto& item : missingSend_) {
    Comm* c = item.first;
    const uint64_t key = item.second;
    int peer = keyPeer(key), ch = keyChannel(key);
    ConnDescriptor desc;
    if (peer == c->rank) desc = selfDescs[{c, key}];
    else BRAID_CHECK(c->bootstrap->recv(peer, tagBase + uint32_t(ch), &desc, sizeof(desc)));
    Transport* t = nullptr;
    BRAID_CHECK(choose(c, peer, &t));
    if (desc.transport != uint32_t(t->id()))
      return setError(ncclInvalidUsage, c,
                      "%s: rank %d connects to us with transport #%u but we chose %s; "
                      "NCCL_SHM_DISABLE / NCCL_P2P_DISABLE / BRAID_TRANSPORT must be the "
                      "same on every rank",
                      c->who().c_str(), peer, desc.transport, t->name());
    SendSide side;
    BRAID_CHECK(t->connectSend(contextFor(c, peer, ch, dev), desc, &side));
    if (!dev) ringPeer(c, peer, t, &side.fifo);
    (dev ? c->devSends : c->sends).emplace(key, std::move(side));
  }
  // Phase 3: finish the receive sides (e.g. accept).
  for (Pending& p : newRecvs)
    BRAID_CHECK(p.t->finishRecv(contextFor(p.comm, keyPeer(p.key), keyChannel(p.key), dev),
                                &(dev ? p.comm->devRecvs : p.comm->recvs)[p.key]));
  clear();
  return ncclSuccess;
}

}  // namespace braid
