// Direct (one-shot) broadcast, for small messages: the root sends every piece
// straight to every other rank.
#include "algorithms/builders.h"
#include "algorithms/patterns/direct.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool broadcastDirect(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const int n = a.nranks, r = a.rank, root = a.root;
  if (a.count == 0) return true;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    if (r == root && !a.inPlace) w.copy(patterns::sendRegion(share), patterns::recvRegion(share));
    for (Range piece : patterns::Pieces(share, chunk)) {
      if (r == root) {
        for (int i = 0; i < n - 1; ++i)
          w.send(patterns::directPeer(r, n, i), patterns::sendRegion(piece));
      } else {
        w.recv(root, patterns::recvRegion(piece));
      }
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
