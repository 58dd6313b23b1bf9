#include "algorithms/patterns/exchange.h"

#include <algorithm>

namespace braid {
namespace patterns {

void RegionStream::add(Region r) {
  if (r.count == 0) return;
  count_ += r.count;
  if (!regions_.empty()) {
    Region& last = regions_.back();
    if (last.buf == r.buf && last.offset + last.count == r.offset) {
      last.count += r.count;
      return;
    }
  }
  regions_.push_back(r);
}

namespace {

/// The pieces of `s`: each region cut into parts of at most `chunk` elements.
std::vector<Region> piecesOf(const RegionStream& s, uint64_t chunk) {
  std::vector<Region> out;
  for (const Region& r : s.regions())
    for (uint64_t at = 0; at < r.count; at += chunk)
      out.push_back(Region{r.buf, r.offset + at, std::min(chunk, r.count - at)});
  return out;
}

}  // namespace

void exchangeRound(ProgramWriter& w, int to, const RegionStream& out, int from,
                   const RegionStream& in, uint64_t chunk) {
  if (chunk == 0) chunk = 1;
  const std::vector<Region> sends = piecesOf(out, chunk), recvs = piecesOf(in, chunk);
  for (size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
    if (i < sends.size()) w.send(to, sends[i]);
    if (i < recvs.size()) w.recv(from, recvs[i]);
  }
}

}  // namespace patterns
}  // namespace braid
