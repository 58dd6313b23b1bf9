// The plan builders, one per algorithm file (algorithms/<collective>/<algorithm>.cc).
// Each is a pure function of its arguments; it appends programs to an empty Plan and
// returns false if it does not support the arguments (the registry then falls back).
// Use them through algorithms/registry.h.
#pragma once
#include "algorithms/plan.h"

namespace braid {
namespace builders {

bool allReduceRing(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allGatherRing(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reduceScatterRing(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool broadcastChain(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reduceChain(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allToAllPairwise(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool gatherDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool scatterDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allReduceDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allGatherDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reduceScatterDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool broadcastDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reduceDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool sendRecvP2p(const PlanArgs& args, const PlanParams& params, Plan* plan);

// Topology-aware and latency-optimal algorithms.
bool allReduceTree(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allReduceRabenseifner(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allGatherBruck(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allToAllBruck(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allReduceHier(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allGatherHier(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reduceScatterHier(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allToAllHier(const PlanArgs& args, const PlanParams& params, Plan* plan);

// Direct access (algorithms/plan.h: kSignal .. kPeerPut): the ranks read and write each
// other's buffers; decline unless args.peerAccess. Each writes params.nChannels
// programs (patterns::forEachShare).
bool allReduceTwoShot(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allReduceReducePut(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allGatherPeerPut(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allGatherPeerRead(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allToAllPeerRead(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool broadcastPeerRead(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reducePeerRead(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reduceScatterPeerRead(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool gatherPeerRead(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool scatterPeerRead(const PlanArgs& args, const PlanParams& params, Plan* plan);

// In-network (CollNet): the aggregation switch as a peer (kSwitchPeer); decline unless
// args.collnet.
bool allReduceCollNetChain(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allReduceCollNetDirect(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool allGatherCollNet(const PlanArgs& args, const PlanParams& params, Plan* plan);
bool reduceScatterCollNet(const PlanArgs& args, const PlanParams& params, Plan* plan);

}  // namespace builders
}  // namespace braid
