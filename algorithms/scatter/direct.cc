// Direct scatter: the root sends each peer its block (one program per peer, all
// concurrent) and copies its own; every other rank receives from the root.
//
// count is per rank: rank p's block is the root's send[p*count].
#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool scatterDirect(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    if (a.rank != a.root) {
      patterns::ProgramWriter w(plan, c);
      for (Range piece : patterns::Pieces(share, chunk)) w.recv(a.root, patterns::recvRegion(piece));
      continue;
    }
    if (!a.inPlace) {
      patterns::ProgramWriter w(plan, c);
      w.copy(patterns::sendRegion(share, uint64_t(a.root) * a.count),
             patterns::recvRegion(share));
    }
    for (int peer = 0; peer < a.nranks; ++peer) {
      if (peer == a.root) continue;
      patterns::ProgramWriter w(plan, c);
      for (Range piece : patterns::Pieces(share, chunk))
        w.send(peer, patterns::sendRegion(piece, uint64_t(peer) * a.count));
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
