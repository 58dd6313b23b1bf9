// Rabenseifner all-reduce: recursive halving reduce-scatter, then recursive doubling
// all-gather, over the ring positions of the layout.
//
// With n not a power of two, p is the largest power of two below n and the first
// 2(n-p) positions fold in pairs: the even one of each pair sends its whole vector to
// the odd one (which combines it with its own), sits out, and gets the result back at
// the end. The p remaining participants are numbered v = 0 .. p-1.
//
// The vector is cut into p blocks. Reduce-scatter, masks m = 1, 2, ..., p/2: v
// exchanges with v ^ m, sends the half of its current block range it gives up and
// combines the half it keeps with what arrives (into the receive buffer); at the end v
// holds one block, fully reduced (the last combine applies the post-op). All-gather
// undoes the rounds in reverse order: v sends the blocks it holds to the round's
// partner and receives the half it gave away then, now final. Messages halve in the
// first phase and double in the second. Ascending masks put the biggest messages
// between the nearest ring positions (on several nodes: inside a node, as the ring
// runs node after node), and only the small last rounds cross nodes.
//
// Each exchange is one program alternating a send piece and a receive piece of at
// most chunkBytes each; the partner's pieces match ours (the same ranges), so a pair
// (or the fold's one-way transfer) cannot deadlock: a piece fits in half a FIFO, and
// whichever side is behind can always move. Every channel runs the whole algorithm on
// its own share of the data.
//
// Flags: a rank's own data (the send buffer) is read exactly once per element with
// kPreOp: by the fold's send or combine, or by the first exchange; later rounds read
// partial results from the receive buffer.
#include <algorithm>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

namespace {

/// One exchange with `peer`: send `out` (from `outBuf`), receive `in` and combine it
/// with `in` of `inSrc` into the receive buffer (reduce) or just store it (!reduce).
/// Sends and receives alternate piece by piece.
void exchange(patterns::ProgramWriter& w, int peer, Range out, Buf outBuf, uint8_t outFlags,
              Range in, Buf inSrc, uint8_t inFlags, bool reduce, uint64_t chunk) {
  const uint64_t nOut = (out.count + chunk - 1) / chunk, nIn = (in.count + chunk - 1) / chunk;
  for (uint64_t i = 0; i < std::max(nOut, nIn); ++i) {
    if (i < nOut) {
      const uint64_t off = out.offset + i * chunk;
      const Range piece{off, std::min(chunk, out.end() - off)};
      w.send(peer, Region{outBuf, piece.offset, piece.count}, outFlags);
    }
    if (i < nIn) {
      const uint64_t off = in.offset + i * chunk;
      const Range piece{off, std::min(chunk, in.end() - off)};
      const Region dst = patterns::recvRegion(piece);
      if (reduce) w.recvReduceCopy(peer, Region{inSrc, piece.offset, piece.count}, dst, inFlags);
      else w.recv(peer, dst);
    }
  }
}

/// Rabenseifner over `share` on one channel, for the rank at ring position `pos`.
void rabenseifnerShare(Plan* plan, const RankLayout& layout, int pos, Range share,
                       uint64_t chunk, size_t typeSize, int channel) {
  const int n = int(layout.ring.size());
  patterns::ProgramWriter w(plan, channel);
  if (n == 1) {
    w.copy(patterns::sendRegion(share), patterns::recvRegion(share), kPreOp | kPostOp);
    return;
  }
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  auto rankAt = [&](int position) { return layout.ring[size_t(position)]; };
  // Participant number of a position (-1: folded away), and back.
  auto vOf = [&](int q) { return q < 2 * extra ? (q % 2 ? q / 2 : -1) : q - extra; };
  auto posOfV = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };

  // Fold: the even position of a pair hands its data to the odd one.
  if (pos < 2 * extra && pos % 2 == 0) {
    const int partner = rankAt(pos + 1);
    for (Range piece : patterns::Pieces(share, chunk))
      w.send(partner, patterns::sendRegion(piece), kPreOp);
    for (Range piece : patterns::Pieces(share, chunk))
      w.recv(partner, patterns::recvRegion(piece));
    return;
  }
  const int v = vOf(pos);
  const bool folded = pos < 2 * extra;
  if (folded) {
    const int partner = rankAt(pos - 1);
    for (Range piece : patterns::Pieces(share, chunk))
      w.recvReduceCopy(partner, patterns::sendRegion(piece), patterns::recvRegion(piece),
                       kPreOp);
  }

  // Blocks: p near-equal parts of the share, cache-line granular.
  const uint64_t granule = typeSize < 64 ? 64 / typeSize : 1;
  auto blockStart = [&](int b) {
    return share.offset + (b < p ? patterns::evenPart(share.count, p, b, granule).offset
                                 : share.count);
  };
  auto blocks = [&](int from, int to) {
    return Range{blockStart(from), blockStart(to) - blockStart(from)};
  };

  // Reduce-scatter by recursive halving, nearest partner first.
  struct Round {
    int peer;
    Range give, keep;
  };
  std::vector<Round> rounds;
  int lo = 0, hi = p;
  bool first = !folded;  // own data still in the send buffer, pre-op not yet applied
  for (int m = 1; m < p; m *= 2) {
    const int mid = lo + (hi - lo) / 2;
    const bool upper = (v & m) != 0;
    Round r{rankAt(posOfV(v ^ m)), upper ? blocks(lo, mid) : blocks(mid, hi), Range{}};
    if (upper) lo = mid;
    else hi = mid;
    r.keep = blocks(lo, hi);
    const Buf from = first ? Buf::kSend : Buf::kRecv;
    const uint8_t pre = first ? kPreOp : 0;
    exchange(w, r.peer, r.give, from, pre, r.keep, from,
             uint8_t(pre | (m == p / 2 ? kPostOp : 0)), true, chunk);
    rounds.push_back(r);
    first = false;
  }
  // All-gather by recursive doubling: the rounds undone, last first.
  for (auto it = rounds.rbegin(); it != rounds.rend(); ++it)
    exchange(w, it->peer, it->keep, Buf::kRecv, 0, it->give, Buf::kNone, 0, false, chunk);
  // Unfold: the result back to the even partner.
  if (folded) {
    const int partner = rankAt(pos - 1);
    for (Range piece : patterns::Pieces(share, chunk))
      w.send(partner, patterns::recvRegion(piece));
  }
}

}  // namespace

bool allReduceRabenseifner(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  const RankLayout& layout = layoutOf(a);
  const int pos = layout.ringPosition(a.rank);
  if (pos < 0) return false;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    rabenseifnerShare(plan, layout, pos, share, chunk, a.typeSize, c);
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
