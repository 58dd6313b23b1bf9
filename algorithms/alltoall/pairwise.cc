// Pairwise all-to-all: at round i (1 .. n-1) rank r sends its block for (r+i)%n and
// receives the block from (r-i+n)%n; its own block is a local copy.
//
// Sends and receives run as two concurrent programs per channel rather than one
// program alternating send/recv pieces. That cannot deadlock with any FIFO geometry:
// take the earliest round any unfinished program is in; if it is a sender's, its
// receiver has not finished that round either, so it is reading exactly that stream;
// if it is a receiver's, its sender is past that round, so all its bytes are there.
// It also lets round i+1's sends start while round i's data is still arriving.
// Connection steps are cut into chunks like every builder's (plan.h contract).
//
// In place (send == recv), those rounds would overwrite a block before it is sent, so
// the schedule becomes a pairwise exchange: at round i, rank r pairs with p = (i-r)%n
// (symmetric: p pairs with r), and the two swap block p / block r piece by piece, each
// sending a piece of the block before receiving into that same piece. Every pair meets
// in exactly one round; with pieces of at most chunkBytes (half a FIFO) a pair cannot
// block, and the earliest round in progress always has both members in it.
//
// count is per peer: block p is send[p*count] and recv[p*count].
#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool allToAllPairwise(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  const int n = a.nranks, r = a.rank;
  auto base = [&](int peer) { return uint64_t(peer) * a.count; };
  for (int c = 0; c < p.nChannels; ++c) {
    const Range share = patterns::channelShare(a.count, a.typeSize, p.nChannels, c);
    if (share.count == 0) continue;
    if (a.inPlace) {
      patterns::ProgramWriter w(plan, c);
      for (int i = 0; i < n; ++i) {
        const int peer = ((i - r) % n + n) % n;
        if (peer == r) continue;  // our own block is already in place
        for (Range piece : patterns::Pieces(share, chunk)) {
          w.send(peer, patterns::sendRegion(piece, base(peer)));
          w.recv(peer, patterns::recvRegion(piece, base(peer)));
        }
      }
      continue;
    }
    patterns::ProgramWriter sends(plan, c);
    patterns::ProgramWriter recvs(plan, c);
    // Round 0: our own block.
    sends.copy(patterns::sendRegion(share, base(r)), patterns::recvRegion(share, base(r)));
    // Rounds 1 .. n-1: one peer out, one peer in.
    for (int i = 1; i < n; ++i) {
      const int to = (r + i) % n, from = (r - i + n) % n;
      for (Range piece : patterns::Pieces(share, chunk)) {
        sends.send(to, patterns::sendRegion(piece, base(to)));
        recvs.recv(from, patterns::recvRegion(piece, base(from)));
      }
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
