// CollNet Chain all-reduce (NCCL's CollNetChain): the aggregation switch reduces across
// nodes. Per channel c one local rank is the node's head (local rank c mod L, so
// channels spread the heads); each node's ranks form a chain ending at its head:
//
//   up:   first -> ... -> head -> switch    (RecvReduceSend along the chain, own data
//                                            added at every hop, kPreOp)
//   down: switch -> head -> ... -> first    (RecvCopySend back along the chain)
//
// Up and down are two programs, so piece k+1 goes up while piece k comes down. The
// switch's result is final (the connection applies Avg's division), so no step carries
// kPostOp. Pieces are at most one chunk: the chains are no cycles, and the switch
// messages of all heads match (same channel share, same pieces).
#include "algorithms/builders.h"
#include "algorithms/patterns/groups.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/switch.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allReduceCollNetChain(const PlanArgs& a, const PlanParams& p, Plan* plan) {
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
    const int head = c % L;
    // Chain position: the head is last (L-1), the rank after it in ring order first.
    const int pos = ((l - head - 1) % L + L) % L;
    const int prev = pos > 0 ? node.at(head + pos) : -1;          // chain[pos-1]
    const int next = pos < L - 1 ? node.at(head + pos + 2) : kSwitchPeer;  // chain[pos+1]
    patterns::ProgramWriter up(plan, c), down(plan, c);
    for (Range piece : patterns::Pieces(share, chunk)) {
      const Region src = patterns::sendRegion(piece), dst = patterns::recvRegion(piece);
      if (pos == 0) up.send(next, src, kPreOp);
      else up.recvReduceSend(prev, next, src, kPreOp);
      const int from = pos == L - 1 ? kSwitchPeer : next;
      if (pos == 0) down.recv(from, dst);
      else down.recvCopySend(from, prev, dst);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
