#include "algorithms/patterns/groups.h"

#include <algorithm>
#include <utility>

namespace braid {
namespace patterns {
namespace {

bool sameRegion(const Region& a, const Region& b) {
  return a.buf == b.buf && a.offset == b.offset && a.count == b.count;
}

std::vector<Region> blocksOf(const Group& g, const BlockFn& fn) {
  std::vector<Region> out(size_t(g.size()));
  for (int j = 0; j < g.size(); ++j) out[size_t(j)] = fn(j);
  return out;
}

/// Pieces of `chunk` elements needed to cover the largest block.
uint64_t piecesFor(const std::vector<Region>& blocks, uint64_t chunk) {
  uint64_t most = 0;
  for (const Region& r : blocks) most = std::max(most, r.count);
  return chunk ? (most + chunk - 1) / chunk : 0;
}

}  // namespace

Group::Group(std::vector<int> ranks, int self) : ranks_(std::move(ranks)) {
  auto it = std::find(ranks_.begin(), ranks_.end(), self);
  pos_ = it == ranks_.end() ? 0 : int(it - ranks_.begin());
}

Group Group::nodeOf(const RankLayout& layout, int rank) {
  return Group(layout.nodeRanks[size_t(layout.nodeOf[size_t(rank)])], rank);
}

Group Group::peersOf(const RankLayout& layout, int rank) {
  const int local = layout.localRank[size_t(rank)];
  std::vector<int> ranks;
  for (const std::vector<int>& node : layout.nodeRanks) ranks.push_back(node[size_t(local)]);
  return Group(std::move(ranks), rank);
}

Region subRegion(Region r, uint64_t offset, uint64_t max) {
  const uint64_t at = std::min(offset, r.count);
  return Region{r.buf, r.offset + at, std::min(max, r.count - at)};
}

void ringReduceScatter(ProgramWriter& w, const Group& g, const BlockFn& contrib, Region dst,
                       uint64_t chunk, uint8_t contribFlags, uint8_t finalFlags) {
  const int k = g.size();
  const std::vector<Region> src = blocksOf(g, contrib);
  const uint8_t last = contribFlags | finalFlags;
  if (k == 1) {
    if (last || !sameRegion(src[0], dst)) w.copy(src[0], dst, last);
    return;
  }
  const int next = g.next(), prev = g.prev();
  const uint64_t pieces = piecesFor(src, chunk);
  for (uint64_t i = 0; i < pieces; ++i) {
    auto own = [&](int s) { return subRegion(src[size_t(g.reduceBlock(s))], i * chunk, chunk); };
    // Step 0: start the block of our predecessor with our contribution.
    w.send(next, own(0), contribFlags);
    // Steps 1 .. k-2: add ours to what arrives and pass it on.
    for (int s = 1; s <= k - 2; ++s) w.recvReduceSend(prev, next, own(s), contribFlags);
    // Step k-1: our own block gets its last contribution.
    w.recvReduceCopy(prev, own(k - 1), subRegion(dst, i * chunk, chunk), last);
  }
}

void ringAllGather(ProgramWriter& w, const Group& g, Region ownSrc, const BlockFn& dst,
                   uint64_t chunk) {
  const int k = g.size();
  if (k == 1) return;
  const std::vector<Region> out = blocksOf(g, dst);
  const int next = g.next(), prev = g.prev();
  const uint64_t pieces = piecesFor(out, chunk);
  for (uint64_t i = 0; i < pieces; ++i) {
    auto at = [&](int s) { return subRegion(out[size_t(g.gatherBlock(s))], i * chunk, chunk); };
    // Step 0: our own piece.
    w.send(next, subRegion(ownSrc, i * chunk, chunk));
    // Steps 1 .. k-2: keep and forward our predecessors' pieces.
    for (int s = 1; s <= k - 2; ++s) w.recvCopySend(prev, next, at(s));
    // Step k-1: our successor's piece ends here.
    w.recv(prev, at(k - 1));
  }
}

void ringAllReduce(ProgramWriter& w, const Group& g, const BlockFn& contrib, const BlockFn& dst,
                   uint64_t chunk, uint8_t contribFlags, uint8_t finalFlags) {
  const int k = g.size();
  const std::vector<Region> src = blocksOf(g, contrib);
  const std::vector<Region> out = blocksOf(g, dst);
  const uint8_t last = contribFlags | finalFlags;
  if (k == 1) {
    if (last || !sameRegion(src[0], out[0])) w.copy(src[0], out[0], last);
    return;
  }
  const int next = g.next(), prev = g.prev();
  const uint64_t pieces = piecesFor(src, chunk);
  for (uint64_t i = 0; i < pieces; ++i) {
    auto own = [&](int s) { return subRegion(src[size_t(g.reduceBlock(s))], i * chunk, chunk); };
    auto fin = [&](int s) { return subRegion(out[size_t(g.reduceBlock(s))], i * chunk, chunk); };
    // Step 0: start our predecessor's block.
    w.send(next, own(0), contribFlags);
    // Steps 1 .. k-2: add ours and pass on.
    for (int s = 1; s <= k - 2; ++s) w.recvReduceSend(prev, next, own(s), contribFlags);
    // Step k-1: our own block is complete: keep it and start distributing it.
    w.recvReduceCopySend(prev, next, own(k - 1), fin(k - 1), last);
    // Steps k .. 2k-3: keep and forward the completed blocks of our predecessors.
    for (int s = k; s <= 2 * k - 3; ++s) w.recvCopySend(prev, next, fin(s));
    // Step 2k-2: the last completed block ends here.
    w.recv(prev, fin(2 * k - 2));
  }
}

}  // namespace patterns
}  // namespace braid
