// Partitioning maths shared by the plan builders: how a buffer is split across
// channels, into loops, and into per-rank chunks within a loop.
#pragma once
#include <cstdint>

#include "algorithms/plan.h"

namespace braid {
namespace patterns {

/// Elements [offset, offset+count) of some index space.
struct Range {
  uint64_t offset = 0;
  uint64_t count = 0;
  uint64_t end() const { return offset + count; }
};

/// Part `i` of `parts` near-equal parts of [0, count). Part sizes are multiples of
/// `granule` elements except where the total runs out, so some trailing parts may be
/// empty when count is small. Parts are contiguous and in order.
Range evenPart(uint64_t count, int parts, int i, uint64_t granule = 1);

/// Elements a step may move around a cycle: chunkBytes / typeSize, or 0 if even one
/// element does not fit (the builder then reports "unsupported").
uint64_t chunkElems(const PlanArgs& args, const PlanParams& params);

/// The share of [0, count) that channel `c` of `nChannels` handles. Shares are
/// aligned to 64 bytes so channels never split a cache line.
Range channelShare(uint64_t count, size_t typeSize, int nChannels, int c);

/// Iterates the consecutive pieces of at most `maxCount` elements covering a range:
///   for (Range piece : Pieces(share, chunk)) ...
class Pieces {
 public:
  Pieces(Range whole, uint64_t maxCount) : whole_(whole), max_(maxCount ? maxCount : 1) {}
  class Iter {
   public:
    Iter(const Pieces* p, uint64_t at) : p_(p), at_(at) {}
    Range operator*() const {
      uint64_t left = p_->whole_.end() - at_;
      return Range{at_, left < p_->max_ ? left : p_->max_};
    }
    Iter& operator++() {
      at_ += (**this).count;
      return *this;
    }
    bool operator!=(const Iter& o) const { return at_ != o.at_; }

   private:
    const Pieces* p_;
    uint64_t at_;
  };
  Iter begin() const { return Iter(this, whole_.offset); }
  Iter end() const { return Iter(this, whole_.end()); }

 private:
  Range whole_;
  uint64_t max_;
};

}  // namespace patterns
}  // namespace braid
