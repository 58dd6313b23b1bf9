// The cost model's formulas, one per algorithm (see cost.h). Notation: n ranks on N
// nodes of at most m ranks, S = the query's bytes, C = chunk, p = slice (protocol).
// A step costs stepUs + the link's alpha + bytes / its bandwidth; steps of ring-like
// algorithms run in lock step, so every ring step is paced by the slowest link in the
// ring; k ranks of a node crossing to other nodes at once share the node's NIC.
#include "algorithms/cost.h"

#include "algorithms/patterns/tree.h"
#include "algorithms/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace braid {
namespace {

struct Ctx {
  int n = 1, N = 1, m = 1;
  bool uniform = true;
  double S = 0, C = 1, p = 1;
  const CostModel* M = nullptr;
  const RankLayout* L = nullptr;
  int nChannels = 1;

  /// Bytes per microsecond of `gbps` GB/s.
  static double bpu(double gbps) { return std::max(gbps, 1e-6) * 1e3; }
  double intraBw() const { return bpu(M->intra.gbps); }
  /// Per-rank inter-node bandwidth when k ranks of a node cross at once.
  double interBw(int k) const {
    return bpu(std::min(M->inter.gbps, M->nicGbps / std::max(k, 1)));
  }
  double reduce(double bytes) const { return bytes / bpu(M->reduceGbps); }
  /// The slowest link of a ring over all ranks (inter-node once there are nodes).
  double ringAlpha() const { return N > 1 ? M->inter.alphaUs : M->intra.alphaUs; }
  /// A ring's bandwidth. With several channels, each channel's ring leaves a node at
  /// another local rank (another NIC where a node has several): c channels use up to
  /// min(c, m) crossings of a node at once, each carrying 1/c of the data.
  double ringBw() const {
    if (N == 1) return intraBw();
    const int k = std::max(1, std::min(nChannels, m));
    return std::min(k * interBw(k), intraBw());
  }
  /// Per-piece overhead of moving `bytes` in slices of p.
  double slices(double bytes) const { return std::ceil(bytes / p) * M->sliceUs; }
  bool crosses(int a, int b) const {
    return L && a < int(L->nodeOf.size()) && b < int(L->nodeOf.size()) &&
           L->nodeOf[size_t(a)] != L->nodeOf[size_t(b)];
  }
  /// Whether any rank's partner at XOR distance d (or +d mod n) is on another node.
  bool distanceCrosses(int d, bool xorPartner) const {
    for (int r = 0; r < n; ++r) {
      int q = xorPartner ? (r ^ d) : (r + d) % n;
      if (q < n && crosses(r, q)) return true;
    }
    return false;
  }
  /// Ranks per node that send across nodes at distance d at once.
  int crossersPerNode(int d, bool xorPartner) const {
    int best = 0;
    for (int node = 0; L && node < N; ++node) {
      int k = 0;
      for (int r : L->nodeRanks[size_t(node)]) {
        int q = xorPartner ? (r ^ d) : (r + d) % n;
        if (q < n && crosses(r, q)) ++k;
      }
      best = std::max(best, k);
    }
    return std::max(best, 1);
  }
  /// One step of `bytes` at partner distance d.
  double hop(double bytes, int d, bool xorPartner) const {
    const bool x = distanceCrosses(d, xorPartner);
    const double bw = x ? interBw(crossersPerNode(d, xorPartner)) : intraBw();
    return M->stepUs + (x ? M->inter.alphaUs : M->intra.alphaUs) + bytes / bw + slices(bytes);
  }
};

int floorLog2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

double steps(double bytes, double chunk) { return std::max(1.0, std::ceil(bytes / chunk)); }

// ---- rings and chains ----------------------------------------------------------------

// Channels run side by side, each with its share of the data: a ring of c channels takes
// 1/c of the loops.
double ringAllReduce(const Ctx& c) {
  const double block = c.S / c.n, loops = steps(c.S, c.n * c.C * c.nChannels);
  return 2 * (c.n - 1) * loops * (c.M->stepUs + c.ringAlpha()) +
         2 * (c.n - 1) * block / c.ringBw() + c.reduce((c.n - 1) * block) +
         c.slices(2 * (c.n - 1) * block);
}

double ringGather(const Ctx& c, bool reduce) {  // all-gather / reduce-scatter
  const double block = c.S / c.n, loops = steps(c.S, c.n * c.C * c.nChannels);
  return (c.n - 1) * loops * (c.M->stepUs + c.ringAlpha()) + (c.n - 1) * block / c.ringBw() +
         (reduce ? c.reduce((c.n - 1) * block) : 0) + c.slices((c.n - 1) * block);
}

double chain(const Ctx& c, bool reduce) {  // broadcast / reduce along the ring
  const double hopsInter = c.N > 1 ? c.N - 1 : 0, hopsIntra = c.n - 1 - hopsInter;
  const double piece = std::min(c.p, c.S);
  return steps(c.S, c.C) * c.M->stepUs + hopsInter * c.M->inter.alphaUs +
         hopsIntra * c.M->intra.alphaUs + (c.S + std::max(0, c.n - 2) * piece) / c.ringBw() +
         (reduce ? c.reduce(c.S) : 0) + c.slices(c.S);
}

// ---- one shot ---------------------------------------------------------------------------

/// Latency of one rank's one-shot messages: they are all in flight at once, so one
/// latency of the slowest link (their bytes are charged one after another below).
double onceAlpha(const Ctx& c) { return c.N > 1 ? c.M->inter.alphaUs : c.M->intra.alphaUs; }

/// Every rank sends `bytes` to every other rank (its sends are serial on its core).
double allToAllOnce(const Ctx& c, double bytes) {
  return (c.n - 1) * c.M->stepUs + onceAlpha(c) + (c.m - 1) * bytes / c.intraBw() +
         (c.n - c.m) * bytes / c.interBw(c.m) + c.slices((c.n - 1) * bytes);
}

/// The root sends `bytes` to (or receives them from) every other rank.
double rootedOnce(const Ctx& c, double bytes) {
  return (c.n - 1) * c.M->stepUs + onceAlpha(c) + (c.m - 1) * bytes / c.intraBw() +
         (c.n - c.m) * bytes / c.interBw(1) + c.slices((c.n - 1) * bytes);
}

double pairwise(const Ctx& c) {
  const double block = c.S / c.n;
  return (c.n - 1) * c.M->stepUs + (c.m - 1) * (c.M->intra.alphaUs + block / c.intraBw()) +
         (c.n - c.m) * (c.M->inter.alphaUs + block / c.interBw(c.m)) + c.slices(c.S);
}

// ---- trees and recursive algorithms -------------------------------------------------------

/// Most halves of the message (S/2 each) one node's head moves over the network in one
/// direction in the double binary tree: per tree, S/2 to or from each neighbour on
/// another node (the parent, and each child: up, then down). A head with a parent and
/// two children in one tree and a leaf in the other moves 2 S each way; over two nodes,
/// S. (Ring all-reduce: 2(N-1)/N S; the switch: S.)
int treeCrossHalves(const Ctx& c) {
  int most = 2;
  for (int v = 0; c.L && v < c.N; ++v) {
    const int head = c.L->nodeRanks[size_t(v)][0];
    int halves = 0;
    for (int t = 0; t < 2; ++t) {
      const patterns::TreeLinks l = patterns::layoutTree(*c.L, head, t);
      halves += l.parent >= 0 && c.crosses(head, l.parent);
      for (int ch : l.children) halves += c.crosses(head, ch);
    }
    most = std::max(most, halves);
  }
  return most;
}

double tree(const Ctx& c) {
  // Inter-node double binary tree over nodes, chains inside nodes (one node: a binary
  // tree over ranks). Both trees carry half the data. A rank is interior in at most one
  // tree: about 1.5 S in and 1.5 S out over its node's links; across nodes a node's
  // network carries up to 2 S each way (treeCrossHalves). The pipeline fills through
  // the depth in chunks.
  const double dInter = c.N > 1 ? floorLog2(c.N) : 0;  // binary tree depth
  const double dIntra = c.N > 1 ? c.m - 1 : floorLog2(c.n);
  const double lat = 2 * (dInter * (c.M->stepUs + c.M->inter.alphaUs) +
                          dIntra * (c.M->stepUs + c.M->intra.alphaUs));
  const double half = c.S / 2, chunk = std::min(c.C, half);
  const int k = std::max(1, std::min(c.nChannels, c.m));
  double wire = 1.5 * c.S / c.intraBw();
  const double inter = c.N > 1 ? k * c.interBw(k) : c.intraBw();  // heads cross in parallel
  if (c.N > 1) wire = std::max(wire, treeCrossHalves(c) * half / inter);
  // One chunk's way up and down the tree; later chunks follow it in pipeline.
  const double path = dInter * chunk / inter + dIntra * chunk / c.intraBw();
  const double chunks = steps(half, c.C);
  return lat + chunks * 3 * c.M->stepUs + std::max(wire, 2 * path) + (chunks > 1 ? path : 0) +
         c.reduce(c.S) + c.slices(2 * c.S);
}

double rabenseifner(const Ctx& c) {
  int p2 = 1;
  while (p2 * 2 <= c.n) p2 *= 2;
  double t = 0;
  if (c.n > p2)  // the extra ranks fold in and get the result back
    t += 2 * (c.M->stepUs + c.M->inter.alphaUs * (c.N > 1) +
              c.M->intra.alphaUs * (c.N == 1) + c.S / c.ringBw()) + c.reduce(c.S);
  double bytes = c.S;
  for (int d = 1; d < p2; d *= 2) {
    bytes /= 2;
    const double pieces = steps(bytes, c.C);
    t += 2 * pieces * c.hop(bytes / pieces, d, true) + c.reduce(bytes);
  }
  return t;
}

double bruckAllGather(const Ctx& c) {
  const double block = c.S / c.n;
  double t = 0;
  for (int d = 1; d < c.n; d *= 2) {
    const double blocks = std::min(d, c.n - d);
    t += c.hop(blocks * block, d, false) + c.M->stepUs;  // wrapped ranges: two steps
  }
  return t;
}

double bruckAllToAll(const Ctx& c) {
  double t = 2 * c.S / Ctx::bpu(c.M->reduceGbps);  // rotations in and out of scratch
  for (int d = 1; d < c.n; d *= 2) {
    int blocks = 0;
    for (int j = 0; j < c.n; ++j) blocks += (j & d) != 0;
    t += c.hop(blocks * c.S / c.n, d, false) + c.M->stepUs * 2;
  }
  return t;
}

// ---- hierarchical ------------------------------------------------------------------------

double hierAllReduce(const Ctx& c) {
  const int m = c.m, N = c.N;
  const double block = c.S / m;
  double t = 0;
  if (m > 1) {
    const double loops = steps(c.S, m * c.C);
    t += 2 * (m - 1) * loops * (c.M->stepUs + c.M->intra.alphaUs) +
         2 * (m - 1) * block / c.intraBw() + c.reduce((m - 1) * block) +
         c.slices(2 * (m - 1) * block);
  }
  if (N > 1) {
    const double sub = block / N, loops = steps(block, N * c.C);
    t += 2 * (N - 1) * loops * (c.M->stepUs + c.M->inter.alphaUs) +
         2 * (N - 1) * sub / c.interBw(m) + c.reduce((N - 1) * sub) +
         c.slices(2 * (N - 1) * sub);
  }
  return t;
}

double hierGather(const Ctx& c, bool reduce) {  // all-gather / reduce-scatter
  const int m = c.m, N = c.N;
  const double block = c.S / c.n;
  double t = 0;
  if (N > 1)
    t += (N - 1) * (c.M->stepUs + c.M->inter.alphaUs) * steps(N * block, N * c.C) +
         (N - 1) * block / c.interBw(m) + (reduce ? c.reduce((N - 1) * block) : 0);
  if (m > 1)
    t += (m - 1) * (c.M->stepUs + c.M->intra.alphaUs) * steps(c.S, m * c.C) +
         (m - 1) * N * block / c.intraBw() + (reduce ? c.reduce((m - 1) * N * block) : 0);
  return t + c.slices(c.S);
}

double hierAllToAll(const Ctx& c) {
  const int m = c.m, N = c.N;
  const double block = c.S / c.n;
  // N-1 inter-node messages of m blocks per rank; inside the node, a rank's own blocks
  // go straight to their local peers and the (N-1)(m-1) forwarded blocks are received
  // once into scratch and sent on once.
  return (N - 1) * (c.M->stepUs + c.M->inter.alphaUs + m * block / c.interBw(m)) +
         (m - 1) * (c.M->stepUs + c.M->intra.alphaUs + block / c.intraBw()) +
         2 * (N - 1) * (m - 1) * (c.M->stepUs + block / c.intraBw()) + c.slices(2 * c.S);
}

// ---- in-network (CollNet: the aggregation switch reduces) ----------------------------------
// The switch is modelled as one more hop over the inter-node link in each direction, a
// node's heads crossing at once and sharing its NIC; up and down directions overlap
// (full duplex). The heads' connections copy each message in and out of staging
// (charged like a reduction's memory traffic).

/// k heads of a node each send `up` bytes to the switch and receive `down` back.
double switchLeg(const Ctx& c, int k, double up, double down, double messages) {
  return 2 * (c.M->stepUs + c.M->inter.alphaUs) + messages * 2 * c.M->stepUs +
         std::max(up, down) / c.interBw(k) + c.reduce(up + down);
}

double collNetChain(const Ctx& c) {
  const int k = std::max(1, std::min(c.nChannels, c.m));  // heads per node
  const double perHead = c.S / k, chunk = std::min(c.C, perHead);
  const double lat = 2 * (c.m - 1) * (c.M->stepUs + c.M->intra.alphaUs);
  // Pipelined: the slowest stage paces the stream, one chunk fills the path.
  const double intraWire = c.m > 1 ? c.S / c.intraBw() + c.reduce(c.S) : 0;
  const double leg = switchLeg(c, k, perHead, perHead, steps(perHead, c.C));
  const double fill = 2 * (c.m - 1) * chunk / c.intraBw();
  return lat + std::max(intraWire, leg) + fill + c.slices(2 * c.S);
}

double collNetDirect(const Ctx& c) {
  const int m = c.m;
  const double block = c.S / m, loops = steps(c.S, m * c.C * 3);
  double t = switchLeg(c, m, block, block, steps(block, c.C));
  if (m > 1)
    t += 2 * (m - 1) * loops * (c.M->stepUs + c.M->intra.alphaUs) +
         2 * (m - 1) * block / c.intraBw() + c.reduce((m - 1) * block) +
         c.slices(2 * (m - 1) * block);
  return t;
}

double collNetGather(const Ctx& c, bool reduce) {  // all-gather / reduce-scatter
  const int m = c.m, N = c.N;
  const double block = c.S / c.n;  // one rank's block
  // Every rank exchanges N blocks' worth with the switch in one direction, one block in
  // the other; inside the node, (m-1) N blocks move around a ring.
  double t = switchLeg(c, m, reduce ? N * block : block, reduce ? block : N * block,
                       steps(N * block, c.C));
  if (m > 1)
    t += (m - 1) * (c.M->stepUs + c.M->intra.alphaUs) * steps(c.S, m * c.C) +
         (m - 1) * N * block / c.intraBw() + (reduce ? c.reduce((m - 1) * N * block) : 0);
  return t + c.slices(c.S);
}

}  // namespace

