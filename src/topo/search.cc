#include "src/topo/search.h"

#include <algorithm>
#include <numeric>

namespace braid {
namespace topo {

namespace {

/// Cost of a ring or chain, compared lexicographically (smaller is better).
struct Cost {
  int worst = 0;          ///< worst path type (PathType order)
  double minGbps = 1e30;  ///< bottleneck bandwidth (larger is better)
  int worstCount = 0;     ///< links of the worst type (fewer crossings)
  int typeSum = 0;
  int hops = 0;

  void add(const Path& p) {
    int ty = int(p.type);
    if (ty > worst) {
      worst = ty;
      worstCount = 0;
    }
    worstCount += ty == worst;
    minGbps = std::min(minGbps, p.gbps);
    typeSum += ty;
    hops += p.hops;
  }

  bool betterThan(const Cost& o) const {
    if (worst != o.worst) return worst < o.worst;
    if (minGbps > o.minGbps * 1.0001) return true;
    if (o.minGbps > minGbps * 1.0001) return false;
    if (worstCount != o.worstCount) return worstCount < o.worstCount;
    if (typeSum != o.typeSum) return typeSum < o.typeSum;
    return hops < o.hops;
  }
};

class Searcher {
 public:
  Searcher(const Topology& t, const std::vector<int>& nodes) : t_(t), nodes_(nodes) {
    size_t n = nodes.size();
    paths_.resize(n * n);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) paths_[i * n + j] = t.path(nodes[i], nodes[j]);
  }

  const Path& path(int i, int j) const { return paths_[size_t(i) * nodes_.size() + size_t(j)]; }

  Cost cost(const std::vector<int>& seq, bool cycle) const {
    Cost c;
    size_t links = cycle ? seq.size() : seq.size() - 1;
    if (seq.size() < 2) links = 0;
    for (size_t k = 0; k < links; ++k) c.add(path(seq[k], seq[(k + 1) % seq.size()]));
    return c;
  }

  /// Best order of all ranks: seq[0] = first; if last >= 0 it ends the chain.
  std::vector<int> best(int first, int last, bool cycle) const {
    int n = int(nodes_.size());
    std::vector<int> mid;
    for (int r = 0; r < n; ++r)
      if (r != first && r != last) mid.push_back(r);
    auto build = [&](const std::vector<int>& m) {
      std::vector<int> s{first};
      s.insert(s.end(), m.begin(), m.end());
      if (last >= 0 && last != first) s.push_back(last);
      return s;
    };
    if (mid.size() <= 8) {  // exhaustive: at most 8! = 40320 orders
      std::vector<int> bestSeq = build(mid);
      Cost bestCost = cost(bestSeq, cycle);
      while (std::next_permutation(mid.begin(), mid.end())) {
        std::vector<int> s = build(mid);
        Cost c = cost(s, cycle);
        if (c.betterThan(bestCost)) {
          bestCost = c;
          bestSeq = std::move(s);
        }
      }
      return bestSeq;
    }
    // Greedy nearest neighbour, then 2-opt on the movable middle.
    std::vector<int> s{first};
    std::vector<bool> used(size_t(n), false);
    used[size_t(first)] = true;
    if (last >= 0) used[size_t(last)] = true;
    for (size_t k = 0; k < mid.size(); ++k) {
      int cur = s.back(), pick = -1;
      for (int r : mid) {
        if (used[size_t(r)]) continue;
        if (pick < 0) {
          pick = r;
          continue;
        }
        const Path& a = path(cur, r);
        const Path& b = path(cur, pick);
        if (a.type < b.type || (a.type == b.type && a.gbps > b.gbps * 1.0001)) pick = r;
      }
      used[size_t(pick)] = true;
      s.push_back(pick);
    }
    if (last >= 0 && last != first) s.push_back(last);
    size_t lo = 1, hi = s.size() - (last >= 0 ? 1 : 0);  // movable range [lo, hi)
    Cost cur = cost(s, cycle);
    for (int pass = 0; pass < 20; ++pass) {
      bool improved = false;
      for (size_t i = lo; i + 1 < hi; ++i)
        for (size_t j = i + 1; j < hi; ++j) {
          std::reverse(s.begin() + long(i), s.begin() + long(j) + 1);
          Cost c = cost(s, cycle);
          if (c.betterThan(cur)) {
            cur = c;
            improved = true;
          } else {
            std::reverse(s.begin() + long(i), s.begin() + long(j) + 1);
          }
        }
      if (!improved) break;
    }
    return s;
  }

  /// The rank closest to a node (type, then bandwidth), preferring ranks not in `avoid`
  /// and not `except`; lowest rank on ties.
  int closest(int node, int except, const std::vector<int>& avoid) const {
    int bestR = -1;
    Path bestP;
    bool bestAvoided = true;
    for (int r = 0; r < int(nodes_.size()); ++r) {
      if (r == except) continue;
      Path p = t_.path(nodes_[size_t(r)], node);
      bool avoided = std::find(avoid.begin(), avoid.end(), r) != avoid.end();
      bool better = bestR < 0 || p.type < bestP.type ||
                    (p.type == bestP.type && (p.gbps > bestP.gbps * 1.0001 ||
                                              (p.gbps * 1.0001 >= bestP.gbps && bestAvoided &&
                                               !avoided)));
      if (better) {
        bestR = r;
        bestP = p;
        bestAvoided = avoided;
      }
    }
    return bestR;
  }

