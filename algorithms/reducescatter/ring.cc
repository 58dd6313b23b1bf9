// Ring reduce-scatter: block b is reduced along n-1 hops of the ring, ending at rank b.
//
// count is the per-rank result; send holds n blocks of count, block b at
// send[b*count]. Each channel takes its share of every block and walks it in chunks;
// for each chunk every rank starts its predecessor's piece, adds its contribution to
// the pieces passing by, and completes its own.
#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/ring.h"

namespace braid {
namespace builders {

using patterns::Range;

bool reduceScatterRing(const PlanArgs& a, const PlanParams& p, Plan* plan) {
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
    if (n == 1) {
      w.copy(patterns::sendRegion(share), patterns::recvRegion(share), kPreOp | kPostOp);
      continue;
    }
    for (Range piece : patterns::Pieces(share, chunk)) {
      auto own = [&](int s) {
        return patterns::sendRegion(piece, uint64_t(ring.reduceBlock(s)) * a.count);
      };
      // Step 0: push our contribution to our predecessor's block.
      w.send(next, own(0), kPreOp);
      // Steps 1 .. n-2: add our contribution to what arrives and pass it on.
      for (int s = 1; s <= n - 2; ++s) w.recvReduceSend(prev, next, own(s), kPreOp);
      // Step n-1: our own block receives its last contribution: final.
      w.recvReduceCopy(prev, own(n - 1), patterns::recvRegion(piece), kPreOp | kPostOp);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