namespace {

/// A direct-access algorithm (algorithms/plan.h): `barriers` signal-and-wait rounds,
/// then each rank reads or writes `remote` bytes of its peers' buffers, reduces
/// `reduced`, and reads and writes `local` bytes of its own besides (where algorithms
/// that move the same remote bytes differ: one load stored to n places, or n copies).
double directAccess(const Ctx& c, int barriers, double remote, double reduced,
                    double local = 0) {
  const double bw = c.N > 1 ? c.interBw(c.m) : c.intraBw();
  return barriers * (c.M->stepUs + onceAlpha(c)) + remote / bw + c.reduce(reduced) +
         local / c.intraBw();
}

/// The query as formulas see it; one rank moves nothing but its own copy.
template <class F>
double predict(const CostQuery& q, F formula) {
  if (!q.model) return -1;
  Ctx c;
  c.n = std::max(q.nranks, 1);
  c.M = q.model;
  c.L = q.layout;
  c.N = q.layout ? q.layout->nNodes : 1;
  c.m = 1;
  if (q.layout)
    for (const std::vector<int>& r : q.layout->nodeRanks) c.m = std::max(c.m, int(r.size()));
  else
    c.m = c.n;
  c.uniform = !q.layout || q.layout->uniform();
  c.S = double(q.bytes);
  c.C = double(std::max<uint64_t>(q.chunkBytes, 64));
  c.p = double(std::max<uint64_t>(q.sliceBytes, 64));
  c.nChannels = std::max(q.nChannels, 1);
  if (c.n == 1) return q.model->stepUs + c.S / Ctx::bpu(q.model->reduceGbps);
  return formula(c);
}

}  // namespace

