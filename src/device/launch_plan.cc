#include "src/device/launch_plan.h"

#include <algorithm>

#include "src/device/dev_kernel.h"

namespace braid {
namespace {

size_t align256(size_t n) { return (n + 255) & ~size_t(255); }

/// The kernel of an item: copy-only ops all share the byte kernel.
std::pair<ncclDataType_t, DevRed> kernelOf(const LaunchItem& it) {
  if (it.red == DevRed::kNone) return {ncclUint8, DevRed::kNone};
  return {it.type, it.red};
}

/// Block places of the stage items [first, first + n) (relative to the stage) and the
/// stage's width in blocks.
uint32_t placeStage(const std::vector<LaunchItem>& items, size_t first, size_t n,
                    std::vector<uint16_t>* firstBlock) {
  firstBlock->assign(n, 0);
  if (items[first].coll != Coll::kSendRecv) return items[first].nPrograms;
  struct Lane {
    int peer;
    bool isSend;
    uint32_t first, width;
  };
  std::vector<Lane> lanes;
  std::vector<size_t> laneOf(n);
  for (size_t i = 0; i < n; ++i) {
    const LaunchItem& it = items[first + i];
    size_t l = 0;
    while (l < lanes.size() && !(lanes[l].peer == it.peer && lanes[l].isSend == it.isSend)) ++l;
    if (l == lanes.size()) lanes.push_back(Lane{it.peer, it.isSend, 0, 0});
    lanes[l].width = std::max(lanes[l].width, it.nPrograms);
    laneOf[i] = l;
  }
  uint32_t blocks = 0;
  for (Lane& l : lanes) {
    l.first = blocks;
    blocks += l.width;
  }
  for (size_t i = 0; i < n; ++i) (*firstBlock)[i] = uint16_t(lanes[laneOf[i]].first);
  return blocks;
}

}  // namespace

std::vector<size_t> kernelOrder(const std::vector<LaunchItem>& items) {
  // Send/recv ops differ from rank to rank, collectives do not: every send/recv op goes
  // first (one stage, so matching sends and receives run side by side), then the
  // copy-only collectives (same kernel), then the other kernels in the order in which
  // the collectives name them. No position depends on a rank's own send/recv ops.
  std::vector<std::pair<ncclDataType_t, DevRed>> kernels{{ncclUint8, DevRed::kNone}};
  std::vector<size_t> rank(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].coll == Coll::kSendRecv) continue;
    const auto k = kernelOf(items[i]);
    size_t j = 0;
    while (j < kernels.size() && kernels[j] != k) ++j;
    if (j == kernels.size()) kernels.push_back(k);
    rank[i] = j + 1;
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rank[a] < rank[b]; });
  return order;
}

bool planLaunches(const std::vector<LaunchItem>& items, std::vector<LaunchSpec>* out,
                  std::string* why) {
  out->clear();
  std::vector<uint16_t> places;
  for (size_t i = 0; i < items.size();) {
    size_t n = 1;
    if (items[i].coll == Coll::kSendRecv)
      while (i + n < items.size() && items[i + n].coll == Coll::kSendRecv) ++n;
    const uint32_t width = placeStage(items, i, n, &places);
    if (n > size_t(DevLaunch::kMaxWorks) || width > uint32_t(DevLaunch::kMaxBlocks)) {
      *why = "a group of " + std::to_string(n) + " send/recv ops needs " +
             std::to_string(width) + " CUDA blocks; one launch takes at most " +
             std::to_string(DevLaunch::kMaxWorks) + " ops and " +
             std::to_string(DevLaunch::kMaxBlocks) + " blocks (split the group)";
      return false;
    }
    const auto kernel = kernelOf(items[i]);
    if (out->empty() || out->back().type != kernel.first || out->back().red != kernel.second ||
        out->back().count + n > size_t(DevLaunch::kMaxWorks)) {
      LaunchSpec s;
      s.type = kernel.first;
      s.red = kernel.second;
      s.first = i;
      out->push_back(s);
    }
    LaunchSpec& s = out->back();
    for (size_t k = 0; k < n; ++k) {
      const LaunchItem& it = items[i + k];
      s.firstBlock.push_back(places[k]);
      s.newStage.push_back(k == 0 ? 1 : 0);
      s.scratchOffset.push_back(s.scratchBytes);
      s.scratchBytes += align256(it.scratchBytes);
      if (std::find(s.streams.begin(), s.streams.end(), it.stream) == s.streams.end())
        s.streams.push_back(it.stream);
    }
    s.count += n;
    s.nBlocks = std::max(s.nBlocks, width);
    i += n;
  }
  return true;
}

DevRed devRedFor(ncclRedOp_t op, bool reduces) {
  if (!reduces) return DevRed::kNone;
  switch (op) {
    case ncclProd: return DevRed::kProd;
    case ncclMax: return DevRed::kMax;
    case ncclMin: return DevRed::kMin;
    default: return DevRed::kSum;  // ncclSum, ncclAvg, PreMulSum (user ops)
  }
}

}  // namespace braid
