// All-gather by direct access: after a barrier every rank reads every other rank's
// block from its send buffer into its own output (one copy per byte, no FIFO); a second
// barrier keeps the send buffers in place until every rank has read them.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool allGatherPeerRead(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const int n = a.nranks, r = a.rank;
  const uint64_t c = a.count;
  const Region own{Buf::kSend, 0, c};
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();
    if (!a.inPlace) w.copy(share(own), share(Region{Buf::kRecv, uint64_t(r) * c, c}));
    for (int i = 1; i < n; ++i) {
      const int q = (r + i) % n;
      w.peerCopy(q, share(own), share(Region{Buf::kRecv, uint64_t(q) * c, c}));
    }
    w.barrier();
  });
  return true;
}

}  // namespace builders
}  // namespace braid