namespace costs {

double allReduceRing(const CostQuery& q) { return predict(q, ringAllReduce); }
double allReduceDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return allToAllOnce(c, c.S) + c.reduce((c.n - 1) * c.S); });
}
double allReduceTree(const CostQuery& q) { return predict(q, tree); }
double allReduceRabenseifner(const CostQuery& q) { return predict(q, rabenseifner); }
double allReduceHier(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? hierAllReduce(c) : -1; });
}
double allReduceCollNetChain(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? collNetChain(c) : -1; });
}
double allReduceCollNetDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? collNetDirect(c) : -1; });
}
double allReduceTwoShot(const CostQuery& q) {
  return predict(q, [](const Ctx& c) {
    const double part = (c.n - 1) * c.S / c.n;
    return directAccess(c, 3, 2 * part, part, 2 * c.S / c.n + part);
  });
}
double allReduceReducePut(const CostQuery& q) {
  return predict(q, [](const Ctx& c) {
    const double part = (c.n - 1) * c.S / c.n;
    return directAccess(c, 2, 2 * part, part, 2 * c.S / c.n);
  });
}

double allGatherRing(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return ringGather(c, false); });
}
double allGatherDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return allToAllOnce(c, c.S / c.n); });
}
double allGatherBruck(const CostQuery& q) { return predict(q, bruckAllGather); }
double allGatherHier(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? hierGather(c, false) : -1; });
}
double allGatherCollNet(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? collNetGather(c, false) : -1; });
}
double allGatherPeerRead(const CostQuery& q) {
  return predict(q, [](const Ctx& c) {
    const double part = (c.n - 1) * c.S / c.n;
    return directAccess(c, 2, part, 0, part + 2 * c.S / c.n);
  });
}
double allGatherPeerPut(const CostQuery& q) {
  return predict(q, [](const Ctx& c) {
    return directAccess(c, 2, (c.n - 1) * c.S / c.n, 0, 2 * c.S / c.n);
  });
}

