// Pipelined chain reduce along the ring, ending at the root (patterns/ring.h: the
// layout's ring order; root+1 -> root+2 -> ... -> root on one node), chunk by chunk.
//
// The first rank sends its contribution, each next rank adds its own and passes the
// partial result on, and the root adds the last contribution into its recv buffer.
// Every rank applies the op's pre-step to its own input exactly once; only the root
// writes its recv buffer.
#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/ring.h"

namespace braid {
namespace builders {

using patterns::Range;

bool reduceChain(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  const int n = a.nranks;
  const patterns::Chain chain = patterns::Chain::endingAt(patterns::Ring::of(a), a.root);
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    if (n == 1) {
      w.copy(patterns::sendRegion(share), patterns::recvRegion(share), kPreOp | kPostOp);
      continue;
    }
    for (Range piece : patterns::Pieces(share, chunk)) {
      const Region own = patterns::sendRegion(piece);
      if (chain.isFirst())
        w.send(chain.next(), own, kPreOp);  // start the partial result
      else if (chain.isLast())
        w.recvReduceCopy(chain.prev(), own, patterns::recvRegion(piece),
                         kPreOp | kPostOp);  // root: final value
      else
        w.recvReduceSend(chain.prev(), chain.next(), own, kPreOp);  // add, pass on
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
