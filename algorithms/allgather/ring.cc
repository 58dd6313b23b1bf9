// Ring all-gather: every rank's block travels n-1 hops around the ring.
//
// count is the per-rank block; rank b's block lands at recv[b*count]. Each channel
// takes its share of every block and walks it in chunks; for each chunk every rank
// sends its own piece, then forwards the pieces of its predecessors.
#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/ring.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allGatherRing(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const int n = a.nranks;
  if (a.count == 0) return true;
  const patterns::Ring ring = patterns::Ring::of(a);  // layout order
  const int next = ring.next(), prev = ring.prev();
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    // Our own block into place (in place, it already is).
    if (!a.inPlace)
      w.copy(patterns::sendRegion(share),
             patterns::recvRegion(share, uint64_t(a.rank) * a.count));
    if (n == 1) continue;
    for (Range piece : patterns::Pieces(share, chunk)) {
      auto out = [&](int s) {
        return patterns::recvRegion(piece, uint64_t(ring.gatherBlock(s)) * a.count);
      };
      // Step 0: push our own piece to the next rank.
      w.send(next, patterns::sendRegion(piece));
      // Steps 1 .. n-2: keep and forward our predecessors' pieces.
      for (int s = 1; s <= n - 2; ++s) w.recvCopySend(prev, next, out(s));
      // Step n-1: the piece of our successor ends here.
      w.recv(prev, out(n - 1));
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