 private:
  const Topology& t_;
  const std::vector<int>& nodes_;
  std::vector<Path> paths_;
};

/// NICs usable by these ranks, best first: closest path type to any rank, then speed.
std::vector<int> rankedNics(const Topology& t, const std::vector<int>& nodes) {
  struct Cand {
    int nic;
    PathType type;
    int64_t speed;
  };
  std::vector<Cand> cands;
  for (int nic : t.nodesOfType(NodeType::kNic)) {
    PathType best = PathType::kNet;
    for (int n : nodes) best = std::min(best, t.path(n, nic).type);
    cands.push_back(Cand{nic, best, t.node(nic).effectiveSpeedMbps()});
  }
  // Fastest first, then closest: keep only the NICs as good as the best one.
  std::stable_sort(cands.begin(), cands.end(), [&](const Cand& a, const Cand& b) {
    if (a.speed != b.speed) return a.speed > b.speed;
    if (a.type != b.type) return a.type < b.type;
    return t.node(a.nic).index < t.node(b.nic).index;
  });
  std::vector<int> out;
  for (const Cand& c : cands)
    if (c.speed == cands[0].speed && c.type == cands[0].type) out.push_back(c.nic);
  return out;
}

void finishChannel(RingChannel* ch) {
  ch->treeHead = ch->order.empty() ? -1 : ch->order.front();
  ch->treeChain = ch->order;
}

}  // namespace

std::vector<int> rankNodes(const Topology& t, const std::vector<int>& cudaDevOfLocalRank) {
  std::vector<int> out;
  for (int d : cudaDevOfLocalRank) out.push_back(t.gpuOfCudaDev(d));
  return out;
}

RingSearch searchRings(const Topology& t, const std::vector<int>& rankNode,
                       const SearchOptions& opt) {
  RingSearch res;
  int n = int(rankNode.size());
  int nCh = std::max(1, opt.nChannels);
  bool known = std::all_of(rankNode.begin(), rankNode.end(),
                           [&](int x) { return x >= 0 && x < t.size(); });
  std::vector<int> identity(static_cast<size_t>(n));
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<int> nics = opt.multiNode ? rankedNics(t, known ? rankNode : std::vector<int>{})
                                        : std::vector<int>{};
  if (n == 0) {
    res.channels.resize(size_t(nCh));
    return res;
  }
  if (!known) {  // nothing to optimise: identity, NICs round-robin
    for (int c = 0; c < nCh; ++c) {
      RingChannel ch;
      ch.order = identity;
      if (!nics.empty()) ch.nicIn = ch.nicOut = nics[size_t(c) % nics.size()];
      finishChannel(&ch);
      res.channels.push_back(ch);
    }
    res.worstType = PathType::kSys;
    return res;
  }
  Searcher s(t, rankNode);
  if (!opt.multiNode || nics.empty()) {
    std::vector<int> ring = s.best(0, -1, true);
    Cost c = s.cost(ring, !opt.multiNode);
    res.worstType = PathType(c.worst);
    res.bottleneckGbps = n > 1 ? c.minGbps : kLocGbps;
    for (int k = 0; k < nCh; ++k) {
      RingChannel ch;
      // Each channel starts one rank further (different tree heads, same links).
      for (int i = 0; i < n; ++i) ch.order.push_back(ring[size_t((i + k) % n)]);
      finishChannel(&ch);
      res.channels.push_back(ch);
    }
    return res;
  }
  std::vector<int> starts;  // ranks already used to enter the node
  for (int k = 0; k < nCh; ++k) {
    RingChannel ch;
    ch.nicIn = nics[size_t(k) % nics.size()];
    if (starts.size() >= size_t(n)) starts.clear();
    int first = s.closest(ch.nicIn, -1, starts);
    starts.push_back(first);
    // Leave by the NIC that gives the best chain, counting the links from nicIn and to
    // nicOut; on ties by nicIn itself (each channel then stays on one network rail).
    Cost bestCost;
    bool have = false;
    std::vector<int> outs{ch.nicIn};
    for (int nic : nics)
      if (nic != ch.nicIn) outs.push_back(nic);
    for (int out : outs) {
      int last = n > 1 ? s.closest(out, first, {}) : -1;
      std::vector<int> order = s.best(first, last, false);
      Cost c = s.cost(order, false);
      c.add(t.path(ch.nicIn, rankNode[size_t(order.front())]));
      c.add(t.path(rankNode[size_t(order.back())], out));
      if (!have || c.betterThan(bestCost)) {
        have = true;
        bestCost = c;
        ch.order = std::move(order);
        ch.nicOut = out;
      }
    }
    if (k == 0) {
      Cost c = s.cost(ch.order, false);
      res.worstType = PathType(c.worst);
      res.bottleneckGbps = n > 1 ? c.minGbps : kLocGbps;
    }
    finishChannel(&ch);
    res.channels.push_back(ch);
  }
  return res;
}

std::vector<int> intraNodeOrder(const Topology& t, const std::vector<int>& cudaDevOfLocalRank) {
  std::vector<int> key(cudaDevOfLocalRank.size());
  std::iota(key.begin(), key.end(), 0);
  std::vector<int> nodes = rankNodes(t, cudaDevOfLocalRank);
  if (std::any_of(nodes.begin(), nodes.end(), [](int x) { return x < 0; })) return key;
  RingSearch r = searchRings(t, nodes, SearchOptions{});
  if (r.channels.empty()) return key;
  const std::vector<int>& ring = r.channels[0].order;
  for (size_t pos = 0; pos < ring.size(); ++pos) key[size_t(ring[pos])] = int(pos);
  return key;
}

}  // namespace topo
}  // namespace braid
