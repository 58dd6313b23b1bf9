// Broadcast by direct access: after a barrier every rank reads the root's send buffer
// into its output; a second barrier keeps the root's buffer in place until all have.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool broadcastPeerRead(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const Region all{Buf::kSend, 0, a.count}, out{Buf::kRecv, 0, a.count};
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();
    if (a.rank != a.root) w.peerCopy(a.root, share(all), share(out));
    else if (!a.inPlace) w.copy(share(all), share(out));
    w.barrier();
  });
  return true;
}

}  // namespace builders
}  // namespace braid
