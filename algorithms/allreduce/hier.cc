// Hierarchical all-reduce for nodes of equal size (N nodes x L ranks):
//   1. intra-node ring reduce-scatter: local rank l ends with its node's sum of block l;
//   2. inter-node ring all-reduce of block l among the N ranks with local rank l (one
//      per node), so each node pair exchanges every element once, over L rings at once;
//   3. intra-node ring all-gather of the L completed blocks.
// Only 1/L of the data crosses the network per rank, and the slow rings have N members
// instead of N*L.
//
// Each channel walks its share in loops of up to L*N*chunk elements: a loop is cut into
// L blocks (one per local rank) and each block into N sub-blocks (one per node), so the
// inter-node steps move a sub-block (<= chunk) and the intra-node rings walk their
// blocks in pieces of chunk: every step around a cycle moves at most chunkBytes.
//
// The node sum of block l is kept in the recv buffer (a RecvReduceCopy result, which
// the contract lets later steps rewrite); the op's pre-step is applied once, in phase 1
// (phase 2 when L == 1), and its post-step on the final value of phase 2 (phase 1 when
// N == 1). Non-uniform layouts are declined (the registry falls back to ring).
#include "algorithms/builders.h"
#include "algorithms/patterns/groups.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allReduceHier(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const RankLayout& layout = layoutOf(a);
  if (!layout.uniform()) return false;
  if (a.count == 0) return true;
  const int N = layout.nNodes, L = layout.ranksPerNode();
  const patterns::Group node = patterns::Group::nodeOf(layout, a.rank);   // position: l
  const patterns::Group peers = patterns::Group::peersOf(layout, a.rank); // position: node
  const int l = node.position();
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    if (N == 1 && L == 1) {
      w.copy(patterns::sendRegion(share), patterns::recvRegion(share), kPreOp | kPostOp);
      continue;
    }
    const uint64_t loopMax = chunk * uint64_t(L) * uint64_t(N);
    for (Range loop : patterns::Pieces(share, loopMax)) {
      // Block j of the loop: local rank j's part (empty blocks produce no steps).
      auto block = [&](int j) {
        Range r = patterns::evenPart(loop.count, L, j);
        r.offset += loop.offset;
        return r;
      };
      // Sub-block v of our block: node v's part in the inter-node ring.
      auto sub = [&](int v) {
        const Range b = block(l);
        Range r = patterns::evenPart(b.count, N, v);
        r.offset += b.offset;
        return r;
      };
      // 1. Intra-node reduce-scatter: our node's sum of block l into recv.
      if (L > 1)
        patterns::ringReduceScatter(
            w, node, [&](int j) { return patterns::sendRegion(block(j)); },
            patterns::recvRegion(block(l)), chunk, kPreOp, N == 1 ? kPostOp : 0);
      // 2. Inter-node all-reduce of block l (from the node sum, or our input if L == 1).
      if (N > 1)
        patterns::ringAllReduce(
            w, peers,
            [&](int v) {
              return L > 1 ? patterns::recvRegion(sub(v)) : patterns::sendRegion(sub(v));
            },
            [&](int v) { return patterns::recvRegion(sub(v)); }, chunk, L > 1 ? 0 : kPreOp,
            kPostOp);
      // 3. Intra-node all-gather of the completed blocks.
      if (L > 1)
        patterns::ringAllGather(w, node, patterns::recvRegion(block(l)),
                                [&](int j) { return patterns::recvRegion(block(j)); }, chunk);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
