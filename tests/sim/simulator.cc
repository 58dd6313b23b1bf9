#include "tests/sim/simulator.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <set>

#include "transports/collnet/collnet_port.h"
#include "transports/collnet/local_collnet.h"

namespace braid {

namespace {

bool sends(StepKind k) { return stepSends(k); }
bool recvs(StepKind k) { return stepRecvs(k); }

std::string where(int rank, size_t prog, size_t step, const Step& s) {
  return "rank " + std::to_string(rank) + " program " + std::to_string(prog) + " step " +
         std::to_string(step) + " (" + stepKindName(s.kind) + ")";
}

std::string checkRegion(const Region& r, const SimRank& rk) {
  if (r.buf == Buf::kNone) return "";
  const uint64_t limit = r.buf == Buf::kSend      ? rk.sendElems
                         : r.buf == Buf::kScratch ? rk.plan->scratchElems
                                                  : rk.recvElems;
  if (r.offset > limit || r.count > limit - r.offset)
    return std::string(r.buf == Buf::kSend ? "send" : r.buf == Buf::kScratch ? "scratch" : "recv") +
           " region [" +
           std::to_string(r.offset) + ", +" + std::to_string(r.count) +
           ") outside the buffer of " + std::to_string(limit) + " elements";
  return "";
}

/// Whether a step reads at peers (its src, at every rank it names but its own).
bool readsPeers(StepKind k) { return k == StepKind::kPeerCopy || k == StepKind::kPeerReduce; }

/// The static form of one direct-access step (algorithms/plan.h's contract). Regions
/// read or written at peers are checked against those peers' buffers.
std::string checkDirectStep(const Step& s, const std::vector<SimRank>& ranks, int r) {
  const int n = static_cast<int>(ranks.size());
  if (s.kind == StepKind::kSignal || s.kind == StepKind::kWait) {
    if (s.src.buf != Buf::kNone || s.dst.buf != Buf::kNone) return "a signal or wait with regions";
    if (s.kind == StepKind::kWait && s.recvPeer != kAllPeers &&
        (s.recvPeer < 0 || s.recvPeer >= n || s.recvPeer == r))
      return "bad wait peer";
    return "";
  }
  if (s.count() == 0) return "moves zero elements";
  if (s.src.buf == Buf::kNone || s.dst.buf == Buf::kNone || s.src.count != s.dst.count)
    return "src and dst regions must both be there, of one size";
  auto peerOk = [&](int p) { return p >= 0 && p < n && p != r; };
  if (s.kind == StepKind::kPeerCopy && !peerOk(s.recvPeer)) return "bad peer to read from";
  if (s.kind == StepKind::kPeerReduce && s.sendPeer != -1 && s.sendPeer != kAllPeers)
    return "a reduction writes its own dst or every rank's (sendPeer -1 or kAllPeers)";
  if (s.kind == StepKind::kPeerPut && s.sendPeer != kAllPeers && !peerOk(s.sendPeer))
    return "bad peer to write to";
  if (readsPeers(s.kind) && s.src.buf == Buf::kScratch)
    return "reads a peer's scratch (private to its owner)";
  if (s.flags & kPreOp) return "kPreOp on a direct-access step (PreMulSum needs the owner's scalar)";
  for (int p = 0; p < n; ++p) {
    const bool reads = p == r ? s.kind != StepKind::kPeerCopy
                              : (s.kind == StepKind::kPeerReduce ||
                                 (s.kind == StepKind::kPeerCopy && p == s.recvPeer));
    const bool writes = directWritesAt(s.kind, s.sendPeer, r, p);
    if (writes && p != r && s.dst.buf != Buf::kRecv)
      return "writes rank " + std::to_string(p) + "'s " +
             (s.dst.buf == Buf::kSend ? "send buffer (a peer's input)" : "scratch (private)");
    std::string e = reads ? checkRegion(s.src, ranks[size_t(p)]) : "";
    if (e.empty() && writes) e = checkRegion(s.dst, ranks[size_t(p)]);
    if (!e.empty()) return p == r ? e : "at rank " + std::to_string(p) + ": " + e;
  }
  return "";
}

/// The orders algorithms/plan.h's direct-access contract asks for, checked on every
/// rank's steps without running them. Each program is an actor with its own signals;
/// every access of a rank's bytes (its own steps' src and dst, its peers' reads and
/// writes) is checked against every other access of the same bytes that conflicts with
/// it (one of the two a write): one must be known to come first. Also: the buffers
/// announced before any peer access, no rank ending while its bytes may still be
/// accessed, and every rank posting the same number of signals in each program.
/// Addresses are the ranks' real buffers, so in-place aliasing between send and recv
/// counts.
std::string checkDirectAccess(const std::vector<SimRank>& ranks, size_t ts) {
  const int n = static_cast<int>(ranks.size());
  struct Access {
    int rank;        ///< who reads or writes
    size_t prog;     ///< with which of its programs
    int owner;       ///< whose memory
    uint64_t lo, hi; ///< byte addresses in the owner's memory
    bool write;
    uint64_t epoch;  ///< signals the program had posted before
    std::vector<uint64_t> known;  ///< per rank: signals of its program the actor had waited for
    std::string at;
  };
  std::vector<std::vector<Access>> byOwner(static_cast<size_t>(n));
  // [program][rank]: signals posted, and what each rank's program knew at its end.
  std::vector<std::vector<uint64_t>> signals;
  std::vector<std::vector<std::vector<uint64_t>>> finalKnown;
  std::vector<size_t> directPrograms(static_cast<size_t>(n), 0);
  bool any = false;
  for (int r = 0; r < n; ++r) {
    const Plan* plan = ranks[size_t(r)].plan;
    auto addr = [&](int owner, const Region& reg) {
      const PlanBuffers& b = ranks[size_t(owner)].bufs;
      const uint64_t base =
          reg.buf == Buf::kSend    ? uint64_t(reinterpret_cast<uintptr_t>(b.send))
          : reg.buf == Buf::kRecv  ? uint64_t(reinterpret_cast<uintptr_t>(b.recv))
                                   : (uint64_t(1) << 62);  // scratch: apart from the rest
      return std::make_pair(base + reg.offset * ts, base + (reg.offset + reg.count) * ts);
    };
    for (size_t pi = 0; pi < plan->programs.size(); ++pi) {
      const auto& steps = plan->programs[pi].steps;
      if (signals.size() <= pi) {
        signals.resize(pi + 1, std::vector<uint64_t>(size_t(n), 0));
        finalKnown.resize(pi + 1, std::vector<std::vector<uint64_t>>(size_t(n)));
      }
      std::vector<uint64_t> known(size_t(n), 0);
      bool waitedForAll = false, direct = false;
      uint64_t lastAllWait = 0;  ///< signals posted when this program last waited for all
      uint64_t& sig = signals[pi][size_t(r)];
      for (size_t si = 0; si < steps.size(); ++si) {
        const Step& s = steps[si];
        const std::string at = where(r, pi, si, s);
        if (isDirectAccess(s.kind)) direct = any = true;
        if (s.kind == StepKind::kSignal) {
          ++sig;
          if (sig - lastAllWait > uint64_t(kMaxSignalsAhead))
            return at + ": more than " + std::to_string(kMaxSignalsAhead) +
                   " signals since its last wait for every rank";
          continue;
        }
        if (s.kind == StepKind::kWait) {
          if (!waitedForAll && s.recvPeer != kAllPeers)
            return at + ": the first wait must be for every rank (the calls are compared there)";
          if (s.recvPeer == kAllPeers) {
            waitedForAll = true;
            lastAllWait = sig;
          }
          for (int p = 0; p < n; ++p)
            if (p != r && (s.recvPeer == kAllPeers || s.recvPeer == p))
              known[size_t(p)] = std::max(known[size_t(p)], sig);
          continue;
        }
        auto add = [&](int owner, const Region& reg, bool write) {
          const auto iv = addr(owner, reg);
          byOwner[size_t(owner)].push_back(
              Access{r, pi, owner, iv.first, iv.second, write, sig, known, at});
        };
        if (!isDirectAccess(s.kind)) {  // a local step (or a FIFO one): its own buffers
          if (s.src.buf != Buf::kNone) add(r, s.src, false);
          if (s.dst.buf != Buf::kNone) add(r, s.dst, true);
          continue;
        }
        for (int p = 0; p < n; ++p) {
          const bool reads = p == r ? s.kind != StepKind::kPeerCopy
                                    : (s.kind == StepKind::kPeerReduce ||
                                       (s.kind == StepKind::kPeerCopy && p == s.recvPeer));
          if (reads) add(p, s.src, false);
          if (directWritesAt(s.kind, s.sendPeer, r, p)) add(p, s.dst, true);
        }
      }
      if (direct) directPrograms[size_t(r)] = pi + 1;
      finalKnown[pi][size_t(r)] = known;
    }
  }
  if (!any) return "";
  for (int r = 1; r < n; ++r)
    if (directPrograms[size_t(r)] != directPrograms[0])
      return "rank " + std::to_string(r) + " has " + std::to_string(directPrograms[size_t(r)]) +
             " programs with direct-access steps, rank 0 " + std::to_string(directPrograms[0]) +
             ": every rank must have as many";
  for (size_t pi = 0; pi < signals.size(); ++pi)
    for (int r = 1; r < n; ++r)
      if (signals[pi][size_t(r)] != signals[pi][0])
        return "rank " + std::to_string(r) + " posts " + std::to_string(signals[pi][size_t(r)]) +
               " signals in program " + std::to_string(pi) + ", rank 0 " +
               std::to_string(signals[pi][0]) + ": every rank must post as many";
  for (int p = 0; p < n; ++p) {
    std::vector<Access>& acc = byOwner[size_t(p)];
    for (const Access& a : acc) {
      if (a.rank == p) continue;
      const char* verb = a.write ? "writes" : "reads";
      if (a.known[size_t(p)] < 1)
        return a.at + ": " + verb + " rank " + std::to_string(p) +
               "'s buffer before seeing its first signal";
      const std::vector<uint64_t>& fin = finalKnown[a.prog][size_t(p)];
      if (fin.empty() || fin[size_t(a.rank)] < a.epoch + 1)
        return a.at + ": rank " + std::to_string(p) + " may end its run while this " + verb +
               " its buffer";
    }
    // Conflicting pairs: sorted by address, each access against those that start
    // before it ends.
    std::sort(acc.begin(), acc.end(), [](const Access& x, const Access& y) { return x.lo < y.lo; });
    for (size_t i = 0; i < acc.size(); ++i)
      for (size_t j = i + 1; j < acc.size() && acc[j].lo < acc[i].hi; ++j) {
        const Access& x = acc[i];
        const Access& y = acc[j];
        if ((!x.write && !y.write) || x.hi <= y.lo || x.lo >= y.hi) continue;
        if (x.rank == y.rank && x.prog == y.prog) continue;  // program order
        const Access& rd = x.rank != p ? x : y;  // a peer's access first in the message
        const Access& other = &rd == &x ? y : x;
        if (x.rank == y.rank)
          return rd.at + ": races with " + other.at + " (two programs of one rank; programs "
                 "are not ordered)";
        const bool xFirst = x.prog == y.prog && y.known[size_t(x.rank)] >= x.epoch + 1;
        const bool yFirst = x.prog == y.prog && x.known[size_t(y.rank)] >= y.epoch + 1;
        if (!xFirst && !yFirst)
          return rd.at + ": races with " + other.at + " (neither is known to come first)";
      }
  }
  return "";
}

}  // namespace

std::string checkPlans(const std::vector<SimRank>& ranks, int nChannels, size_t typeSize,
                       uint64_t maxStepBytes) {
  const int n = static_cast<int>(ranks.size());
  // bytes[(src, dst, channel)]: sent minus received.
  std::map<std::tuple<int, int, int>, int64_t> balance;
  for (int r = 0; r < n; ++r) {
    const Plan* plan = ranks[r].plan;
    if (!plan) return "rank " + std::to_string(r) + " has no plan";
    std::set<std::tuple<int, int, bool>> used;  // (peer, channel, isSend) -> program
    for (size_t pi = 0; pi < plan->programs.size(); ++pi) {
      std::set<std::tuple<int, int, bool>> mine;
      const auto& steps = plan->programs[pi].steps;
      for (size_t si = 0; si < steps.size(); ++si) {
        const Step& s = steps[si];
        const std::string at = where(r, pi, si, s);
        if (isDirectAccess(s.kind)) {
          std::string e = checkDirectStep(s, ranks, r);
          if (!e.empty()) return at + ": " + e;
          continue;
        }
        if (s.channel >= nChannels) return at + ": channel " + std::to_string(s.channel) +
                                           " >= nChannels " + std::to_string(nChannels);
        if (s.count() == 0) return at + ": moves zero elements";
        for (const Region* reg : {&s.src, &s.dst})
          if (reg->buf != Buf::kNone && reg->count != s.count())
            return at + ": regions of different sizes";
        const bool needSrc = s.kind != StepKind::kRecv && s.kind != StepKind::kRecvCopySend;
        const bool needDst = s.kind != StepKind::kSend && s.kind != StepKind::kRecvReduceSend;
        if (needSrc != (s.src.buf != Buf::kNone)) return at + ": src region wrong";
        if (needDst != (s.dst.buf != Buf::kNone)) return at + ": dst region wrong";
        for (const Region* reg : {&s.src, &s.dst}) {
          std::string e = checkRegion(*reg, ranks[r]);
          if (!e.empty()) return at + ": " + e;
        }
        const int64_t bytes = int64_t(s.count() * typeSize);
        if ((sends(s.kind) || recvs(s.kind)) && maxStepBytes && uint64_t(bytes) > maxStepBytes)
          return at + ": moves " + std::to_string(bytes) + " bytes over a connection, more than chunkBytes " +
                 std::to_string(maxStepBytes);
        // The switch's side is checked by running the plans (it is not a rank).
        if (sends(s.kind)) {
          const bool sw = s.sendPeer == kSwitchPeer;
          if (sw && plan->switchOp == SwitchOp::kNone)
            return at + ": sends to the switch in a plan without a switch operation";
          if (!sw && (s.sendPeer < 0 || s.sendPeer >= n)) return at + ": bad send peer";
          mine.insert(std::make_tuple(s.sendPeer, int(s.channel), true));
          if (!sw) balance[std::make_tuple(r, s.sendPeer, int(s.channel))] += bytes;
        }
        if (recvs(s.kind)) {
          const bool sw = s.recvPeer == kSwitchPeer;
          if (!sw && (s.recvPeer < 0 || s.recvPeer >= n)) return at + ": bad recv peer";
          mine.insert(std::make_tuple(s.recvPeer, int(s.channel), false));
          if (!sw) balance[std::make_tuple(s.recvPeer, r, int(s.channel))] -= bytes;
        }
      }
      for (const auto& key : mine) {
        if (!used.insert(key).second)
          return "rank " + std::to_string(r) + ": two programs " +
                 (std::get<2>(key) ? "send to" : "receive from") + " rank " +
                 std::to_string(std::get<0>(key)) + " on channel " +
                 std::to_string(std::get<1>(key));
      }
    }
  }
  for (const auto& kv : balance) {
    if (kv.second == 0) continue;
    return "connection rank " + std::to_string(std::get<0>(kv.first)) + " -> rank " +
           std::to_string(std::get<1>(kv.first)) + " channel " +
           std::to_string(std::get<2>(kv.first)) + ": " +
           (kv.second > 0 ? "sends " : "receives ") + std::to_string(kv.second > 0 ? kv.second : -kv.second) +
           " bytes more than the other side " + (kv.second > 0 ? "receives" : "sends");
  }
  return checkDirectAccess(ranks, typeSize);
}

/// One simulated connection: heap memory holding the FIFO, and both of its ends.
struct Simulator::Fifo {
  explicit Fifo(const SimGeometry& g) : bytes(FifoLayout::bytesFor(g.nslots, g.slotBytes)) {
    mem = ::operator new(bytes, std::align_val_t(64));
    FifoLayout::init(mem, g.nslots, g.slotBytes);
    sender.attach(mem);
    receiver.attach(mem);
  }
  ~Fifo() { ::operator delete(mem, std::align_val_t(64)); }
  Fifo(const Fifo&) = delete;
  Fifo& operator=(const Fifo&) = delete;
  size_t bytes;
  void* mem;
  FifoSender sender;
  FifoReceiver receiver;
};

/// One rank's connection to the simulated switch on one channel.
struct Simulator::SwitchEnd {
  int rank = 0;
  int channel = 0;
  std::unique_ptr<CollNetPort> port;
  void* collComm = nullptr;
  FifoSender toSwitch;
  FifoReceiver fromSwitch;
};

/// Direct access between the simulated ranks: their buffers are in this process.
/// With SimGeometry::peerReads, peers' bytes come through read() (copies, as between
/// processes) instead of pointers.
class Simulator::Peers : public PeerAccess {
 public:
  Peers(Simulator* sim, int rank) : sim_(sim), rank_(rank) {}
  int nranks() const override { return sim_->nranks_; }
  int rank() const override { return rank_; }
  void signal(size_t prog, const PlanBuffers& bufs) override {
    auto& st = sim_->peerState_[size_t(rank_)];
    if (!st.announced) st.bufs = bufs;
    st.announced = true;
    if (st.signals.size() <= prog) st.signals.resize(prog + 1, 0);
    ++st.signals[prog];
  }
  bool reached(size_t prog, int peer, uint64_t k, int* lagging, std::string* why,
               ncclResult_t* code) override {
    (void)why;
    (void)code;
    for (int p = 0; p < sim_->nranks_; ++p) {
      const auto& sig = sim_->peerState_[size_t(p)].signals;
      if ((peer == kAllPeers || p == peer) && (sig.size() <= prog ? 0 : sig[prog]) < k) {
        *lagging = p;
        return false;
      }
    }
    return true;
  }
  char* view(int p, Buf buf, uint64_t off) override {
    return sim_->geo_.peerReads ? nullptr : at(p, buf, off);
  }
  int read(int p, Buf buf, uint64_t off, void* dst, uint64_t n) override {
    const char* src = at(p, buf, off);
    if (!src) return EFAULT;
    std::memcpy(dst, src, n);
    return 0;
  }
  int write(int p, Buf buf, uint64_t off, const void* src, uint64_t n) override {
    char* dst = buf == Buf::kRecv ? at(p, buf, off) : nullptr;
    if (!dst) return EFAULT;
    std::memcpy(dst, src, n);
    return 0;
  }

