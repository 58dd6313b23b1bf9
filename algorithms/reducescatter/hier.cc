// Hierarchical reduce-scatter for nodes of equal size (N nodes x L ranks):
//   1. intra-node ring reduce-scatter, once per node v: local rank j of our node ends
//      with our node's sum of the block of node v's local rank j;
//   2. inter-node ring reduce-scatter among the N ranks with our local rank (one per
//      node): the node sums meet, and each rank ends with its own block.
// Per node, (N-1)*L node sums of a block go out over the network: the minimum (the
// other order, inter-node first, would send L times more).
//
// count is the per-rank result; send holds n blocks, block b at send[b*count]. Each
// channel walks its share of every block in pieces of at most chunk elements, both
// phases per piece, so every step around a cycle moves at most chunkBytes. The node
// sums for the other nodes wait in Buf::kScratch (N-1 pieces per channel, reused by
// every piece); our own node's goes straight into recv. The op's pre-step is applied
// in phase 1 (phase 2 when L == 1), its post-step on the final value. Non-uniform
// layouts are declined (the registry falls back to ring).
#include <algorithm>

#include "algorithms/builders.h"
#include "algorithms/patterns/groups.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool reduceScatterHier(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const RankLayout& layout = layoutOf(a);
  if (!layout.uniform()) return false;
  if (a.count == 0) return true;
  const int N = layout.nNodes, L = layout.ranksPerNode();
  const patterns::Group node = patterns::Group::nodeOf(layout, a.rank);   // position: l
  const patterns::Group peers = patterns::Group::peersOf(layout, a.rank); // position: node
  const int me = peers.position(), l = node.position();
  const bool staged = N > 1 && L > 1;
  const uint64_t slot = std::min(chunk, a.count);  // scratch elements per node sum
  if (staged) plan->scratchElems = uint64_t(p.nChannels) * uint64_t(N - 1) * slot;
  auto input = [&](int rank, Range piece) {
    return patterns::sendRegion(piece, uint64_t(rank) * a.count);
  };
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    if (N == 1 && L == 1) {
      w.copy(patterns::sendRegion(share), patterns::recvRegion(share), kPreOp | kPostOp);
      continue;
    }
    for (Range piece : patterns::Pieces(share, chunk)) {
      // Where our node's sum of node v's block (of local rank l) is kept.
      auto nodeSum = [&](int v) {
        if (v == me) return patterns::recvRegion(piece);
        const uint64_t index = uint64_t(c) * uint64_t(N - 1) + uint64_t((v - me - 1 + N) % N);
        return Region{Buf::kScratch, index * slot, piece.count};
      };
      // 1. Intra-node, node by node (ours last): our node's sums of node v's blocks.
      if (L > 1) {
        for (int i = 1; i <= N; ++i) {
          const int v = (me + i) % N;
          const std::vector<int>& ranks = layout.nodeRanks[size_t(v)];
          patterns::ringReduceScatter(
              w, node, [&](int j) { return input(ranks[size_t(j)], piece); }, nodeSum(v), chunk,
              kPreOp, N == 1 ? kPostOp : 0);
        }
      }
      // 2. Inter-node: the node sums of our local rank's blocks meet.
      if (N > 1) {
        patterns::ringReduceScatter(
            w, peers,
            [&](int v) {
              return L > 1 ? nodeSum(v) : input(layout.nodeRanks[size_t(v)][size_t(l)], piece);
            },
            patterns::recvRegion(piece), chunk, L > 1 ? 0 : kPreOp, kPostOp);
      }
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
