// Rank orders shared by the plan builders: the ring and the chains (pipelines)
// through it.
//
// The ring visits the ranks in RankLayout::ring order (node after node), so it crosses
// each node boundary once; a flat layout gives the identity ring 0 -> 1 -> ... -> n-1.
// Blocks keep their owners whatever the order: the helpers below name blocks by rank.
#pragma once
#include <vector>

#include "algorithms/plan.h"

namespace braid {
namespace patterns {

/// The ring through all ranks, seen from one rank.
class Ring {
 public:
  /// The identity ring 0 -> 1 -> ... -> n-1 -> 0.
  Ring(int nranks, int rank) : rank_(rank) {
    order_.resize(size_t(nranks > 0 ? nranks : 0));
    for (int i = 0; i < nranks; ++i) order_[size_t(i)] = i;
    pos_ = rank;
  }
  /// The ring of `layout` (layout.ring); the identity ring if that is not a permutation
  /// containing `rank`.
  Ring(const RankLayout& layout, int rank) : Ring(int(layout.nodeOf.size()), rank) {
    const int n = size();
    std::vector<char> seen(size_t(n), 0);
    int pos = -1;
    bool ok = int(layout.ring.size()) == n;
    for (int i = 0; ok && i < n; ++i) {
      const int r = layout.ring[size_t(i)];
      ok = r >= 0 && r < n && !seen[size_t(r)];
      if (ok) seen[size_t(r)] = 1;
      if (r == rank) pos = i;
    }
    if (ok && pos >= 0) {
      order_ = layout.ring;
      pos_ = pos;
    }
  }
  /// The ring of the call's layout (layoutOf(args)), seen from args.rank.
  static Ring of(const PlanArgs& args) { return Ring(layoutOf(args), args.rank); }

  int size() const { return int(order_.size()); }
  int rank() const { return rank_; }
  /// This rank's position (0 .. n-1).
  int position() const { return pos_; }
  /// The rank at ring position `p` (any integer, taken modulo n).
  int at(int p) const { return order_[size_t(mod(p))]; }
  /// The position of `rank` (-1 if none).
  int positionOf(int rank) const {
    for (int i = 0; i < size(); ++i)
      if (order_[size_t(i)] == rank) return i;
    return -1;
  }
  int next() const { return at(pos_ + 1); }
  int prev() const { return at(pos_ - 1); }
  /// The block (named by the rank that owns it) this rank sends at ring step `s`
  /// (0 .. 2n-2), when every rank starts by sending the block of its predecessor: after
  /// n-1 steps of reduce-and-pass-on, this rank's own block is the one completed here
  /// (step n-1), and the all-gather half goes on forwarding each completed block.
  int reduceBlock(int s) const { return at(pos_ - s - 1); }
  /// The block (named by its owner) this rank sends at all-gather step `s` (0 .. n-1):
  /// its own at step 0, then what it received from its predecessor.
  int gatherBlock(int s) const { return at(pos_ - s); }

 private:
  int mod(int x) const {
    const int n = size();
    return ((x % n) + n) % n;
  }
  std::vector<int> order_;  ///< position -> rank
  int rank_ = 0;
  int pos_ = 0;
};

/// A chain of all ranks along the ring, starting at rank `first`: first, the ring's
/// next rank after it, ... Positions are 0 .. n-1; prev() of position 0 and next() of
/// the last are -1.
class Chain {
 public:
  Chain(const Ring& ring, int first) : ring_(ring), firstPos_(ring.positionOf(first)) {
    if (firstPos_ < 0) firstPos_ = 0;
  }
  /// The identity ring's chain (0, 1, ..., n-1 rotated to start at `first`).
  Chain(int nranks, int rank, int first) : Chain(Ring(nranks, rank), first) {}
  /// The chain along `ring` that ends at rank `last` (starts just after it).
  static Chain endingAt(const Ring& ring, int last) {
    return Chain(ring, ring.at(ring.positionOf(last) + 1));
  }

  int position() const {
    const int n = ring_.size();
    return ((ring_.position() - firstPos_) % n + n) % n;
  }
  bool isFirst() const { return position() == 0; }
  bool isLast() const { return position() == ring_.size() - 1; }
  int prev() const { return isFirst() ? -1 : ring_.prev(); }
  int next() const { return isLast() ? -1 : ring_.next(); }

 private:
  Ring ring_;
  int firstPos_;
};

}  // namespace patterns
}  // namespace braid
