// Hierarchical all-gather for nodes of equal size (N nodes x L ranks):
//   1. inter-node ring all-gather among the N ranks with our local rank (one per node):
//      each block crosses the network once per node that needs it, over L rings at once;
//   2. intra-node ring all-gather, once per node v: the L blocks of node v's ranks,
//      which each of our node's ranks now holds one of (the one with its local rank).
// Per node, (N-1)*L blocks come in over the network: the minimum; a flat ring moves
// the same bytes but through every node boundary it crosses, with N*L-1 slow hops.
//
// count is the per-rank block; rank b's block lands at recv[b*count]. Each channel walks
// its share of every block in pieces of at most chunk elements, both phases per piece,
// so every step around a cycle moves at most chunkBytes. Non-uniform layouts are
// declined (the registry falls back to ring).
#include "algorithms/builders.h"
#include "algorithms/patterns/groups.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allGatherHier(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const RankLayout& layout = layoutOf(a);
  if (!layout.uniform()) return false;
  if (a.count == 0) return true;
  const int N = layout.nNodes;
  const patterns::Group peers = patterns::Group::peersOf(layout, a.rank);  // position: node
  const patterns::Group node = patterns::Group::nodeOf(layout, a.rank);    // position: l
  const int me = peers.position(), l = node.position();
  auto blockOf = [&](int rank, Range piece) {
    return patterns::recvRegion(piece, uint64_t(rank) * a.count);
  };
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    // Our own block into place (in place, it already is).
    if (!a.inPlace) w.copy(patterns::sendRegion(share), blockOf(a.rank, share));
    for (Range piece : patterns::Pieces(share, chunk)) {
      // 1. Inter-node: the blocks of the ranks with our local rank.
      patterns::ringAllGather(w, peers, patterns::sendRegion(piece), [&](int v) {
        return blockOf(layout.nodeRanks[size_t(v)][size_t(l)], piece);
      }, chunk);
      // 2. Intra-node, node by node (ours first): we hold node v's block of local rank l.
      for (int i = 0; i < N; ++i) {
        const int v = (me + i) % N;
        const std::vector<int>& ranks = layout.nodeRanks[size_t(v)];
        const Region own =
            v == me ? patterns::sendRegion(piece) : blockOf(ranks[size_t(l)], piece);
        patterns::ringAllGather(w, node, own, [&](int j) {
          return blockOf(ranks[size_t(j)], piece);
        }, chunk);
      }
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
