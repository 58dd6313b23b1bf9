#include "algorithms/patterns/tree.h"

namespace braid {
namespace patterns {
namespace {

int lowBit(int x) { return x & -x; }

/// Label (1 .. n) of position `pos` in tree `tree`, and back.
int labelOf(int n, int pos, int tree) { return (tree == 0 ? pos : (pos + 1) % n) + 1; }
int positionOf(int n, int label, int tree) {
  return tree == 0 ? label - 1 : (label - 2 + n) % n;
}

}  // namespace

BinaryTreeLinks doubleBinaryTree(int n, int pos, int tree) {
  BinaryTreeLinks links;
  if (n <= 1 || pos < 0 || pos >= n) return links;
  const int x = labelOf(n, pos, tree);
  const int b = lowBit(x);
  // Parent: x + b when that is in range and x is its left child (its lowest bit is
  // 2b); otherwise x is the right child of x - b (or the root, when x - b is 0).
  int parent = -1;
  if (x + b <= n && lowBit(x + b) == 2 * b) parent = x + b;
  else if (x - b >= 1) parent = x - b;
  if (parent > 0) links.parent = positionOf(n, parent, tree);
  if (b >= 2) {
    links.child[0] = positionOf(n, x - b / 2, tree);
    int step = b / 2;
    while (step >= 1 && x + step > n) step /= 2;
    if (step >= 1) links.child[1] = positionOf(n, x + step, tree);
  }
  return links;
}

TreeLinks layoutTree(const RankLayout& layout, int rank, int tree) {
  TreeLinks out;
  const int n = int(layout.nodeOf.size());
  if (rank < 0 || rank >= n) return out;
  if (layout.nNodes <= 1 || layout.nodeRanks.size() <= 1) {
    const int pos = layout.ringPosition(rank);
    const BinaryTreeLinks b = doubleBinaryTree(int(layout.ring.size()), pos, tree);
    if (b.parent >= 0) out.parent = layout.ring[size_t(b.parent)];
    for (int c : b.child)
      if (c >= 0) out.children.push_back(layout.ring[size_t(c)]);
    return out;
  }
  const int node = layout.nodeOf[size_t(rank)];
  const std::vector<int>& local = layout.nodeRanks[size_t(node)];
  const int lr = layout.localRank[size_t(rank)];
  if (lr == 0) {  // the node's head: a node of the binary tree over nodes
    const BinaryTreeLinks b = doubleBinaryTree(int(layout.nodeRanks.size()), node, tree);
    if (b.parent >= 0) out.parent = layout.nodeRanks[size_t(b.parent)][0];
    for (int c : b.child)
      if (c >= 0) out.children.push_back(layout.nodeRanks[size_t(c)][0]);
  } else {
    out.parent = local[size_t(lr - 1)];
  }
  if (size_t(lr) + 1 < local.size()) out.children.push_back(local[size_t(lr) + 1]);
  return out;
}

}  // namespace patterns
}  // namespace braid
