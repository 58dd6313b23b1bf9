// Direct ("one-shot") exchange patterns for small messages on few ranks: every rank
// sends its contribution straight to every rank that needs it and receives from every
// peer, so a collective costs one hop of latency instead of the ring's n-1 or 2(n-1).
// Reductions combine contributions in rank order 0, 1, ..., n-1 on every rank, so the
// ranks of an all-reduce agree bit for bit.
//
// Each piece of at most one chunk is sent to everyone before anything of it is
// received, inside one program: a piece fits in half a FIFO, so the sends never wait
// on a peer that is itself waiting to send (no deadlock), and in-place buffers are
// read before they are overwritten.
#pragma once
#include "algorithms/patterns/partition.h"

namespace braid {
namespace patterns {

/// The order in which rank `rank` of `n` sends a piece to its peers: rank+1, rank+2,
/// ..., wrapping (spreads the first arrivals over the ranks).
inline int directPeer(int rank, int n, int i) { return (rank + 1 + i) % n; }

}  // namespace patterns
}  // namespace braid
