// Double binary tree all-reduce, pipelined.
//
// The ranks form two trees (algorithms/patterns/tree.h): on one node, complementary
// binary trees over the ring positions; on several, a double binary tree over the
// nodes' heads with each node's ranks in a chain below its head. Each tree reduces its
// share of the data up to its root and broadcasts the result back down, chunk by chunk
// (chunks of at most chunkBytes):
//
//   up   (per chunk): tmp = own op child_0 op child_1 ...; send tmp to the parent
//   down (per chunk): out <- parent; send out to every child
//   root (per chunk): out = own op child_0 op ... (post-op at the last); send out down
//
// Up and down are two programs of a non-root rank, so chunk k+1 goes up while chunk k
// comes down; the root does both in one program (its final combine feeds the down
// sends directly). An interior rank with several children combines into its receive
// buffer (the chunk's final value arrives there later, after every read of it: the
// result for an element needs this rank's up-send of it first).
//
// Channels: with nChannels >= 2 tree 0 takes the first half of the data over the even
// channels and tree 1 the second half over the odd ones. With one channel a single
// tree carries all the data: two trees on one channel would need two programs on the
// same (peer, channel, direction) wherever two ranks are neighbours in both trees (any
// two ranks of a 2-rank tree; every chain link on several nodes), which the plan
// contract forbids.
//
// Flags: a rank's own contribution is read exactly once per element with kPreOp (its
// first combine, or the leaf's send); the root's last combine carries kPostOp, and the
// down direction only copies.
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"
#include "algorithms/patterns/tree.h"

namespace braid {
namespace builders {

using patterns::Range;

namespace {

/// Appends the programs of one tree over `share` (one channel) for this rank.
void treeShare(Plan* plan, const patterns::TreeLinks& t, Range share, uint64_t chunk,
               int channel) {
  const std::vector<int>& kids = t.children;
  const size_t nk = kids.size();
  if (t.parent < 0) {  // the root: combine, then send the result down
    patterns::ProgramWriter w(plan, channel);
    for (Range piece : patterns::Pieces(share, chunk)) {
      const Region own = patterns::sendRegion(piece), out = patterns::recvRegion(piece);
      if (nk == 0) {
        w.copy(own, out, kPreOp | kPostOp);
        continue;
      }
      for (size_t i = 0; i + 1 < nk; ++i)
        w.recvReduceCopy(kids[i], i == 0 ? own : out, out, i == 0 ? kPreOp : 0);
      const int last = kids[nk - 1];
      w.recvReduceCopySend(last, last, nk == 1 ? own : out, out,
                           nk == 1 ? kPreOp | kPostOp : kPostOp);
      for (size_t i = 0; i + 1 < nk; ++i) w.send(kids[i], out);
    }
    return;
  }
  patterns::ProgramWriter up(plan, channel);
  patterns::ProgramWriter down(plan, channel);
  for (Range piece : patterns::Pieces(share, chunk)) {
    const Region own = patterns::sendRegion(piece), out = patterns::recvRegion(piece);
    // Up: own op children, to the parent (the receive buffer holds partial results).
    if (nk == 0) {
      up.send(t.parent, own, kPreOp);
    } else {
      for (size_t i = 0; i + 1 < nk; ++i)
        up.recvReduceCopy(kids[i], i == 0 ? own : out, out, i == 0 ? kPreOp : 0);
      up.recvReduceSend(kids[nk - 1], t.parent, nk == 1 ? own : out, nk == 1 ? kPreOp : 0);
    }
    // Down: the final value from the parent, on to the children.
    if (nk == 0) {
      down.recv(t.parent, out);
    } else {
      down.recvCopySend(t.parent, kids[0], out);
      for (size_t i = 1; i < nk; ++i) down.send(kids[i], out);
    }
  }
}

}  // namespace

bool allReduceTree(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  if (a.count == 0) return true;
  const RankLayout& layout = layoutOf(a);
  const int nTrees = p.nChannels >= 2 ? 2 : 1;
  const uint64_t granule = a.typeSize < 64 ? 64 / a.typeSize : 1;
  for (int tree = 0; tree < nTrees; ++tree) {
    const Range half = patterns::evenPart(a.count, nTrees, tree, granule);
    if (half.count == 0) continue;
    const patterns::TreeLinks links = patterns::layoutTree(layout, a.rank, tree);
    // Tree `tree` runs on channels tree, tree + nTrees, ...: one share each.
    const int nc = (p.nChannels - tree + nTrees - 1) / nTrees;
    for (int j = 0; j < nc; ++j) {
      Range share = patterns::channelShare(half.count, a.typeSize, nc, j);
      share.offset += half.offset;
      if (share.count == 0) continue;
      treeShare(plan, links, share, chunk, tree + j * nTrees);
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
