// Hierarchical all-to-all for nodes of equal size (N nodes x L ranks), aggregating by
// node so that each rank talks to N-1 remote ranks instead of (N-1)*L:
//   1. inter-node: in round i, node v pairs with node (i - v) mod N (a symmetric
//      matching); rank (v, l) swaps with its peer (u, l) all L blocks meant for the
//      other node's ranks. The one meant for the peer itself is final; the others wait
//      in Buf::kScratch;
//   2. intra-node: in round j, local rank l pairs with (j - l) mod L; the two swap,
//      for every source node s, the block from (s, l) to the partner (their own, or
//      one staged in phase 1) and the block from (s, partner) to us.
// Every message stays on one node pair once, and a rank sends to (N-1) remote ranks.
//
// count is per peer: block p is send[p*count] and recv[p*count]. Each channel walks its
// share of every block in pieces of at most chunk elements, both phases per piece, so
// the scratch holds (N-1)*(L-1) pieces per channel, reused by every piece. Partners
// alternate send piece / receive piece, so at most two pieces are in flight on a
// connection (one FIFO), no rank waits on a partner outside its round, and in place a
// block is always sent before the piece received into the same place overwrites it.
// Out of place the inter-node sends run as a program of their own, ahead of the
// receives (a sender waits only on a receiver that is behind it, so no cycle forms).
// Non-uniform layouts are declined (the registry falls back to pairwise).
#include <algorithm>
#include <memory>

#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allToAllHier(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  const RankLayout& layout = layoutOf(a);
  if (!layout.uniform()) return false;
  if (a.count == 0) return true;
  const int N = layout.nNodes, L = layout.ranksPerNode();
  const int me = layout.nodeOf[size_t(a.rank)], l = layout.localRank[size_t(a.rank)];
  auto rankAt = [&](int v, int m) { return layout.nodeRanks[size_t(v)][size_t(m)]; };
  const uint64_t slot = std::min(chunk, a.count);  // scratch elements per staged piece
  const uint64_t perChannel = uint64_t(N - 1) * uint64_t(L - 1);
  if (perChannel) plan->scratchElems = uint64_t(p.nChannels) * perChannel * slot;
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    patterns::ProgramWriter w(plan, c);
    // Out of place, the inter-node sends only read the send buffer: a program of their
    // own streams them ahead (in place they must precede the receive into their block).
    patterns::ProgramWriter* interSends = &w;
    std::unique_ptr<patterns::ProgramWriter> ahead;
    if (!a.inPlace) {
      ahead = std::make_unique<patterns::ProgramWriter>(plan, c);
      interSends = ahead.get();
    }
    auto block = [&](Buf buf, int peer, Range piece) {
      return Region{buf, uint64_t(peer) * a.count + piece.offset, piece.count};
    };
    // Our own block (in place, it is already there).
    if (!a.inPlace) w.copy(block(Buf::kSend, a.rank, share), block(Buf::kRecv, a.rank, share));
    for (Range piece : patterns::Pieces(share, chunk)) {
      // The staged block from (u, l) to (me, m), u != me, m != l.
      auto staged = [&](int u, int m) {
        const uint64_t index = uint64_t(c) * perChannel +
                               uint64_t((u - me - 1 + N) % N) * uint64_t(L - 1) +
                               uint64_t((m - l - 1 + L) % L);
        return Region{Buf::kScratch, index * slot, piece.count};
      };
      // 1. Inter-node rounds: swap all blocks for the partner node with its rank l.
      for (int i = 0; i < N; ++i) {
        const int u = ((i - me) % N + N) % N;
        if (u == me) continue;
        const int peer = rankAt(u, l);
        for (int m = 0; m < L; ++m) {
          interSends->send(peer, block(Buf::kSend, rankAt(u, m), piece));  // ours for (u, m)
          w.recv(peer, m == l ? block(Buf::kRecv, peer, piece) : staged(u, m));  // for (me, m)
        }
      }
      // 2. Intra-node rounds: deliver what is meant for the partner, source node by node.
      for (int j = 0; j < L; ++j) {
        const int t = ((j - l) % L + L) % L;
        if (t == l) continue;
        const int peer = rankAt(me, t);
        for (int s = 0; s < N; ++s) {
          w.send(peer, s == me ? block(Buf::kSend, peer, piece) : staged(s, t));  // (s,l)->(me,t)
          w.recv(peer, block(Buf::kRecv, rankAt(s, t), piece));                   // (s,t)->us
        }
      }
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
