// Rank orders shared by the plan builders: the ring and the chains (pipelines)
// through it.
#pragma once

namespace braid {
namespace patterns {

/// The ring 0 -> 1 -> ... -> n-1 -> 0, seen from `rank`.
struct Ring {
  int nranks;
  int rank;
  int next() const { return (rank + 1) % nranks; }
  int prev() const { return (rank + nranks - 1) % nranks; }
  /// The block this rank sends at ring step `s` (0 .. 2n-2), when every rank starts by
  /// sending the block of its predecessor: after n-1 steps of reduce-and-pass-on, block
  /// `rank` is the one completed here (step n-1), and the all-gather half goes on
  /// forwarding each rank's completed block around.
  int reduceBlock(int s) const { return mod(rank - s - 1); }
  /// The block this rank sends at all-gather step `s` (0 .. n-1): its own at step 0,
  /// then what it received from its predecessor.
  int gatherBlock(int s) const { return mod(rank - s); }

 private:
  int mod(int x) const { return ((x % nranks) + nranks) % nranks; }
};

/// A chain of all ranks along the ring, starting at `first`: first, first+1, ...
/// Positions are 0 .. n-1; prev() of position 0 and next() of the last are -1.
struct Chain {
  int nranks;
  int rank;
  int first;
  int position() const { return (rank - first + nranks) % nranks; }
  bool isFirst() const { return position() == 0; }
  bool isLast() const { return position() == nranks - 1; }
  int prev() const { return isFirst() ? -1 : (rank + nranks - 1) % nranks; }
  int next() const { return isLast() ? -1 : (rank + 1) % nranks; }
};

}  // namespace patterns
}  // namespace braid
