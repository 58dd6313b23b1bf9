// Ring all-reduce: a ring reduce-scatter followed by a ring all-gather, in loops.
//
// Each channel takes its own share of the buffer and walks it in loops of up to
// nranks * chunk elements; a loop is cut into nranks blocks and every block travels
// the ring twice: once being reduced (n-1 hops), once being distributed (n-1 hops).
// Every step moves one block of at most `chunk` elements, so a loop never holds more
// than chunkBytes per connection in flight. The ring follows the layout (node after
// node); blocks are named by the rank whose ring position completes them.
#include <algorithm>

#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/ring.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allReduceRing(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const int n = a.nranks;
  if (a.count == 0) return true;
  if (n == 1) {
    // A copy, shared among the channels like the ring's blocks (on a GPU each channel
    // is a block: one block alone copies at a fortieth of the memory's speed).
    for (int c = 0; c < p.nChannels; ++c) {
      const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
      if (share.count == 0) continue;
      patterns::ProgramWriter w(plan, c);
      w.copy(patterns::sendRegion(share), patterns::recvRegion(share), kPreOp | kPostOp);
    }
    return true;
  }
  const patterns::Ring ring = patterns::Ring::of(a);  // layout order
  const int next = ring.next(), prev = ring.prev();
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    const uint64_t loopMax = chunk * uint64_t(n);
    for (Range loop : patterns::Pieces(share, loopMax)) {
      // Block b of this loop (empty blocks produce no steps, on every rank alike).
      auto block = [&](int b) {
        Range r = patterns::evenPart(loop.count, n, b);
        r.offset += loop.offset;
        return r;
      };
      auto own = [&](int s) { return patterns::sendRegion(block(ring.reduceBlock(s))); };
      auto out = [&](int s) { return patterns::recvRegion(block(ring.reduceBlock(s))); };

      // Step 0: push our contribution of one block to the next rank.
      w.send(next, own(0), kPreOp);
      // Steps 1 .. n-2: add our contribution to what arrives and pass it on.
      for (int s = 1; s <= n - 2; ++s) w.recvReduceSend(prev, next, own(s), kPreOp);
      // Step n-1: the last contribution: the block (our own) is final; keep and forward.
      w.recvReduceCopySend(prev, next, own(n - 1), out(n - 1), kPreOp | kPostOp);
      // Steps n .. 2n-3: copy final blocks as they arrive and pass them on.
      for (int s = n; s <= 2 * n - 3; ++s) w.recvCopySend(prev, next, out(s));
      // Step 2n-2: the last final block ends here.
      w.recv(prev, out(2 * n - 2));
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
