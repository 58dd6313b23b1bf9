// Talking to the aggregation switch (kSwitchPeer, algorithms/plan.h) from a program:
// messages are sent in order and their results received in order, with up to `depth`
// messages outstanding, so the switch (and the network to it) always has the next
// message while the previous one's result comes back:
//
//   send 0, send 1, send 2, recv 0, send 3, recv 1, ... , recv n-1
//
// Deadlock-free for depth <= 3: what is outstanding fits in the send FIFO (one message
// of at most chunkBytes, half a FIFO rounded up to whole slots) plus the connection's
// staging (CollNetPort keeps at least two messages in flight).
#pragma once
#include <functional>

#include "algorithms/patterns/program_writer.h"

namespace braid {
namespace patterns {

/// Where a CollNet builder may run: a switch serves the call (PlanArgs::collnet) and
/// the nodes have equal size (a switch group per local rank); nullptr: decline.
inline const RankLayout* switchLayout(const PlanArgs& a) {
  if (!a.collnet) return nullptr;
  const RankLayout& layout = layoutOf(a);
  return layout.uniform() ? &layout : nullptr;
}

/// Messages kept outstanding by the CollNet builders.
constexpr int kSwitchDepth = 3;

/// Appends n message exchanges with the switch: sendMsg(k) appends the step(s) that
/// send message k (exactly one step sends to the switch), recvMsg(k) the steps that
/// receive its result.
inline void switchExchange(int n, const std::function<void(int)>& sendMsg,
                           const std::function<void(int)>& recvMsg, int depth = kSwitchDepth) {
  int received = 0;
  for (int k = 0; k < n; ++k) {
    sendMsg(k);
    if (k - received + 1 >= depth) recvMsg(received++);
  }
  while (received < n) recvMsg(received++);
}

}  // namespace patterns
}  // namespace braid
