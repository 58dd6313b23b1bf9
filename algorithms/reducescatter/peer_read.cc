// Reduce-scatter by direct access: after a barrier rank r reduces block r of every
// rank's send buffer, in rank order, into its output; a second barrier keeps the inputs
// in place until every rank has read its block.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool reduceScatterPeerRead(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const uint64_t c = a.count;
  const Region in{Buf::kSend, uint64_t(a.rank) * c, c}, out{Buf::kRecv, 0, c};
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();
    w.peerReduce(share(in), share(out), kPostOp);
    w.barrier();
  });
  return true;
}

}  // namespace builders
}  // namespace braid
