// Reduce by direct access: after a barrier the root reduces every rank's send buffer,
// in rank order, into its output; a second barrier keeps the inputs in place until it
// has.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool reducePeerRead(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const Region in{Buf::kSend, 0, a.count}, out{Buf::kRecv, 0, a.count};
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();
    if (a.rank == a.root) w.peerReduce(share(in), share(out), kPostOp);
    w.barrier();
  });
  return true;
}

}  // namespace builders
}  // namespace braid
