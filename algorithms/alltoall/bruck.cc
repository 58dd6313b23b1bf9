// Bruck all-to-all: ceil(log2 n) rounds over the ring positions of the layout.
//
// Index i (1 .. n-1) of the rank at position q starts as its block for position q+i.
// Round k (d = 2^k) sends every index with bit k set to position q+d and receives the
// same indices from position q-d; after the last round index i holds the block that
// position q-i has for q, which goes to its place in recvbuff. Own blocks are a copy.
//
// Each index's current data is tracked rather than copied around: it starts in
// sendbuff (no rotation pass) and moves to the round's landing area of Buf::kScratch
// when received. A round's indices are sent straight from where they are when that is
// one contiguous region, and otherwise packed into a staging area of scratch first
// (local copies), so every round is one message per piece, not one per block. The
// receiver lands them in one contiguous region of the same size; exchangeRound
// (algorithms/patterns/exchange.h) then interleaves sends and receives piece by piece
// without deadlock. The staging area is rewritten every round: the executor copies
// scratch into the FIFO (never zero-copy) and a send step completes before the next
// step starts. Nothing writes recvbuff before the final copies, so in place works the
// same way (every index has been received into scratch by then).
//
// Scratch, per channel (its share s of every block, contiguous): a staging area of
// maxSet blocks, then one landing area per round of |indices with bit k set| blocks.
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/patterns/exchange.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

namespace {

/// Indices 1 .. n-1 with bit `d` set.
std::vector<int> indicesWith(int n, int d) {
  std::vector<int> out;
  for (int i = 1; i < n; ++i)
    if (i & d) out.push_back(i);
  return out;
}

}  // namespace

bool allToAllBruck(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  const RankLayout& layout = layoutOf(a);
  const int n = int(layout.ring.size());
  const int q = layout.ringPosition(a.rank);
  if (q < 0) return false;
  auto rankAt = [&](int position) { return layout.ring[size_t(((position % n) + n) % n)]; };
  // Scratch blocks per channel share: staging, then the landing areas.
  uint64_t maxSet = 0, landing = 0;
  for (int d = 1; d < n; d *= 2) {
    const uint64_t m = indicesWith(n, d).size();
    maxSet = m > maxSet ? m : maxSet;
    landing += m;
  }
  const uint64_t slots = maxSet + landing;
  plan->scratchElems = n > 1 ? a.count * slots : 0;

  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    const uint64_t s = share.count;
    const uint64_t base = share.offset * slots;  // this channel's part of scratch
    auto scratch = [&](uint64_t slot, uint64_t nblocks) {
      return Region{Buf::kScratch, base + slot * s, nblocks * s};
    };
    auto userBlock = [&](Buf buf, int rank) {
      return Region{buf, uint64_t(rank) * a.count + share.offset, s};
    };
    if (!a.inPlace) w.copy(userBlock(Buf::kSend, a.rank), userBlock(Buf::kRecv, a.rank));
    std::vector<Region> loc(size_t(n > 0 ? n : 1));
    for (int i = 1; i < n; ++i) loc[size_t(i)] = userBlock(Buf::kSend, rankAt(q + i));
    uint64_t nextLanding = maxSet;
    for (int d = 1; d < n; d *= 2) {
      const std::vector<int> idx = indicesWith(n, d);
      patterns::RegionStream out, in;
      for (int i : idx) out.add(loc[size_t(i)]);
      if (out.regions().size() > 1) {  // pack into the staging area, one copy per run
        size_t j = 0;
        for (const Region& from : out.regions()) {
          const uint64_t nblocks = from.count / s;
          w.copy(from, scratch(j, nblocks));
          j += nblocks;
        }
        out = patterns::RegionStream();
        out.add(scratch(0, idx.size()));
      }
      in.add(scratch(nextLanding, idx.size()));
      patterns::exchangeRound(w, rankAt(q + d), out, rankAt(q - d), in, chunk);
      for (size_t j = 0; j < idx.size(); ++j) loc[size_t(idx[j])] = scratch(nextLanding + j, 1);
      nextLanding += idx.size();
    }
    for (int i = 1; i < n; ++i) w.copy(loc[size_t(i)], userBlock(Buf::kRecv, rankAt(q - i)));
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
