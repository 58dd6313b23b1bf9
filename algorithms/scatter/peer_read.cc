// Scatter by direct access: after a barrier every rank reads its block of the root's
// send buffer; a second barrier keeps the root's buffer in place until all have.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool scatterPeerRead(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const uint64_t c = a.count;
  const Region mine{Buf::kSend, uint64_t(a.rank) * c, c}, out{Buf::kRecv, 0, c};
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();
    if (a.rank != a.root) w.peerCopy(a.root, share(mine), share(out));
    else if (!a.inPlace) w.copy(share(mine), share(out));
    w.barrier();
  });
  return true;
}

}  // namespace builders
}  // namespace braid
