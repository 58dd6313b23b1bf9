// Ring sub-patterns among a group of ranks (one node's ranks, or the ranks with the
// same local rank on every node), the building blocks of the hierarchical builders.
//
// A group is a list of ranks in ring order; member j owns block j. The caller
// describes where each block lives on this rank with a BlockFn (block index ->
// Region, with the same count for a given block on every member), and the writers
// below append the steps of one ring schedule to a program. Blocks are walked piece
// by piece: piece i of every block (elements [i*chunk, (i+1)*chunk) of it) goes
// around the ring before piece i+1, so every step moves at most `chunk` elements
// (the plan contract for steps around a cycle), and blocks of different sizes work.
//
//   patterns::Group node = patterns::Group::nodeOf(layout, rank);
//   patterns::ringReduceScatter(w, node, [&](int j) { return sendRegion(block(j)); },
//                               recvRegion(block(node.position())), chunk, kPreOp, 0);
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/patterns/program_writer.h"
#include "algorithms/plan.h"

namespace braid {
namespace patterns {

/// Block index (0 .. group size - 1) -> where that block lives on this rank.
using BlockFn = std::function<Region(int block)>;

/// A ring among some ranks, seen from one member.
class Group {
 public:
  /// `ranks` in ring order; `self` must be one of them.
  Group(std::vector<int> ranks, int self);
  /// The ranks of `rank`'s node, in the layout's intra-node order (position: local rank).
  static Group nodeOf(const RankLayout& layout, int rank);
  /// The ranks with `rank`'s local rank, one per node in node order (position: node).
  /// The layout must be uniform.
  static Group peersOf(const RankLayout& layout, int rank);

  int size() const { return int(ranks_.size()); }
  /// This rank's position, which is also the block it owns.
  int position() const { return pos_; }
  /// The member at position `p` (taken modulo the size).
  int at(int p) const { return ranks_[size_t(mod(p))]; }
  int next() const { return at(pos_ + 1); }
  int prev() const { return at(pos_ - 1); }
  /// The block sent at reduce step `s` (0 .. 2k-2; see patterns::Ring::reduceBlock).
  int reduceBlock(int s) const { return mod(pos_ - s - 1); }
  /// The block sent at all-gather step `s` (0 .. k-1): own first.
  int gatherBlock(int s) const { return mod(pos_ - s); }

 private:
  int mod(int x) const { return ((x % size()) + size()) % size(); }
  std::vector<int> ranks_;
  int pos_ = 0;
};

/// Elements [offset, offset + max) of `r` (clipped to it; count 0 past its end).
Region subRegion(Region r, uint64_t offset, uint64_t max);

/// Ring reduce-scatter among `g`: block j (this rank's operand: contrib(j)) is reduced
/// over all members and ends at member j, in `dst` (count of contrib(position())).
/// Every contribution step carries `contribFlags` (kPreOp when the operands are the
/// ranks' own inputs), the final step also `finalFlags` (kPostOp when the result is
/// final). A group of one copies its operand (skipped when nothing would change).
void ringReduceScatter(ProgramWriter& w, const Group& g, const BlockFn& contrib, Region dst,
                       uint64_t chunk, uint8_t contribFlags, uint8_t finalFlags);

/// Ring all-gather among `g`: member j's block ends at dst(j) on every member; this
/// rank's own block is read from `ownSrc` (which it must hold already; it is not
/// copied to dst(position())).
void ringAllGather(ProgramWriter& w, const Group& g, Region ownSrc, const BlockFn& dst,
                   uint64_t chunk);

/// Ring all-reduce among `g` (reduce-scatter then all-gather, fused): every block j
/// (operand contrib(j)) is reduced over all members and the result written to dst(j)
/// on every member. Flags as for ringReduceScatter. dst(j) may equal contrib(j).
void ringAllReduce(ProgramWriter& w, const Group& g, const BlockFn& contrib, const BlockFn& dst,
                   uint64_t chunk, uint8_t contribFlags, uint8_t finalFlags);

}  // namespace patterns
}  // namespace braid
