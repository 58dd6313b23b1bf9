// All-gather by direct access, each rank writing its block everywhere: after a barrier
// rank r writes its send buffer into block r of every rank's output (its own included,
// unless in place); a second barrier keeps every output in place until it has been
// written. Memory traffic per rank for a block of B bytes: B read and nB written, the
// least an all-gather can do (busbw C * 2(n-1)/(n(n+1)): docs/performance.md), against
// peer_read's nB read and nB written.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool allGatherPeerPut(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const uint64_t c = a.count;
  const Region own{Buf::kSend, 0, c}, block{Buf::kRecv, uint64_t(a.rank) * c, c};
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();
    w.peerPut(kAllPeers, share(own), share(block));
    w.barrier();
  });
  return true;
}

}  // namespace builders
}  // namespace braid
