// Two-shot all-reduce by direct access (no connections; the executor gives every rank
// the others' buffers: the flag board on one host, peer pointers on GPUs). After a
// barrier, rank r reduces chunk r of every rank's input, in rank order (so every rank
// holds the same bits), into its own output; after a second barrier every rank copies
// the other chunks from their owners' outputs; a third keeps every output in place
// until it has been read. Memory traffic per rank: n chunks read and one written, then
// n-1 read and written: about 2S read and S written for S bytes, against the ring's
// 2(n-1) FIFO hops. (reduce_put.cc writes the reduced chunks straight into every
// output instead: S read and S written, one barrier less.)
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allReduceTwoShot(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const int n = a.nranks, r = a.rank;
  auto chunk = [&](int q) {
    const uint64_t lo = a.count * uint64_t(q) / uint64_t(n);
    return Range{lo, a.count * uint64_t(q + 1) / uint64_t(n) - lo};
  };
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();  // every input is there, every buffer announced
    w.peerReduce(share(patterns::sendRegion(chunk(r))), share(patterns::recvRegion(chunk(r))),
                 kPostOp);
    w.barrier();  // every chunk is final at its owner
    for (int i = 1; i < n; ++i) {
      const int q = (r + i) % n;
      w.peerCopy(q, share(patterns::recvRegion(chunk(q))), share(patterns::recvRegion(chunk(q))));
    }
    w.barrier();  // nobody's output is read any more
  });
  return true;
}

}  // namespace builders
}  // namespace braid
