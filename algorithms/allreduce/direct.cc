// Direct (one-shot) all-reduce, for small messages: every rank sends its whole
// contribution to every rank (itself included, except rank 0), then reduces the n
// contributions in rank order into its receive buffer.
//
//   for each piece (at most one chunk):
//     send own piece (pre-op applied) to ranks r+1, ..., r-1 and, unless r == 0, to r
//     out  = x_0            (rank 0: a local copy; others: received from rank 0)
//     out  = x_k op out     for k = 1 .. n-1 (received; the last step applies post-op)
#include "algorithms/builders.h"
#include "algorithms/patterns/direct.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allReduceDirect(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const int n = a.nranks, r = a.rank;
  if (a.count == 0) return true;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    for (Range piece : patterns::Pieces(share, chunk)) {
      const Region own = patterns::sendRegion(piece), out = patterns::recvRegion(piece);
      for (int i = 0; i < n - 1; ++i) w.send(patterns::directPeer(r, n, i), own, kPreOp);
      if (r != 0) w.send(r, own, kPreOp);  // to ourselves: our turn in the rank order
      if (r == 0) w.copy(own, out, n == 1 ? kPreOp | kPostOp : kPreOp);
      else w.recv(0, out);
      for (int k = 1; k < n; ++k) w.recvReduceCopy(k, out, out, k == n - 1 ? kPostOp : 0);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
