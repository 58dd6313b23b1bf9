// Pipelined chain broadcast from the root along the ring (patterns/ring.h: the
// layout's ring order; root -> root+1 -> ... on one node), chunk by chunk.
//
// The root sends each chunk from its send buffer; middle ranks keep a copy and pass it
// on; the last rank only keeps it. Out of place, the root also copies send -> recv.
#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/ring.h"

namespace braid {
namespace builders {

using patterns::Range;

bool broadcastChain(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  const patterns::Chain chain(patterns::Ring::of(a), a.root);  // along the layout ring
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    if (chain.isFirst() && !a.inPlace)
      w.copy(patterns::sendRegion(share), patterns::recvRegion(share));
    if (a.nranks == 1) continue;
    for (Range piece : patterns::Pieces(share, chunk)) {
      if (chain.isFirst())
        w.send(chain.next(), patterns::sendRegion(piece));  // root: push
      else if (chain.isLast())
        w.recv(chain.prev(), patterns::recvRegion(piece));  // tail: keep
      else
        w.recvCopySend(chain.prev(), chain.next(), patterns::recvRegion(piece));  // keep, pass
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
