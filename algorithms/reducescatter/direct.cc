// Direct (one-shot) reduce-scatter, for small messages: every rank sends block j of
// its send buffer straight to rank j, and reduces the blocks it receives (its own
// first, then the peers' in rank order) into its receive buffer.
#include "algorithms/builders.h"
#include "algorithms/patterns/direct.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool reduceScatterDirect(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const int n = a.nranks, r = a.rank;
  if (a.count == 0) return true;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    for (Range piece : patterns::Pieces(share, chunk)) {
      auto block = [&](int j) { return patterns::sendRegion(piece, uint64_t(j) * a.count); };
      const Region out = patterns::recvRegion(piece);
      for (int i = 0; i < n - 1; ++i) {
        const int to = patterns::directPeer(r, n, i);
        w.send(to, block(to), kPreOp);
      }
      w.copy(block(r), out, n == 1 ? kPreOp | kPostOp : kPreOp);
      int last = n - 1 == r ? n - 2 : n - 1;
      for (int k = 0; k < n; ++k)
        if (k != r) w.recvReduceCopy(k, out, out, k == last ? kPostOp : 0);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
