// All-reduce by direct access, each rank reducing one chunk for everyone: after a
// barrier rank r reduces chunk r of every rank's input, in rank order (so every rank
// gets the same bits), and writes the result straight into chunk r of every rank's
// output; a second barrier keeps every input in place until it has been read and every
// output until it has been written. Memory traffic per rank for S bytes: S read and S
// written, the least an all-reduce can do (busbw C * 2(n-1)/n^2 where C is the copy
// rate: docs/performance.md), against two_shot's 2S read and the ring's 2(n-1) FIFO
// hops. One pass over the data, so it needs executors that can write into peers'
// buffers (peer pointers on GPUs; process_vm_writev between processes).
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allReduceReducePut(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const int n = a.nranks, r = a.rank;
  const uint64_t lo = a.count * uint64_t(r) / uint64_t(n);
  const Range mine{lo, a.count * uint64_t(r + 1) / uint64_t(n) - lo};
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();  // every input is there, every buffer announced
    w.peerReduce(share(patterns::sendRegion(mine)), share(patterns::recvRegion(mine)), kPostOp,
                 kAllPeers);
    w.barrier();  // every chunk written everywhere, no input read any more
  });
  return true;
}

}  // namespace builders
}  // namespace braid
