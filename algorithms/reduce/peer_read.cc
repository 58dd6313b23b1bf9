// Reduce by direct access: after a barrier the root reduces every rank's send buffer,
// in rank order, into its output; a second barrier keeps the inputs in place until it
// has.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool reducePeerRead(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  (void)p;
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  patterns::ProgramWriter w(plan, 0);
  w.barrier();
  if (a.rank == a.root)
    w.peerReduce(Region{Buf::kSend, 0, a.count}, Region{Buf::kRecv, 0, a.count}, kPostOp);
  w.barrier();
  return true;
}

}  // namespace builders
}  // namespace braid
