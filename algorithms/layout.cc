// RankLayout (algorithms/plan.h): nodes and the ring, as plain data for the builders.
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include "algorithms/plan.h"

namespace braid {

RankLayout RankLayout::flat(int nranks) {
  return fromNodes(std::vector<int>(size_t(std::max(nranks, 0)), 0));
}

RankLayout RankLayout::fromNodes(const std::vector<int>& nodeIds,
                                 const std::vector<int>& intraOrder) {
  RankLayout l;
  const int n = int(nodeIds.size());
  l.nodeOf.assign(size_t(n), 0);
  l.localRank.assign(size_t(n), 0);
  std::map<int, int> index;  // node id -> node number, by first rank
  for (int r = 0; r < n; ++r) {
    auto it = index.find(nodeIds[size_t(r)]);
    if (it == index.end()) {
      it = index.emplace(nodeIds[size_t(r)], int(index.size())).first;
      l.nodeRanks.emplace_back();
    }
    l.nodeOf[size_t(r)] = it->second;
    l.nodeRanks[size_t(it->second)].push_back(r);
  }
  l.nNodes = std::max<int>(1, int(l.nodeRanks.size()));
  for (std::vector<int>& ranks : l.nodeRanks) {
    if (intraOrder.size() == size_t(n))
      std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) {
        return intraOrder[size_t(a)] < intraOrder[size_t(b)];
      });
    for (size_t i = 0; i < ranks.size(); ++i) l.localRank[size_t(ranks[i])] = int(i);
    l.ring.insert(l.ring.end(), ranks.begin(), ranks.end());
  }
  return l;
}

bool RankLayout::uniform() const {
  for (const std::vector<int>& r : nodeRanks)
    if (r.size() != nodeRanks[0].size()) return false;
  return true;
}

int RankLayout::ringPosition(int rank) const {
  auto it = std::find(ring.begin(), ring.end(), rank);
  return it == ring.end() ? -1 : int(it - ring.begin());
}

std::string RankLayout::describe() const {
  char buf[64];
  if (uniform()) {
    snprintf(buf, sizeof(buf), "%d node(s) x %d rank(s)", nNodes, ranksPerNode());
    return buf;
  }
  std::string out = std::to_string(nNodes) + " nodes (";
  for (size_t i = 0; i < nodeRanks.size(); ++i)
    out += (i ? "," : "") + std::to_string(nodeRanks[i].size());
  return out + " ranks)";
}

const RankLayout& layoutOf(const PlanArgs& args) {
  if (args.layout && int(args.layout->nodeOf.size()) == args.nranks) return *args.layout;
  // Flat layouts are cached per rank count (builders ask often; plans are cached).
  thread_local std::map<int, RankLayout> flats;
  auto it = flats.find(args.nranks);
  if (it == flats.end()) it = flats.emplace(args.nranks, RankLayout::flat(args.nranks)).first;
  return it->second;
}

}  // namespace braid
