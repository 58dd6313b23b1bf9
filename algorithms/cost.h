// Cost model: an alpha-beta prediction of one collective's time for each algorithm,
// from the ranks' layout (nodes) and per-link parameters. The tuner compares the
// predictions to choose (src/core/tuner.cc); the scale tool prints them for described
// machines (src/tools/braid_sim.cc); ncclGroupSimulateEnd returns them.
//
// The formulas are the algorithms' critical paths: steps on the path times (alpha +
// bytes / bandwidth of the link the step crosses), with pipelining where the plan
// pipelines (chunks along chains and trees) and shared node NICs where several ranks
// cross nodes at once. They are written per algorithm in algorithms/cost.cc, next to
// the builders they describe.
#pragma once
#include <cstdint>
#include <string>

#include "algorithms/plan.h"

namespace braid {

/// One kind of link: latency per message and bandwidth per direction.
struct LinkCost {
  double alphaUs = 1.0;   ///< fixed cost of one step over the link (software + wire latency)
  double gbps = 10.0;     ///< GB/s one rank moves over it in one direction
};

/// What the tuner knows about the machine (from the topology, calibratable with
/// BRAID_TUNER_MODEL). Identical on every rank of a communicator (rank 0's is used).
struct CostModel {
  LinkCost intra;          ///< between ranks of one node (local, shm, p2p)
  LinkCost inter;          ///< between nodes (net_socket, later RDMA/UCX)
  double nicGbps = 12.5;   ///< GB/s of one node's network, shared by its ranks
  double reduceGbps = 20;  ///< GB/s of reduction input one rank combines
  double stepUs = 0.3;     ///< executor overhead per step (both ends)
  double sliceUs = 0.05;   ///< overhead per FIFO slot moved (protocol pieces)
  /// Reads "key=value" lines (intra_alpha_us, intra_gbps, inter_alpha_us, inter_gbps,
  /// nic_gbps, reduce_gbps, step_us, slice_us; '#' comments); false and *err on a bad
  /// line or key (the model is then unchanged).
  bool parse(const std::string& text, std::string* err);
  std::string toString() const;  ///< the same format, one line per key
};

/// One prediction request.
struct CostQuery {
  Coll coll = Coll::kAllReduce;
  int nranks = 1;
  uint64_t bytes = 0;        ///< nccl-tests' size: the larger of the send and recv buffers
  const RankLayout* layout = nullptr;  ///< nullptr: one node
  int nChannels = 1;
  uint64_t chunkBytes = 1 << 20;  ///< pipelining unit of chains and trees
  uint64_t sliceBytes = 512 << 10;  ///< the protocol's piece size
  const CostModel* model = nullptr;
};

/// Predicted microseconds of `algorithm` (its registry name or NCCL name) for the
/// query, or a negative value if the model has no formula for it (the tuner then ranks
/// it last). The same as the registry row's Algorithm::cost.
double predictUs(const char* algorithm, const CostQuery& q);

/// The formulas, one per algorithm, named as its builder (algorithms/builders.h); each
/// sits on its algorithm's registry row (Algorithm::cost). Negative: no prediction for
/// this query (a hierarchical algorithm on nodes of different sizes, no model).
namespace costs {
double allReduceRing(const CostQuery& q);
double allReduceDirect(const CostQuery& q);
double allReduceTree(const CostQuery& q);
double allReduceRabenseifner(const CostQuery& q);
double allReduceHier(const CostQuery& q);
double allReduceCollNetChain(const CostQuery& q);
double allReduceCollNetDirect(const CostQuery& q);
double allReduceTwoShot(const CostQuery& q);
double allReduceReducePut(const CostQuery& q);
double allGatherRing(const CostQuery& q);
double allGatherDirect(const CostQuery& q);
double allGatherBruck(const CostQuery& q);
double allGatherHier(const CostQuery& q);
double allGatherCollNet(const CostQuery& q);
double allGatherPeerRead(const CostQuery& q);
double allGatherPeerPut(const CostQuery& q);
double reduceScatterRing(const CostQuery& q);
double reduceScatterDirect(const CostQuery& q);
double reduceScatterHier(const CostQuery& q);
double reduceScatterCollNet(const CostQuery& q);
double reduceScatterPeerRead(const CostQuery& q);
double allToAllPairwise(const CostQuery& q);
double allToAllBruck(const CostQuery& q);
double allToAllHier(const CostQuery& q);
double allToAllPeerRead(const CostQuery& q);
double broadcastChain(const CostQuery& q);
double broadcastDirect(const CostQuery& q);
double broadcastPeerRead(const CostQuery& q);
double reduceChain(const CostQuery& q);
double reduceDirect(const CostQuery& q);
double reducePeerRead(const CostQuery& q);
double gatherDirect(const CostQuery& q);
double gatherPeerRead(const CostQuery& q);
double scatterDirect(const CostQuery& q);
double scatterPeerRead(const CostQuery& q);
}  // namespace costs

}  // namespace braid
