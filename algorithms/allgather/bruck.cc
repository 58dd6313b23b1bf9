// Bruck all-gather: ceil(log2 n) rounds over the ring positions of the layout.
//
// Before round k the rank at position q holds the blocks of positions q .. q+2^k-1; in
// round k it sends the first min(2^k, n-2^k) of them to position q-2^k and receives as
// many from position q+2^k (those of positions q+2^k ...). Blocks are tracked by their
// absolute position, so every block lands directly at its final place in recvbuff
// (block of rank b at b*count) and no rotation pass is needed; a range of positions
// that wraps (or whose ranks are not consecutive) is simply several regions.
//
// The own block goes from sendbuff in round 0 and is copied to its place first (out of
// place); later rounds read everything from recvbuff. Sender and receiver therefore
// name a round's blocks by the same recvbuff offsets, split alike, as exchangeRound
// (algorithms/patterns/exchange.h) needs to interleave the round's sends and receives
// piece by piece without deadlock. Every channel moves its share of every block.
#include "algorithms/builders.h"
#include "algorithms/patterns/exchange.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allGatherBruck(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  const RankLayout& layout = layoutOf(a);
  const int n = int(layout.ring.size());
  const int q = layout.ringPosition(a.rank);
  if (q < 0) return false;
  auto rankAt = [&](int position) { return layout.ring[size_t(((position % n) + n) % n)]; };
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    // Block of position t: its rank's block of recvbuff (this channel's share of it).
    auto block = [&](int t) { return patterns::recvRegion(share, uint64_t(rankAt(t)) * a.count); };
    if (!a.inPlace) w.copy(patterns::sendRegion(share), block(q));
    for (int d = 1; d < n; d *= 2) {  // round k: d = 2^k
      const int cnt = d < n - d ? d : n - d;
      patterns::RegionStream out, in;
      if (d == 1) out.add(patterns::sendRegion(share));
      for (int i = 0; i < cnt; ++i) {
        if (d > 1) out.add(block(q + i));
        in.add(block(q + d + i));
      }
      patterns::exchangeRound(w, rankAt(q - d), out, rankAt(q + d), in, chunk);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
