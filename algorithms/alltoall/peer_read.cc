// All-to-all by direct access: after a barrier rank r reads block r of every rank's send
// buffer into block q of its output. In place, the blocks it would overwrite are still
// read by their addressees, so the blocks go to scratch first and into the output after
// a second barrier (when every rank is done reading); out of place a second barrier keeps
// the send buffers in place until they have been read.
#include "algorithms/builders.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

bool allToAllPeerRead(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  if (!a.peerAccess) return false;
  if (a.count == 0) return true;  // nothing to move: no steps (on every rank alike)
  const int n = a.nranks, r = a.rank;
  const uint64_t c = a.count;
  auto block = [&](Buf b, int q) { return Region{b, uint64_t(q) * c, c}; };
  if (a.inPlace && n > 1) plan->scratchElems = uint64_t(n) * c;
  patterns::forEachShare(plan, a, p, [&](patterns::ProgramWriter& w, auto share) {
    w.barrier();
    if (!a.inPlace) w.copy(share(block(Buf::kSend, r)), share(block(Buf::kRecv, r)));
    const Buf into = a.inPlace ? Buf::kScratch : Buf::kRecv;
    for (int i = 1; i < n; ++i) {
      const int q = (r + i) % n;
      w.peerCopy(q, share(block(Buf::kSend, r)), share(block(into, q)));
    }
    w.barrier();
    if (a.inPlace)
      for (int i = 1; i < n; ++i) {
        const int q = (r + i) % n;
        w.copy(share(block(Buf::kScratch, q)), share(block(Buf::kRecv, q)));
      }
  });
  return true;
}

}  // namespace builders
}  // namespace braid