 private:
  char* at(int p, Buf buf, uint64_t off) const {
    const auto& st = sim_->peerState_[size_t(p)];
    if (!st.announced) return nullptr;  // not announced yet (checkPlans finds that first)
    const void* base = buf == Buf::kSend ? st.bufs.send : buf == Buf::kRecv ? st.bufs.recv
                                                                            : st.bufs.scratch;
    return base ? const_cast<char*>(static_cast<const char*>(base)) + off : nullptr;
  }
  Simulator* sim_;
  int rank_;
};

/// The connections of one rank, as PlanRun sees them.
class Simulator::Conns : public ConnTable {
 public:
  Conns(Simulator* sim, int rank) : sim_(sim), rank_(rank), peers_(sim, rank) {}
  PeerAccess* peerAccess() override { return &peers_; }
  FifoSender* sender(int peer, int channel) override {
    if (peer == kSwitchPeer) {
      SwitchEnd* e = switchEnd(channel);
      return e ? &e->toSwitch : nullptr;
    }
    if (!valid(peer, channel)) return nullptr;
    return &sim_->fifo(rank_, peer, channel)->sender;
  }
  FifoReceiver* receiver(int peer, int channel) override {
    if (peer == kSwitchPeer) {
      SwitchEnd* e = switchEnd(channel);
      return e ? &e->fromSwitch : nullptr;
    }
    if (!valid(peer, channel)) return nullptr;
    return &sim_->fifo(peer, rank_, channel)->receiver;
  }
  uint64_t directMinBytes(int, int) override { return sim_->geo_.direct ? 0 : UINT64_MAX; }
  Announce announceSwitch(int channel, SwitchOp op, uint64_t bytes,
                          const Reducer& red) override {
    SwitchEnd* e = switchEnd(channel);
    return e ? e->port->announce(op, bytes, red) : Announce::kNoSwitch;
  }

