// SwitchGroup: see switch_group.h.
#include "src/tools/switch_server/switch_group.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace braid {

namespace {

constexpr size_t kMaxOpsInFlight = 1024;

std::string rankList(const std::vector<uint32_t>& ranks, size_t most = 8) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < most; ++i) {
    if (i) s += ", ";
    s += std::to_string(ranks[i]);
  }
  if (ranks.size() > most) s += ", ...";
  return s;
}

bool sameOp(wire::OpDesc a, wire::OpDesc b) {
  a.reserved = b.reserved = 0;
  if (a.coll == wire::kAllGather) a.dtype = b.dtype = a.redop = b.redop = 0;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

SwitchGroup::SwitchGroup(Config cfg) : cfg_(std::move(cfg)) {
  const Hello& l = cfg_.layout;
  const uint32_t n = l.msg.nranks;
  portOfRank_.assign(n, -1);
  if (cfg_.leafPorts) {
    for (uint32_t k = 0; k < l.msg.nleaves; ++k) {
      Port p;
      p.id = k;
      p.ranks = ranksOfLeaf(l, k);
      ports_.push_back(std::move(p));
    }
  } else {
    for (uint32_t r = 0; r < n; ++r) {
      if (l.leafOf[r] != cfg_.myLeaf) continue;
      Port p;
      p.id = r;
      p.ranks = {r};
      ports_.push_back(std::move(p));
    }
  }
  for (size_t i = 0; i < ports_.size(); ++i)
    for (uint32_t r : ports_[i].ranks) {
      portOfRank_[r] = int(i);
      coverage_.push_back(r);
    }
  std::sort(coverage_.begin(), coverage_.end());
}

int SwitchGroup::portFor(uint32_t id) const {
  auto it = std::lower_bound(ports_.begin(), ports_.end(), id,
                             [](const Port& p, uint32_t v) { return p.id < v; });
  if (it == ports_.end() || it->id != id) return -1;
  return int(it - ports_.begin());
}

bool SwitchGroup::complete() const {
  for (const Port& p : ports_)
    if (!p.conn) return false;
  return true;
}

std::string SwitchGroup::portName(int port) const {
  const Port& p = ports_[size_t(port)];
  if (!cfg_.leafPorts) return "rank " + std::to_string(p.id);
  return "leaf switch " + std::to_string(p.id) + " (ranks " + rankList(p.ranks) + ")";
}

std::string SwitchGroup::missing() const {
  std::vector<uint32_t> ids;
  for (const Port& p : ports_)
    if (!p.conn) ids.push_back(p.id);
  return (cfg_.leafPorts ? "leaf switches " : "ranks ") + rankList(ids, 16);
}

bool SwitchGroup::allLeft() const {
  for (const Port& p : ports_)
    if (!p.left) return false;
  return true;
}

SwitchGroup::Op* SwitchGroup::findOp(uint64_t seq) {
  if (ops_.empty() || seq < ops_.front().seq || seq - ops_.front().seq >= ops_.size())
    return nullptr;
  return &ops_[size_t(seq - ops_.front().seq)];
}

bool SwitchGroup::makeOp(uint64_t seq, const wire::OpDesc& d, std::string* why) {
  const uint32_t n = cfg_.layout.msg.nranks;
  if (!OpShape::validate(d, n, why)) return false;
  if (ops_.size() >= kMaxOpsInFlight) {
    *why = "too many operations in flight";
    return false;
  }
  OpShape shape(d, n);
  ops_.emplace_back();
  Op& op = ops_.back();
  op.seq = seq;
  op.desc = d;
  op.reduces = shape.reduces();
  if (op.reduces) {
    op.reducer = Reducer(ncclDataType_t(d.dtype), ncclRedOp_t(d.redop), 1);
    op.typeSize = op.reducer.typeSize();
  }
  const uint64_t result = shape.resultBytes();
  op.ports.resize(ports_.size());
  // Input streams: a reduction's partial result, or the ranks' pieces in rank order.
  std::vector<uint64_t> running(ports_.size(), 0);
  for (uint32_t r : coverage_) {
    const size_t p = size_t(portOfRank_[r]);
    const uint64_t len = op.reduces ? 0 : shape.input(r).len;
    if (len) op.walk.push_back(GatherPiece{uint32_t(p), running[p], len});
    running[p] += len;
    op.combLen += len;
  }
  for (size_t p = 0; p < ports_.size(); ++p)
    op.ports[p].inLen = op.reduces ? result : running[p];
  if (op.reduces) op.combLen = result;
  // The result here: a root's is the whole result; a leaf gets from its parent the
  // whole result, or for reducescatter its ranks' parts, one after another.
  const bool rs = d.coll == wire::kReduceScatter;
  std::vector<Span> spanOfRank(n);
  if (!cfg_.hasUp) {
    op.resLen = op.combLen;
    for (uint32_t r : coverage_) spanOfRank[r] = shape.output(r);
  } else {
    for (uint32_t r : coverage_) {
      Span s = shape.output(r);
      if (rs) s.off = op.resLen;
      op.resLen = rs ? op.resLen + s.len : result;
      spanOfRank[r] = s;
    }
  }
  for (size_t p = 0; p < ports_.size(); ++p) {
    std::vector<Span>& segs = op.ports[p].segs;
    if (!rs) {
      if (op.resLen) segs.push_back(Span{0, op.resLen});
      continue;
    }
    for (uint32_t r : ports_[p].ranks)
      if (spanOfRank[r].len) segs.push_back(spanOfRank[r]);
  }
  op.comb = takeBuffer(op.combLen, &op.combCap);
  if (cfg_.hasUp) op.res = takeBuffer(op.resLen, &op.resCap);
  else op.res = op.comb;
  ++nextOpSeq_;
  if (cfg_.hasUp && up) up->queueControl(wire::kOp, seq, std::string(reinterpret_cast<const char*>(&d), sizeof d));
  return true;
}

bool SwitchGroup::onOp(int port, uint64_t seq, const wire::OpDesc& d, std::string* why) {
  Port& pt = ports_[size_t(port)];
  char buf[160];
  if (seq != pt.nextSeq) {
    std::snprintf(buf, sizeof buf, "protocol error: %s posted operation #%llu, expected #%llu",
                  portName(port).c_str(), static_cast<unsigned long long>(seq),
                  static_cast<unsigned long long>(pt.nextSeq));
    *why = buf;
    return false;
  }
  for (size_t q = 0; q < ports_.size(); ++q)
    if (ports_[q].left) {
      *why = portName(int(q)) + " has left the group (closed its connection), but " +
             portName(port) + " started another operation";
      return false;
    }
  Op* op = findOp(seq);
  if (!op) {
    if (seq != nextOpSeq_) {
      *why = "protocol error: operation numbers out of order from " + portName(port);
      return false;
    }
    std::string bad;
    if (!makeOp(seq, d, &bad)) {
      *why = portName(port) + " posted an invalid operation: " + bad;
      return false;
    }
    op = &ops_.back();
  } else if (!sameOp(op->desc, d)) {
    std::snprintf(buf, sizeof buf, "operation #%llu differs between members: ",
                  static_cast<unsigned long long>(seq));
    *why = buf + portName(port) + " posted " + describeOp(d) + ", others " +
           describeOp(op->desc);
    return false;
  }
  PortOut& po = op->ports[size_t(port)];
  po.posted = true;
  po.in = takeBuffer(po.inLen, &po.inCap);
  ++pt.nextSeq;
  return true;
}

char* SwitchGroup::dataTarget(int port, const wire::FrameHeader& h, std::string* why) {
  Op* op = findOp(h.seq);
  if (!op || !op->ports[size_t(port)].posted) {
    *why = "protocol error: " + portName(port) + " sent data for an operation it did not post";
    return nullptr;
  }
  PortOut& po = op->ports[size_t(port)];
  if (h.len > po.inLen - po.got) {
    *why = "protocol error: " + portName(port) + " sent more data than " +
           describeOp(op->desc) + " takes";
    return nullptr;
  }
  return po.in.get() + po.got;
}

void SwitchGroup::onData(int port, uint64_t seq, uint64_t n) {
  Op* op = findOp(seq);
  if (op) op->ports[size_t(port)].got += n;
}

char* SwitchGroup::upDataTarget(const wire::FrameHeader& h, std::string* why) {
  Op* op = findOp(h.seq);
  if (!op || h.len > op->resLen - op->resGot) {
    *why = "protocol error: the parent switch sent data that fits no operation";
    return nullptr;
  }
  return op->res.get() + op->resGot;
}

void SwitchGroup::onUpData(uint64_t seq, uint64_t n) {
  Op* op = findOp(seq);
  if (op) op->resGot += n;
}

bool SwitchGroup::onUpDone(uint64_t seq, std::string* why) {
  Op* op = findOp(seq);
  if (!op || op->resGot != op->resLen || op->upSent != op->combLen) {
    *why = "protocol error: the parent switch finished an operation early";
    return false;
  }
  op->resDone = true;
  return true;
}

bool SwitchGroup::onBye(int port, std::string* why) {
  if (!ops_.empty()) {
    *why = portName(port) + " closed its connection during an operation";
    return false;
  }
  ports_[size_t(port)].left = true;
  ports_[size_t(port)].conn = nullptr;
  return true;
}

bool SwitchGroup::resultComplete(const Op& op) const {
  return cfg_.hasUp ? op.resDone : op.combReady == op.combLen;
}

void SwitchGroup::combine(Op& op) {
  const uint64_t piece = cfg_.pieceBytes;
  if (!op.reduces) {
    // Allgather: copy each rank's piece, in rank order, as far as it has arrived.
    while (op.walkIdx < op.walk.size()) {
      const GatherPiece& g = op.walk[op.walkIdx];
      const PortOut& po = op.ports[g.port];
      const uint64_t at = g.portOff + op.walkOff;
      const uint64_t avail = po.posted && po.got > at ? po.got - at : 0;
      const uint64_t n = std::min(avail, g.len - op.walkOff);
      if (n == 0) break;
      std::memcpy(op.comb.get() + op.combReady, po.in.get() + at, n);
      op.combReady += n;
      op.walkOff += n;
      if (op.walkOff == g.len) {
        ++op.walkIdx;
        op.walkOff = 0;
      }
    }
    return;
  }
  uint64_t f = op.combLen;
  for (const PortOut& po : op.ports) f = std::min(f, po.posted ? po.got : 0);
  if (f < op.combLen) f -= f % op.typeSize;
  if (f <= op.combReady || (f - op.combReady < piece && f < op.combLen)) return;
  // Reduce piece by piece (each piece stays in cache while all ports are folded in),
  // in port order: ((p0 op p1) op p2) ...
  while (op.combReady < f) {
    const uint64_t o = op.combReady;
    const uint64_t bytes = std::min<uint64_t>(f - o, piece);
    const size_t elems = size_t(bytes / op.typeSize);
    char* dst = op.comb.get() + o;
    if (op.ports.size() == 1) {
      std::memcpy(dst, op.ports[0].in.get() + o, bytes);
    } else {
      op.reducer.reduce(dst, op.ports[0].in.get() + o, op.ports[1].in.get() + o, elems, 0);
      for (size_t p = 2; p < op.ports.size(); ++p)
        op.reducer.reduce(dst, dst, op.ports[p].in.get() + o, elems, 0);
    }
    op.combReady += bytes;
  }
}

void SwitchGroup::sendUp(Op& op) {
  const uint64_t piece = cfg_.pieceBytes;
  while (up && op.upSent < op.combReady) {
    const uint64_t avail = op.combReady - op.upSent;
    if (avail < piece && op.combReady < op.combLen) break;
    const uint32_t n = uint32_t(std::min(avail, piece));
    up->queueData(op.seq, op.comb, op.comb.get() + op.upSent, n);
    op.upSent += n;
  }
}

void SwitchGroup::sendOut(Op& op, size_t p) {
  PortOut& po = op.ports[p];
  FrameConn* c = ports_[p].conn;
  if (!po.posted || !c) return;
  const uint64_t piece = cfg_.pieceBytes;
  const uint64_t ready = cfg_.hasUp ? op.resGot : op.combReady;
  while (po.seg < po.segs.size()) {
    const Span s = po.segs[po.seg];
    const uint64_t pos = s.off + po.segDone;
    const uint64_t end = s.off + s.len;
    const uint64_t avail = ready > pos ? std::min(ready, end) - pos : 0;
    if (avail == 0 || (avail < piece && pos + avail < end)) break;
    const uint32_t n = uint32_t(std::min(avail, piece));
    c->queueData(op.seq, op.res, op.res.get() + pos, n);
    po.segDone += n;
    if (po.segDone == s.len) {
      ++po.seg;
      po.segDone = 0;
    }
  }
}

void SwitchGroup::pump() {
  for (Op& op : ops_) {
    combine(op);
    if (cfg_.hasUp) sendUp(op);
    for (size_t p = 0; p < ports_.size(); ++p) sendOut(op, p);
  }
  // kDone, in operation order, once a port has all of its output.
  for (size_t p = 0; p < ports_.size(); ++p) {
    FrameConn* c = ports_[p].conn;
    if (!c) continue;
    for (Op& op : ops_) {
      PortOut& po = op.ports[p];
      if (po.doneSent) continue;
      if (!po.posted || !resultComplete(op) || po.seg < po.segs.size()) break;
      c->queueControl(wire::kDone, op.seq, std::string());
      po.doneSent = true;
    }
  }
  while (!ops_.empty()) {
    const Op& op = ops_.front();
    bool finished = !cfg_.hasUp || op.upSent == op.combLen;
    for (const PortOut& po : op.ports) finished = finished && po.doneSent;
    if (!finished) break;
    retire(ops_.front());
    ops_.pop_front();
  }
}

SharedBytes SwitchGroup::takeBuffer(uint64_t n, uint64_t* cap) {
  size_t best = pool_.size();
  for (size_t i = 0; i < pool_.size(); ++i)
    if (pool_[i].cap >= n && pool_[i].cap / 4 <= n &&
        (best == pool_.size() || pool_[i].cap < pool_[best].cap))
      best = i;
  if (best == pool_.size()) {
    *cap = n;
    return allocBytes(n);
  }
  SharedBytes b = std::move(pool_[best].bytes);
  *cap = pool_[best].cap;
  pool_.erase(pool_.begin() + long(best));
  return b;
}

void SwitchGroup::giveBack(SharedBytes* b, uint64_t cap) {
  constexpr size_t kMaxPooled = 16;
  constexpr uint64_t kMinPooled = 256 * 1024;  // smaller ones come cheaply from malloc
  if (*b && b->use_count() == 1 && cap >= kMinPooled) {
    if (pool_.size() == kMaxPooled) pool_.erase(pool_.begin());
    pool_.push_back(Pooled{cap, std::move(*b)});
  }
  b->reset();
}

void SwitchGroup::retire(Op& op) {
  if (op.res == op.comb) op.res.reset();
  giveBack(&op.res, op.resCap);
  giveBack(&op.comb, op.combCap);
  for (PortOut& po : op.ports) giveBack(&po.in, po.inCap);
}

}  // namespace braid
