// Grouped point-to-point: one program per (peer, direction, channel), holding that
// peer's operations in call order.
//
// Programs run concurrently, so the order of operations across peers within a group
// cannot deadlock (a rank sending to B before receiving from A while A does the
// opposite); per peer and direction, operations keep their order, which is what
// matches a send with its receive. A send to self and a receive from self use the
// self connection (peer == own rank). Each operation is split across channels like
// the collectives' buffers, and into chunks.
#include <map>
#include <utility>

#include "algorithms/builders.h"
#include "algorithms/patterns/partition.h"
#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace builders {

using patterns::Range;

bool sendRecvP2p(const PlanArgs& a, const PlanParams& p, Plan* plan) {
  const uint64_t chunk = patterns::chunkElems(a, p);
  if (chunk == 0) return false;
  for (const P2pOp& op : a.p2p)
    if (op.peer < 0 || op.peer >= a.nranks || op.buf == Buf::kNone) return false;
  for (int c = 0; c < p.nChannels; ++c) {
    // (peer, isSend) -> writer, created in order of first use.
    std::map<std::pair<int, bool>, patterns::ProgramWriter> writers;
    for (const P2pOp& op : a.p2p) {
      const Range share = patterns::channelShare(op.count, a.typeSize, p.nChannels, c);
      if (share.count == 0) continue;
      auto key = std::make_pair(op.peer, op.isSend);
      auto it = writers.find(key);
      if (it == writers.end()) it = writers.emplace(key, patterns::ProgramWriter(plan, c)).first;
      patterns::ProgramWriter& w = it->second;
      for (Range piece : patterns::Pieces(share, chunk)) {
        const Region region{op.buf, op.offset + piece.offset, piece.count};
        if (op.isSend)
          w.send(op.peer, region);
        else
          w.recv(op.peer, region);
      }
    }
  }
  patterns::dropEmptyPrograms(plan);
  return true;
}

}  // namespace builders
}  // namespace braid
