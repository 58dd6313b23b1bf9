// The in-process collnet: an ncclCollNet_v11_t whose "switch" is a table in this
// process. Members of a group must live in one process (threads, or one thread driving
// them all: the plan simulator). Nothing blocks: connect() returns at once, and a
// collective completes in test() once every member has posted it. It computes in
// member order with Braid's Reducer, like braid-switch, so the simulator checks the
// CollNet plans against the switch's exact semantics (the window rules of iallgather
// and ireducescatter included).
#pragma once
#include "braid/net_plugin.h"

namespace braid {

/// name "Local"; one device.
const ncclCollNet_v11_t* localCollNet();

}  // namespace braid
