// CollNet Direct all-reduce (NCCL's CollNetDirect): every local rank is a head for its
// share of the data, so all of a node's connections to the switch work at once.
// Nodes of L ranks, per channel, in loops of up to L * kSwitchDepth chunks:
//   1. intra-node reduce-scatter (ring over shm): local rank l ends with its node's sum
//      of block l of the loop;
//   2. block l goes through the switch group of local rank l (the ranks with local rank
//      l on every node) in pieces of at most a chunk, kSwitchDepth messages
//      outstanding: the result, final (Avg divided by the connection), replaces it;
//   3. intra-node all-gather of the L finished blocks.
// With L == 1 the input goes to the switch directly (kPreOp on the send).
#include "algorithms/builders.h"
#include "algorithms/patterns/groups.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/switch.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allReduceCollNetDirect(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const RankLayout* nodes = patterns::switchLayout(a);
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (!nodes || chunk == 0) return false;
  const RankLayout& layout = *nodes;
  plan->switchOp = SwitchOp::kAllReduce;
  if (a.count == 0) return true;
  const int L = layout.ranksPerNode();
  const patterns::Group node = patterns::Group::nodeOf(layout, a.rank);
  const int l = node.position();
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    const uint64_t loopMax = chunk * uint64_t(L) * patterns::kSwitchDepth;
    for (Range loop : patterns::Pieces(share, loopMax)) {
      auto block = [&](int j) {
        Range r = patterns::evenPart(loop.count, L, j);
        r.offset += loop.offset;
        return r;
      };
      const Range mine = block(l);
      if (L > 1)
        patterns::ringReduceScatter(
            w, node, [&](int j) { return patterns::sendRegion(block(j)); },
            patterns::recvRegion(mine), chunk, kPreOp, 0);
      std::vector<Range> pieces;
      for (Range piece : patterns::Pieces(mine, chunk))
        if (piece.count) pieces.push_back(piece);
      patterns::switchExchange(
          int(pieces.size()),
          [&](int k) {
            const Range& pc = pieces[size_t(k)];
            if (L > 1) w.send(kSwitchPeer, patterns::recvRegion(pc));
            else w.send(kSwitchPeer, patterns::sendRegion(pc), kPreOp);
          },
          [&](int k) { w.recv(kSwitchPeer, patterns::recvRegion(pieces[size_t(k)])); });
      if (L > 1)
        patterns::ringAllGather(w, node, patterns::recvRegion(mine),
                                [&](int j) { return patterns::recvRegion(block(j)); }, chunk);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
