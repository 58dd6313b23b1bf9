// Direct (one-shot) all-gather, for small messages: every rank sends its block
// straight to every peer and receives every peer's block into place.
#include "algorithms/builders.h"
#include "algorithms/patterns/direct.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allGatherDirect(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const int n = a.nranks, r = a.rank;
  if (a.count == 0) return true;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    if (!a.inPlace)
      w.copy(patterns::sendRegion(share), patterns::recvRegion(share, uint64_t(r) * a.count));
    for (Range piece : patterns::Pieces(share, chunk)) {
      for (int i = 0; i < n - 1; ++i)
        w.send(patterns::directPeer(r, n, i), patterns::sendRegion(piece));
      for (int k = 0; k < n; ++k)
        if (k != r) w.recv(k, patterns::recvRegion(piece, uint64_t(k) * a.count));
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
