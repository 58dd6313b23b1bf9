// What a communicator learns about the machine at init: which ranks share a node (the
// layout, from host identities: hostname + boot id or NCCL_HOSTID) and the tuner's
// cost model (defaults from the node topology, or BRAID_TUNER_MODEL).
#pragma once
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/plan.h"
#include "nccl.h"
#include "transports/transport.h"

namespace braid {

struct Comm;

/// Nodes from the peers' host hashes; inside a node, ranks in topology ring order
/// (GPU ranks by their devices' placement, host ranks by rank).
RankLayout makeLayout(const std::vector<PeerInfo>& peers);

/// The cost model this rank proposes (rank 0's is adopted): topology defaults, then
/// the BRAID_TUNER_MODEL file if set. A missing or malformed file is an error naming it.
ncclResult_t loadCostModel(Comm* comm, CostModel* out);

/// The defaults for a node with `nicGbps` GB/s of network (0: unknown).
CostModel defaultCostModel(double nicGbps);

}  // namespace braid