double reduceScatterRing(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return ringGather(c, true); });
}
double reduceScatterDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) {
    return allToAllOnce(c, c.S / c.n) + c.reduce((c.n - 1) * c.S / c.n);
  });
}
double reduceScatterHier(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? hierGather(c, true) : -1; });
}
double reduceScatterCollNet(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? collNetGather(c, true) : -1; });
}
double reduceScatterPeerRead(const CostQuery& q) {
  return predict(q, [](const Ctx& c) {
    const double part = (c.n - 1) * c.S / c.n;
    return directAccess(c, 2, part, part);
  });
}

double allToAllPairwise(const CostQuery& q) { return predict(q, pairwise); }
double allToAllBruck(const CostQuery& q) { return predict(q, bruckAllToAll); }
double allToAllHier(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return c.uniform ? hierAllToAll(c) : -1; });
}
double allToAllPeerRead(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return directAccess(c, 2, (c.n - 1) * c.S / c.n, 0); });
}

double broadcastChain(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return chain(c, false); });
}
double broadcastDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return rootedOnce(c, c.S); });
}
double broadcastPeerRead(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return directAccess(c, 2, c.S, 0); });
}

double reduceChain(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return chain(c, true); });
}
double reduceDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return rootedOnce(c, c.S) + c.reduce((c.n - 1) * c.S); });
}
double reducePeerRead(const CostQuery& q) {
  return predict(q, [](const Ctx& c) {
    return directAccess(c, 2, (c.n - 1) * c.S, (c.n - 1) * c.S);
  });
}

double gatherDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return rootedOnce(c, c.S / c.n); });
}
double gatherPeerRead(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return directAccess(c, 2, (c.n - 1) * c.S / c.n, 0); });
}
double scatterDirect(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return rootedOnce(c, c.S / c.n); });
}
double scatterPeerRead(const CostQuery& q) {
  return predict(q, [](const Ctx& c) { return directAccess(c, 2, c.S / c.n, 0); });
}

}  // namespace costs

double predictUs(const char* algorithm, const CostQuery& q) {
  if (!algorithm) return -1;
  const Algorithm* a = findAlgorithm(q.coll, algorithm);
  return a && a->cost ? a->cost(q) : -1;
}

namespace {

double* field(CostModel* m, const std::string& key) {
  if (key == "intra_alpha_us") return &m->intra.alphaUs;
  if (key == "intra_gbps") return &m->intra.gbps;
  if (key == "inter_alpha_us") return &m->inter.alphaUs;
  if (key == "inter_gbps") return &m->inter.gbps;
  if (key == "nic_gbps") return &m->nicGbps;
  if (key == "reduce_gbps") return &m->reduceGbps;
  if (key == "step_us") return &m->stepUs;
  if (key == "slice_us") return &m->sliceUs;
  return nullptr;
}

}  // namespace

