#include "transports/collnet/collnet_state.h"

#include <algorithm>
#include <cstring>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/core/comm.h"
#include "transports/net/builtin_nets.h"
#include "transports/net/net_registry.h"
#include "transports/collnet/collnet_proxy.h"

namespace braid {
namespace {

/// What every rank tells the others before connecting.
struct SetupRecord {
  int32_t ok;  ///< wants CollNet and listened on every channel
  char why[116];
  unsigned char handles[kMaxSwitchChannels][NCCL_NET_HANDLE_MAXSIZE];
};

/// The switch side of a (kSwitchPeer, channel) connection end.
class SwitchResource : public ConnResource {
 public:
  explicit SwitchResource(std::shared_ptr<CollNetPort> port) : port_(std::move(port)) {}
  ncclResult_t checkPeer(std::string* why) override {
    if (!port_->failed()) return ncclSuccess;
    *why = port_->reason();
    return ncclRemoteError;
  }
  bool drained() override { return port_->drained(); }

 private:
  std::shared_ptr<CollNetPort> port_;
};

void copyWhy(SetupRecord* r, const std::string& why) {
  std::snprintf(r->why, sizeof(r->why), "%s", why.c_str());
}

}  // namespace

ncclResult_t CollNetState::setup(Comm* comm, bool everyRank, std::unique_ptr<CollNetState>* out) {
  out->reset();
  const RankLayout& layout = *comm->layout;
  const int nranks = comm->nranks, rank = comm->rank;
  const bool enabled = param::kCollNetEnable.get();
  const int64_t threshold = param::kCollNetNodeThreshold.get();
  // Every rank takes part in the allgather below whatever its own settings say, so
  // the decision is common: CollNet only if every rank wants it and is ready.
  std::unique_ptr<CollNetState> st(new CollNetState());
  const int nch = std::min(kMaxSwitchChannels, std::max(1, comm->settings.maxChannels));
  std::vector<SetupRecord> recs(static_cast<size_t>(nranks));
  SetupRecord& me = recs[size_t(rank)];
  std::memset(&me, 0, sizeof me);
  std::vector<void*> listens(static_cast<size_t>(nch), nullptr);
  std::string why;
  if (!enabled) why = "NCCL_COLLNET_ENABLE is not set";
  else if (!everyRank) why = "NCCL_COLLNET_ENABLE is not set on every rank";
  else if (layout.nNodes < threshold)
    why = std::to_string(layout.nNodes) + " node(s), fewer than NCCL_COLLNET_NODE_THRESHOLD=" +
          std::to_string(threshold);
  else if (!layout.uniform()) why = "nodes of different sizes (" + layout.describe() + ")";
  if (why.empty()) {
    const Net* net = nullptr;
    if (NetRegistry::get().select(comm->settings.netName, &net) == ncclSuccess && net &&
        net->external && net->collTable) {
      st->coll_ = net->collTable;
      st->name_ = std::string(net->collTable->name ? net->collTable->name : "collnet") +
                  " (" + net->library + ")";
    } else {
      st->coll_ = switchCollNet();
      st->name_ = "BraidSwitch";
    }
    int ndev = 0;
    if (st->coll_->init(&st->ctx_, comm->commHash, netPluginLogger) != ncclSuccess) {
      why = st->name_ + " init failed";
      st->ctx_ = nullptr;
    } else if (st->coll_ == switchCollNet()) {
      switchCollNetSetJobSecret(st->ctx_, comm->bootstrap->secret());
    }
    if (why.empty() && (st->coll_->devices(&ndev) != ncclSuccess || ndev < 1))
      why = st->name_ + " has no device" +
            (st->coll_ == switchCollNet() ? " (BRAID_SWITCH is not set)" : "");
    for (int ch = 0; ch < nch && why.empty(); ++ch)
      if (st->coll_->listen(st->ctx_, 0, me.handles[ch], &listens[size_t(ch)]) != ncclSuccess)
        why = st->name_ + " listen failed";
  }
  me.ok = why.empty();
  copyWhy(&me, why);
  auto dropListens = [&] {
    for (void* l : listens)
      if (l) st->coll_->closeListen(l);
    listens.assign(listens.size(), nullptr);
  };
  ncclResult_t r = comm->bootstrap->allGather(recs.data(), sizeof(SetupRecord));
  if (r != ncclSuccess) {
    dropListens();
    return r;
  }
  int bad = -1;
  for (int i = 0; i < nranks && bad < 0; ++i)
    if (!recs[size_t(i)].ok) bad = i;
  if (bad >= 0) {
    dropListens();
    // Quiet when CollNet was never asked for; a WARN when some rank wanted it.
    if (enabled)
      BRAID_WARN("CollNet not used by %s: rank %d: %s; point-to-point algorithms only",
                 comm->who().c_str(), bad, recs[size_t(bad)].why);
    return ncclSuccess;
  }

  // Connect one collComm per channel: the ranks with our local index, in node order.
  const int l = layout.localRank[size_t(rank)], v = layout.nodeOf[size_t(rank)];
  const int members = layout.nNodes;
  for (int ch = 0; ch < nch && why.empty(); ++ch) {
    std::vector<void*> handles(static_cast<size_t>(members));
    for (int node = 0; node < members; ++node)
      handles[size_t(node)] = recs[size_t(layout.nodeRanks[size_t(node)][size_t(l)])].handles[ch];
    void* collComm = nullptr;
    if (st->coll_->connect(handles.data(), members, v, listens[size_t(ch)], &collComm) !=
            ncclSuccess ||
        !collComm)
      why = st->name_ + " connect failed on channel " + std::to_string(ch) +
            " (see the collnet's warning above)";
    else
      st->collComms_.push_back(collComm);
  }
  dropListens();
  std::vector<int32_t> oks(static_cast<size_t>(nranks), 0);
  oks[size_t(rank)] = why.empty();
  r = comm->bootstrap->allGather(oks.data(), sizeof(int32_t));
  if (r == ncclSuccess)
    for (int i = 0; i < nranks && bad < 0; ++i)
      if (!oks[size_t(i)]) bad = i;
  if (r != ncclSuccess || bad >= 0) {
    if (r == ncclSuccess)
      BRAID_WARN("CollNet setup failed (first on rank %d)%s%s; %s falls back to "
                 "point-to-point algorithms", bad, why.empty() ? "" : "; here: ", why.c_str(),
                 comm->who().c_str());
    return r;  // st's destructor closes what was connected
  }

  for (int t = 0; t < 32; ++t)
    for (int o = 0; o < 4; ++o) {
      int ok = 0;
      if (dataTypeSize(ncclDataType_t(t)) &&
          st->coll_->reduceSupport(ncclDataType_t(t), ncclRedOp_t(o), &ok) == ncclSuccess)
        st->supported_[t][o] = uint8_t(ok != 0);
    }
  for (int ch = 0; ch < nch; ++ch) {
    CollNetPortConfig cfg;
    cfg.coll = st->coll_;
    cfg.collComm = st->collComms_[size_t(ch)];
    cfg.groupSize = members;
    cfg.groupRank = v;
    cfg.commRanks = nranks;
    cfg.geometry = comm->settings.geometry;
    cfg.inflight = int(param::kCollNetInflight.get());
    cfg.name = st->name_ + " group of local rank " + std::to_string(l) + ", channel " +
               std::to_string(ch);
    st->ports_.push_back(std::make_shared<CollNetPort>(cfg));
  }
  st->attachEnds(comm);
  for (auto& p : st->ports_) CollNetProxy::get().add(p);
  st->registered_ = true;
  BRAID_INFO(kLogInit, "%s: CollNet %s, %d switch group(s) of %d node(s), %d channel(s)",
             comm->who().c_str(), st->name_.c_str(), layout.ranksPerNode(), members, nch);
  *out = std::move(st);
  return ncclSuccess;
}

void CollNetState::attachEnds(Comm* comm) const {
  for (size_t ch = 0; ch < ports_.size(); ++ch) {
    const std::shared_ptr<CollNetPort>& port = ports_[ch];
    SendSide& s = comm->sends[Comm::connKey(kSwitchPeer, int(ch))];
    s.fifo.attach(port->sendFifo());
    s.res = std::make_unique<SwitchResource>(port);
    RecvSide& rv = comm->recvs[Comm::connKey(kSwitchPeer, int(ch))];
    rv.fifo.attach(port->recvFifo());
    rv.res = std::make_unique<SwitchResource>(port);
  }
}

CollNetState::~CollNetState() {
  closeAll();
  ports_.clear();  // staging buffers go only after the collComms are closed
  if (ctx_ && coll_->finalize) coll_->finalize(ctx_);
}

void CollNetState::abandon() {
  closeAll();
  for (auto& p : ports_) p->abandon("the communicator failed");
}

void CollNetState::closeAll() {
  std::lock_guard<std::mutex> lk(closeMu_);
  if (registered_)
    for (auto& p : ports_) CollNetProxy::get().remove(p.get());
  registered_ = false;
  // Closing a collComm with operations posted ends them (the switch fails the group
  // for the other members); the ports' staging stays allocated until the destructor,
  // so a plugin still writing into it until closeColl returns writes into live memory.
  for (void*& c : collComms_)
    if (c) {
      coll_->closeColl(c);
      c = nullptr;
    }
}

bool CollNetState::supports(ncclDataType_t type, ncclRedOp_t op) const {
  if (int(type) < 0 || int(type) >= 32) return false;
  if (op == ncclAvg) op = ncclSum;  // the port divides
  if (int(op) >= int(ncclNumOps)) op = ncclSum;  // PreMulSum: scaled by the senders
  if (int(op) >= 4) return false;
  return supported_[int(type)][int(op)] != 0;
}

CollNetPort* CollNetState::port(int channel) const {
  if (channel < 0 || channel >= int(ports_.size())) return nullptr;
  return ports_[size_t(channel)].get();
}

}  // namespace braid
