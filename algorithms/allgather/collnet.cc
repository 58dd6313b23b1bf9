// CollNet all-gather: the switch gathers across nodes. Nodes of L ranks; the ranks
// with local rank l on every node form switch group l. Per channel, in loops of up to
// kSwitchDepth chunks of each rank's block:
//   1. every rank sends its piece to the switch and receives the pieces of its whole
//      group, one per node in node order, straight into their places in recv;
//   2. intra-node all-gather (ring over shm): local rank l passes on the N pieces of
//      its group, so every rank ends with all N * L.
// The switch carries each byte across the network once per node (a ring: N-1 times).
#include "algorithms/builders.h"
#include "algorithms/patterns/groups.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/switch.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allGatherCollNet(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const RankLayout* nodes = patterns::switchLayout(a);
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (!nodes || chunk == 0) return false;
  const RankLayout& layout = *nodes;
  plan->switchOp = SwitchOp::kAllGather;
  if (a.count == 0) return true;
  const int N = layout.nNodes, L = layout.ranksPerNode();
  const patterns::Group node = patterns::Group::nodeOf(layout, a.rank);
  const int l = node.position();
  // Where rank r's block lives in recv.
  auto blockOf = [&](int r, Range piece) {
    return patterns::recvRegion(piece, uint64_t(r) * a.count);
  };
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    for (Range loop : patterns::Pieces(share, chunk * patterns::kSwitchDepth)) {
      std::vector<Range> pieces;
      for (Range piece : patterns::Pieces(loop, chunk)) pieces.push_back(piece);
      patterns::switchExchange(
          int(pieces.size()),
          [&](int k) { w.send(kSwitchPeer, patterns::sendRegion(pieces[size_t(k)])); },
          [&](int k) {
            for (int v = 0; v < N; ++v)
              w.recv(kSwitchPeer, blockOf(layout.nodeRanks[size_t(v)][size_t(l)],
                                          pieces[size_t(k)]));
          });
      if (L > 1)
        for (int v = 0; v < N; ++v) {
          const std::vector<int>& ranks = layout.nodeRanks[size_t(v)];
          patterns::ringAllGather(w, node, blockOf(ranks[size_t(l)], loop),
                                  [&](int j) { return blockOf(ranks[size_t(j)], loop); },
                                  chunk);
        }
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
