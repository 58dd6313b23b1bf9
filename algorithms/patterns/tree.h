// Tree shapes shared by the tree plan builders: the double binary tree (two binary
// trees over the same positions, complementary so that a position that is a leaf in
// one tree is interior in the other wherever the rank count allows), and the
// topology-aware tree over a RankLayout (a double binary tree over the nodes' head
// ranks, with each node's other ranks in a chain below their head).
//
// The binary tree over n positions numbers position p with label x = p + 1 (tree 0)
// or x = (p + 1) % n + 1 (tree 1: shifted by one position) and links labels in order:
// with b the lowest set bit of x, x's children are x - b/2 and x + b' (b' the largest
// power of two <= b/2 with x + b' <= n); the root is the largest power of two <= n.
// Leaves are exactly the odd labels, so tree 0's leaves are the even positions and
// tree 1's the odd ones (and, when n is odd, position n-1 too: with an odd count one
// position must be a leaf in both). Depth is ceil(log2(n + 1)) - 1 at most.
#pragma once
#include <vector>

#include "algorithms/plan.h"

namespace braid {
namespace patterns {

/// A node's neighbours in one binary tree (-1: none).
struct BinaryTreeLinks {
  int parent = -1;
  int child[2] = {-1, -1};
  bool isLeaf() const { return child[0] < 0 && child[1] < 0; }
};

/// Position `pos`'s links in tree `tree` (0 or 1) of the double binary tree over
/// positions 0 .. n-1; links are positions too.
BinaryTreeLinks doubleBinaryTree(int n, int pos, int tree);

/// A rank's neighbours in a tree over ranks.
struct TreeLinks {
  int parent = -1;            ///< -1 at the root
  std::vector<int> children;  ///< at most 3: two binary-tree children, then the chain
};

/// Rank `rank`'s links in tree `tree` (0 or 1) over `layout`: with one node, the double
/// binary tree over layout.ring positions; with several, the double binary tree over
/// the nodes (each node's head is the first of its nodeRanks, and joins its parent
/// node's head) and each node's ranks in a chain head -> second -> ... -> last.
TreeLinks layoutTree(const RankLayout& layout, int rank, int tree);

}  // namespace patterns
}  // namespace braid
