// Exchange rounds for the log-round builders (Bruck): a rank sends a list of regions to
// one peer while it receives a list of regions from another (or the same) peer, every
// rank doing the same in the same round.
//
// Both lists are streams: their regions are read (or written) in order as one sequence
// of elements. A round cuts each region into pieces of at most `chunk` elements and
// alternates sending piece i of its out-stream and receiving piece i of its in-stream.
// A sender's out-stream and its receiver's in-stream must consist of regions of the
// same sizes (builders arrange that by using the same offsets on both sides), so piece
// i is one step of the same size on both: then a round cannot deadlock around the
// cycle its connections form. The rank furthest behind, sending piece i, finds every
// earlier piece consumed and one step of at most chunkBytes fits in an empty FIFO;
// receiving piece i, its sender is at piece i or past it and so has sent it or can.
#pragma once
#include <cstdint>
#include <vector>

#include "algorithms/patterns/program_writer.h"
#include "algorithms/plan.h"

namespace braid {
namespace patterns {

/// An ordered list of regions read or written as one sequence of elements.
class RegionStream {
 public:
  /// Appends `r` (dropped when empty; merged with the last region when it continues it).
  void add(Region r);
  /// Elements in the stream.
  uint64_t count() const { return count_; }
  /// The regions, contiguous neighbours merged.
  const std::vector<Region>& regions() const { return regions_; }

 private:
  std::vector<Region> regions_;
  uint64_t count_ = 0;
};

/// Appends one round to `w`: `out` goes to rank `to` and `in` comes from rank `from`,
/// alternating pieces of at most `chunk` elements (send piece i, then receive piece i);
/// a piece never spans two regions (see above: the peers' region sizes must match).
void exchangeRound(ProgramWriter& w, int to, const RegionStream& out, int from,
                   const RegionStream& in, uint64_t chunk);

}  // namespace patterns
}  // namespace braid
