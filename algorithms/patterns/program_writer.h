// ProgramWriter: appends the primitive steps of algorithms/plan.h to one Program of a
// Plan, so builders read as schedules: w.send(next, own, kPreOp); w.recv(prev, dst).
// Steps of zero elements are dropped, so both ends of a connection agree as long as
// they compute the same region sizes.
#pragma once
#include <cstdint>

#include "algorithms/patterns/partition.h"
#include "algorithms/plan.h"

namespace braid {
namespace patterns {

/// Region of the send buffer covering `r`, shifted by `base` elements.
inline Region sendRegion(Range r, uint64_t base = 0) {
  return Region{Buf::kSend, base + r.offset, r.count};
}
/// Region of the recv buffer covering `r`, shifted by `base` elements.
inline Region recvRegion(Range r, uint64_t base = 0) {
  return Region{Buf::kRecv, base + r.offset, r.count};
}

class ProgramWriter {
 public:
  /// Appends a new program to `plan` whose steps all use `channel`.
  ProgramWriter(Plan* plan, int channel);

  void send(int to, Region src, uint8_t flags = 0);
  void recv(int from, Region dst, uint8_t flags = 0);
  void recvReduceSend(int from, int to, Region src, uint8_t flags);
  void recvReduceCopy(int from, Region src, Region dst, uint8_t flags);
  void recvReduceCopySend(int from, int to, Region src, Region dst, uint8_t flags);
  void recvCopySend(int from, int to, Region dst);
  void copy(Region src, Region dst, uint8_t flags = 0);
  // Direct access (algorithms/plan.h: its contract):
  void signal();
  void wait(int peer);  ///< kAllPeers: every rank
  void peerCopy(int from, Region src, Region dst);
  /// to: -1, dst here only; kAllPeers, dst at every rank.
  void peerReduce(Region src, Region dst, uint8_t flags, int to = -1);
  /// dst at `to` (kAllPeers: every rank) <- own src.
  void peerPut(int to, Region src, Region dst);
  /// signal() then wait(kAllPeers): a barrier.
  void barrier() {
    signal();
    wait(kAllPeers);
  }

 private:
  void add(StepKind kind, uint8_t flags, int from, int to, Region src, Region dst);
  Plan* plan_;
  size_t index_;
  int channel_;
};

/// Removes programs that ended up with no steps.
void dropEmptyPrograms(Plan* plan);

/// Writes a direct-access plan as params.nChannels programs (algorithms/plan.h: each
/// program its own sequence of signals, so an executor can run them on several
/// threads or CUDA blocks): program b moves share b of every region, 64-byte aligned
/// within the region (channelShare). body(w, share) writes one program; share(region)
/// is that program's part of a region (an empty part's steps are dropped, its signals
/// and waits stay, so every program posts as many).
template <class Body>
void forEachShare(Plan* plan, const PlanArgs& args, const PlanParams& params, Body body) {
  const int parts = params.nChannels > 1 ? params.nChannels : 1;
  for (int b = 0; b < parts; ++b) {
    ProgramWriter w(plan, b);
    auto share = [&](Region r) {
      const Range part = channelShare(r.count, args.typeSize, parts, b);
      return Region{r.buf, r.offset + part.offset, part.count};
    };
    body(w, share);
  }
}

}  // namespace patterns
}  // namespace braid
