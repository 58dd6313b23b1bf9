// Direct (one-shot) reduce, for small messages: every rank sends its contribution
// straight to the root, which reduces them (its own first, then the others in rank
// order) into its receive buffer.
#include "algorithms/builders.h"
#include "algorithms/patterns/direct.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool reduceDirect(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const int n = a.nranks, r = a.rank, root = a.root;
  if (a.count == 0) return true;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    for (Range piece : patterns::Pieces(share, chunk)) {
      const Region own = patterns::sendRegion(piece), out = patterns::recvRegion(piece);
      if (r != root) {
        w.send(root, own, kPreOp);
        continue;
      }
      w.copy(own, out, n == 1 ? kPreOp | kPostOp : kPreOp);
      const int last = root == n - 1 ? n - 2 : n - 1;
      for (int k = 0; k < n; ++k)
        if (k != root) w.recvReduceCopy(k, out, out, k == last ? kPostOp : 0);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
