// What a communicator learns about the machine at init: which ranks share a node (the
// layout, from host identities: hostname + boot id or NCCL_HOSTID) and the tuner's
// cost model (defaults from the node topology, or BRAID_TUNER_MODEL).
#pragma once
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/plan.h"
#include "nccl.h"
#include "src/exec/transport.h"

namespace braid {

struct Comm;

/// Nodes from the peers' host hashes; inside a node, ranks ordered by `intraKey`
/// (rank -> position in its node's topology ring; empty: by rank).
RankLayout makeLayout(const std::vector<PeerInfo>& peers, const std::vector<int>& intraKey);

/// This rank's position in its node's ring, from this node's topology (GPU ranks by
/// their devices' placement; host ranks by rank). Ranks of one node see one topology
/// and agree; the keys are then exchanged so every rank builds the same layout.
int intraNodeKey(const std::vector<PeerInfo>& peers, int rank);

/// The cost model this rank proposes (rank 0's is adopted): topology defaults, then
/// the BRAID_TUNER_MODEL file if set. A missing or malformed file is an error naming it.
ncclResult_t loadCostModel(Comm* comm, CostModel* out);

/// The defaults for a node with `nicGbps` GB/s of network (0: unknown).
CostModel defaultCostModel(double nicGbps);

/// defaultCostModel() with this node's topology (NCCL_TOPO_FILE or detected).
CostModel topologyCostModel();

struct Net;
/// The inter-node link parameters of network `net` put into *m: the Socket net's
/// measured figures; for the others the figures measured for them where Braid has
/// some (UCX over TCP), else their devices' reported speed and latency.
void applyNetCost(const Net& net, CostModel* m);

}  // namespace braid