bool CostModel::parse(const std::string& text, std::string* err) {
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  CostModel out = *this;
  while (std::getline(in, line)) {
    ++lineNo;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line.erase(std::remove_if(line.begin(), line.end(), ::isspace), line.end());
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    double* f = eq == std::string::npos ? nullptr : field(&out, line.substr(0, eq));
    char* end = nullptr;
    const std::string value = eq == std::string::npos ? "" : line.substr(eq + 1);
    const double v = value.empty() ? 0 : strtod(value.c_str(), &end);
    if (!f || value.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      if (err)
        *err = "line " + std::to_string(lineNo) + ": '" + line +
               "' is not key=positive-number with a key of intra_alpha_us, intra_gbps, "
               "inter_alpha_us, inter_gbps, nic_gbps, reduce_gbps, step_us, slice_us";
      return false;
    }
    *f = v;
  }
  *this = out;
  return true;
}

std::string CostModel::toString() const {
  char buf[512];
  snprintf(buf, sizeof(buf),
           "intra_alpha_us=%g\nintra_gbps=%g\ninter_alpha_us=%g\ninter_gbps=%g\nnic_gbps=%g\n"
           "reduce_gbps=%g\nstep_us=%g\nslice_us=%g\n",
           intra.alphaUs, intra.gbps, inter.alphaUs, inter.gbps, nicGbps, reduceGbps, stepUs,
           sliceUs);
  return buf;
}

}  // namespace braid