 private:
  SwitchEnd* switchEnd(int channel) const {
    if (!sim_->switchEnds_) return nullptr;
    for (auto& e : *sim_->switchEnds_)
      if (e->rank == rank_ && e->channel == channel) return e.get();
    return nullptr;
  }
  bool valid(int peer, int channel) const {
    return peer >= 0 && peer < sim_->nranks_ && channel >= 0 && channel < sim_->nChannels_;
  }
  Simulator* sim_;
  int rank_;
  Peers peers_;
};

Simulator::Simulator(int nranks, int nChannels, SimGeometry geometry)
    : nranks_(nranks), nChannels_(nChannels), geo_(geometry) {}

Simulator::~Simulator() = default;

std::string Simulator::makeSwitch(std::vector<std::unique_ptr<SwitchEnd>>* ends) {
  const RankLayout& layout = *switchLayout_;
  if (int(layout.nodeOf.size()) != nranks_ || !layout.uniform())
    return "switch model: the layout must be uniform and cover every rank";
  const ncclCollNet_v11_t* coll = localCollNet();
  const int groups = layout.ranksPerNode(), members = layout.nNodes;
  SimGeometry g = geo_;
  for (int ch = 0; ch < nChannels_; ++ch)
    for (int l = 0; l < groups; ++l) {
      char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
      void* listen = nullptr;
      if (coll->listen(nullptr, 0, handle, &listen) != ncclSuccess) return "switch model: listen";
      coll->closeListen(listen);
      std::vector<void*> handles(size_t(members), handle);
      for (int v = 0; v < members; ++v) {
        auto e = std::make_unique<SwitchEnd>();
        e->rank = layout.nodeRanks[size_t(v)][size_t(l)];
        e->channel = ch;
        if (coll->connect(handles.data(), members, v, nullptr, &e->collComm) != ncclSuccess)
          return "switch model: connect";
        CollNetPortConfig cfg;
        cfg.coll = coll;
        cfg.collComm = e->collComm;
        cfg.groupSize = members;
        cfg.groupRank = v;
        cfg.commRanks = nranks_;
        cfg.geometry.nslots = g.nslots;
        cfg.geometry.slotBytes = g.slotBytes;
        cfg.inflight = 2;
        cfg.name = "switch group " + std::to_string(l) + " channel " + std::to_string(ch);
        e->port = std::make_unique<CollNetPort>(cfg);
        e->toSwitch.attach(e->port->sendFifo());
        e->fromSwitch.attach(e->port->recvFifo());
        ends->push_back(std::move(e));
      }
    }
  return "";
}

Simulator::Fifo* Simulator::fifo(int src, int dst, int channel) {
  auto key = std::make_tuple(src, dst, channel);
  auto it = fifos_.find(key);
  if (it == fifos_.end()) it = fifos_.emplace(key, std::make_unique<Fifo>(geo_)).first;
  return it->second.get();
}

SimResult Simulator::run(const std::vector<SimRank>& ranks) {
  SimResult res;
  if (static_cast<int>(ranks.size()) != nranks_) {
    res.error = "simulator built for " + std::to_string(nranks_) + " ranks, given " +
                std::to_string(ranks.size());
    return res;
  }
  if (geo_.nslots == 0 || geo_.slotBytes == 0 || geo_.slotBytes % 8 != 0) {
    res.error = "FIFO geometry: slotBytes must be a positive multiple of 8";
    return res;
  }
  fifos_.clear();
  peerState_.assign(size_t(nranks_), PeerState{});
  std::vector<std::unique_ptr<SwitchEnd>> ends;
  struct EndsScope {  // the switch ends live for this run only
    Simulator* sim;
    std::vector<std::unique_ptr<SwitchEnd>>* ends;
    ~EndsScope() {
      for (auto& e : *ends) {
        e->port.reset();
        localCollNet()->closeColl(e->collComm);
      }
      sim->switchEnds_ = nullptr;
    }
  } endsScope{this, &ends};
  if (switchLayout_) {
    res.error = makeSwitch(&ends);
    if (!res.error.empty()) return res;
    switchEnds_ = &ends;
  }
  std::vector<std::unique_ptr<Conns>> conns;
  std::vector<PlanRun> runs;
  runs.reserve(ranks.size());
  // Scratch memory (Buf::kScratch) the caller did not provide, filled with a pattern so
  // a plan reading scratch it never wrote shows up as wrong results.
  std::vector<std::vector<unsigned char>> scratch(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    conns.push_back(std::make_unique<Conns>(this, r));
    PlanBuffers bufs = ranks[r].bufs;
    const uint64_t elems = ranks[r].plan ? ranks[r].plan->scratchElems : 0;
    if (elems && !bufs.scratch) {
      scratch[size_t(r)].assign(size_t(elems * 8), 0xA5);
      bufs.scratch = scratch[size_t(r)].data();
    }
    runs.emplace_back(ranks[r].plan, bufs, ranks[r].reducer, conns.back().get(),
                      ranks[r].allowDirect);
  }
  for (;;) {
    ++res.passes;
    bool moved = false, allDone = true;
    for (int r = 0; r < nranks_; ++r) {
      PlanRun& run = runs[r];
      if (run.state() == RunState::kRunning) moved |= run.progress();
      if (run.state() == RunState::kError) {
        res.error = "rank " + std::to_string(r) + ": " + run.error();
        return res;
      }
      if (run.state() != RunState::kDone) allDone = false;
    }
    for (auto& e : ends) {
      moved |= e->port->progress();
      if (e->port->failed()) {
        res.error = "rank " + std::to_string(e->rank) + ": " + e->port->reason();
        return res;
      }
    }
    if (allDone) break;
    if (!moved) {
      res.deadlock = true;
      res.error = "DEADLOCK:";
      for (int r = 0; r < nranks_; ++r)
        if (runs[r].state() != RunState::kDone)
          res.error += " [rank " + std::to_string(r) + ": " + runs[r].describeWait() + "]";
      return res;
    }
  }
  for (auto& kv : fifos_) {
    if (kv.second->sender.drained()) continue;
    res.error = "connection rank " + std::to_string(std::get<0>(kv.first)) + " -> rank " +
                std::to_string(std::get<1>(kv.first)) + " channel " +
                std::to_string(std::get<2>(kv.first)) +
                ": data left unconsumed after every rank finished";
    return res;
  }
  for (auto& e : ends) {
    const char* p;
    if (e->toSwitch.drained() && e->port->drained() && e->fromSwitch.peek(&p) == 0) continue;
    res.error = "rank " + std::to_string(e->rank) + " channel " + std::to_string(e->channel) +
                ": data left at the switch connection after every rank finished";
    return res;
  }
  res.ok = true;
  return res;
}

}  // namespace braid
