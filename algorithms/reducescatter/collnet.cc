// CollNet reduce-scatter: the switch reduces across nodes. Nodes of L ranks; switch
// group l = the ranks with local rank l on every node (members in node order). Each
// switch message is N pieces, piece v for the group's member on node v, so the switch
// hands every member its own piece, reduced over the nodes. Per channel share of the
// per-rank count, in pieces of at most chunk / N elements:
//   1. intra-node reduce-scatter (ring over shm) per node v: local rank l ends with its
//      node's sum of the piece of rank nodeRanks[v][l], written into scratch so that
//      the N pieces of one message lie side by side (a group of one copies, applying
//      kPreOp);
//   2. the message goes to the switch (kSwitchDepth outstanding) and the rank's own
//      piece, final, comes back into recv.
// Scratch holds kSwitchDepth messages per channel, reused in turn: a message's slot is
// written again only after it was sent (one program per channel).
#include "algorithms/builders.h"
#include "algorithms/patterns/groups.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/switch.h"

namespace braid {
namespace builders {

using patterns::Range;

bool reduceScatterCollNet(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const RankLayout* nodes = patterns::switchLayout(a);
  if (!nodes) return false;
  const RankLayout& layout = *nodes;
  const int N = layout.nNodes;
  const uint64_t piece = patterns::chunkElems(a, p) / uint64_t(N);
  if (piece == 0) return false;
  plan->switchOp = SwitchOp::kReduceScatter;
  if (a.count == 0) return true;
  const patterns::Group node = patterns::Group::nodeOf(layout, a.rank);
  const uint64_t msgElems = piece * uint64_t(N);
  const uint64_t perChannel = msgElems * patterns::kSwitchDepth;
  plan->scratchElems = perChannel * uint64_t(p.nChannels);
  auto scratch = [&](int c, int slot, int v, uint64_t count) {
    return Region{Buf::kScratch,
                  uint64_t(c) * perChannel + uint64_t(slot) * msgElems + uint64_t(v) * count,
                  count};
  };
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    std::vector<Range> pieces;
    for (Range pc : patterns::Pieces(share, piece)) pieces.push_back(pc);
    patterns::switchExchange(
        int(pieces.size()),
        [&](int k) {
          const Range pc = pieces[size_t(k)];
          const int slot = k % patterns::kSwitchDepth;
          for (int v = 0; v < N; ++v) {
            const std::vector<int>& ranks = layout.nodeRanks[size_t(v)];
            patterns::ringReduceScatter(
                w, node,
                [&](int j) { return patterns::sendRegion(pc, uint64_t(ranks[size_t(j)]) * a.count); },
                scratch(c, slot, v, pc.count), piece, kPreOp, 0);
          }
          w.send(kSwitchPeer, scratch(c, slot, 0, pc.count * uint64_t(N)));
        },
        [&](int k) { w.recv(kSwitchPeer, patterns::recvRegion(pieces[size_t(k)])); });
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
