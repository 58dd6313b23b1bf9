#include "algorithms/registry.h"

#include <strings.h>

#include "algorithms/builders.h"
#include "src/config/log.h"
#include "src/config/error.h"

namespace braid {

const std::vector<Algorithm>& allAlgorithms() {
  // {collective, name, NCCL_ALGO name, description, builder, cost, small, needsSwitch,
  // needsPeerAccess}; default first.
  static const std::vector<Algorithm> table = {
      {Coll::kAllReduce, "ring", "Ring",
       "ring reduce-scatter then ring all-gather, in loops of nranks chunks",
       builders::allReduceRing, costs::allReduceRing},
      {Coll::kBroadcast, "chain", "Ring", "pipelined chain from the root along the ring",
       builders::broadcastChain, costs::broadcastChain},
      {Coll::kReduce, "chain", "Ring", "pipelined chain along the ring ending at the root",
       builders::reduceChain, costs::reduceChain},
      {Coll::kAllGather, "ring", "Ring", "ring all-gather, every block n-1 hops",
       builders::allGatherRing, costs::allGatherRing},
      {Coll::kReduceScatter, "ring", "Ring", "ring reduce-scatter, every block n-1 hops",
       builders::reduceScatterRing, costs::reduceScatterRing},
      {Coll::kAllToAll, "pairwise", nullptr,
       "round i: send to r+i, receive from r-i, as two concurrent programs",
       builders::allToAllPairwise, costs::allToAllPairwise},
      {Coll::kGather, "direct", nullptr, "every rank sends to the root directly",
       builders::gatherDirect, costs::gatherDirect},
      {Coll::kScatter, "direct", nullptr, "the root sends to every rank directly",
       builders::scatterDirect, costs::scatterDirect},
      {Coll::kAllReduce, "direct", nullptr,
       "one shot: every rank sends to all, each reduces in rank order (small messages)",
       builders::allReduceDirect, costs::allReduceDirect, true},
      {Coll::kBroadcast, "direct", nullptr,
       "one shot: the root sends to every rank (small messages)", builders::broadcastDirect, costs::broadcastDirect,
       true},
      {Coll::kReduce, "direct", nullptr,
       "one shot: every rank sends to the root, which reduces (small messages)",
       builders::reduceDirect, costs::reduceDirect, true},
      {Coll::kAllGather, "direct", nullptr,
       "one shot: every rank sends its block to every rank (small messages)",
       builders::allGatherDirect, costs::allGatherDirect, true},
      {Coll::kReduceScatter, "direct", nullptr,
       "one shot: every rank sends block j to rank j, which reduces (small messages)",
       builders::reduceScatterDirect, costs::reduceScatterDirect, true},
      {Coll::kAllReduce, "tree", "Tree",
       "double binary tree, pipelined: reduce up, broadcast down (half the data per tree)",
       builders::allReduceTree, costs::allReduceTree},
      {Coll::kAllReduce, "rabenseifner", nullptr,
       "recursive halving reduce-scatter then recursive doubling all-gather",
       builders::allReduceRabenseifner, costs::allReduceRabenseifner},
      {Coll::kAllReduce, "hier", nullptr,
       "intra-node reduce-scatter, inter-node all-reduce per local rank, intra-node "
       "all-gather", builders::allReduceHier, costs::allReduceHier},
      {Coll::kAllGather, "bruck", nullptr,
       "Bruck: log2(n) rounds, round k sends 2^k blocks to r-2^k (small messages)",
       builders::allGatherBruck, costs::allGatherBruck, true},
      {Coll::kAllGather, "hier", nullptr,
       "inter-node ring all-gather per local rank, then intra-node ring all-gather of each "
       "node's blocks", builders::allGatherHier, costs::allGatherHier},
      {Coll::kReduceScatter, "hier", nullptr,
       "intra-node reduce-scatter by node block, inter-node reduce-scatter per local rank",
       builders::reduceScatterHier, costs::reduceScatterHier},
      {Coll::kAllToAll, "bruck", nullptr,
       "Bruck: log2(n) rounds through scratch, round k forwards blocks with bit k set "
       "(small messages)", builders::allToAllBruck, costs::allToAllBruck, true},
      {Coll::kAllToAll, "hier", nullptr,
       "node-aware: blocks for a node aggregated at one local rank, one inter-node "
       "exchange per node pair, then scattered inside the node", builders::allToAllHier, costs::allToAllHier},
      {Coll::kAllReduce, "collnet_chain", "CollNetChain",
       "in-network: reduce up each node's chain to its head, through the switch, back down",
       builders::allReduceCollNetChain, costs::allReduceCollNetChain, false, true},
      {Coll::kAllReduce, "collnet_direct", "CollNetDirect",
       "in-network: intra-node reduce-scatter, every local rank's block through the switch, "
       "intra-node all-gather", builders::allReduceCollNetDirect, costs::allReduceCollNetDirect, false, true},
      {Coll::kAllGather, "collnet", "CollNet",
       "in-network: every rank's block through the switch to its peers on all nodes, then "
       "intra-node all-gather", builders::allGatherCollNet, costs::allGatherCollNet, false, true},
      {Coll::kReduceScatter, "collnet", "CollNet",
       "in-network: intra-node reduce-scatter, then the switch reduces each node's part and "
       "returns every rank its block", builders::reduceScatterCollNet, costs::reduceScatterCollNet, false, true},
      // Direct access: the ranks read each other's buffers (the first of each collective
      // is the one the flag board runs: peerAccessAlgorithm).
      {Coll::kAllReduce, "two_shot", nullptr,
       "direct access: each rank reduces its chunk of every rank's input, then copies the "
       "others' chunks from their owners", builders::allReduceTwoShot, costs::allReduceTwoShot, false, false, true},
      {Coll::kAllGather, "peer_read", nullptr,
       "direct access: each rank reads every rank's block", builders::allGatherPeerRead, costs::allGatherPeerRead,
       false, false, true},
      {Coll::kAllToAll, "peer_read", nullptr,
       "direct access: each rank reads its block of every rank's input",
       builders::allToAllPeerRead, costs::allToAllPeerRead, false, false, true},
      {Coll::kBroadcast, "peer_read", nullptr, "direct access: every rank reads the root's buffer",
       builders::broadcastPeerRead, costs::broadcastPeerRead, false, false, true},
      {Coll::kReduce, "peer_read", nullptr,
       "direct access: the root reduces every rank's input", builders::reducePeerRead, costs::reducePeerRead, false,
       false, true},
      {Coll::kReduceScatter, "peer_read", nullptr,
       "direct access: each rank reduces its block of every rank's input",
       builders::reduceScatterPeerRead, costs::reduceScatterPeerRead, false, false, true},
      {Coll::kGather, "peer_read", nullptr, "direct access: the root reads every rank's input",
       builders::gatherPeerRead, costs::gatherPeerRead, false, false, true},
      {Coll::kScatter, "peer_read", nullptr,
       "direct access: every rank reads its block of the root's input",
       builders::scatterPeerRead, costs::scatterPeerRead, false, false, true},
      // Direct access writing into the peers' outputs: the least memory traffic there
      // is (the CUDA executor's choice between thread ranks of one GPU).
      {Coll::kAllReduce, "reduce_put", nullptr,
       "direct access: each rank reduces its chunk of every rank's input and writes it "
       "into every rank's output", builders::allReduceReducePut, costs::allReduceReducePut,
       false, false, true},
      {Coll::kAllGather, "peer_put", nullptr,
       "direct access: each rank writes its block into every rank's output",
       builders::allGatherPeerPut, costs::allGatherPeerPut, false, false, true},
      {Coll::kSendRecv, "p2p", nullptr, "one program per peer and direction, ops in order",
       builders::sendRecvP2p, nullptr},
  };
  return table;
}

const Algorithm* peerAccessAlgorithm(Coll coll) {
  for (const Algorithm& a : allAlgorithms())
    if (a.coll == coll && a.needsPeerAccess) return &a;
  return nullptr;
}

std::vector<const Algorithm*> algorithmsFor(Coll coll) {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : allAlgorithms())
    if (a.coll == coll) out.push_back(&a);
  return out;
}

const Algorithm* findAlgorithm(Coll coll, const std::string& name) {
  for (const Algorithm& a : allAlgorithms()) {
    if (a.coll != coll) continue;
    if (strcasecmp(a.name, name.c_str()) == 0) return &a;
    if (a.ncclName && strcasecmp(a.ncclName, name.c_str()) == 0) return &a;
  }
  return nullptr;
}

const Algorithm* defaultAlgorithm(Coll coll) {
  for (const Algorithm& a : allAlgorithms())
    if (a.coll == coll) return &a;
  return nullptr;
}

namespace {

ncclResult_t checkArgs(const PlanArgs& a, const PlanParams& p) {
  const char* coll = collName(a.coll);
  if (a.coll >= Coll::kCount)
    return setError(ncclInvalidArgument, nullptr, "buildPlan: invalid collective %d",
                    int(a.coll));
  if (a.nranks < 1 || a.rank < 0 || a.rank >= a.nranks)
    return setError(ncclInvalidArgument, nullptr, "%s plan: rank %d out of range [0, %d)",
                    coll, a.rank, a.nranks);
  if (a.root < 0 || a.root >= a.nranks)
    return setError(ncclInvalidArgument, nullptr, "%s plan: root %d out of range [0, %d)",
                    coll, a.root, a.nranks);
  if (a.typeSize == 0 || p.chunkBytes < a.typeSize)
    return setError(ncclInvalidArgument, nullptr,
                    "%s plan: chunkBytes %llu smaller than one element (%zu bytes)", coll,
                    static_cast<unsigned long long>(p.chunkBytes), a.typeSize);
  if (p.nChannels < 1 || p.nChannels > 65535)
    return setError(ncclInvalidArgument, nullptr, "%s plan: nChannels %d out of range", coll,
                    p.nChannels);
  for (const P2pOp& op : a.p2p) {
    if (op.peer < 0 || op.peer >= a.nranks)
      return setError(ncclInvalidArgument, nullptr, "%s plan: %s peer %d out of range [0, %d)",
                      coll, op.isSend ? "send" : "recv", op.peer, a.nranks);
    if (op.buf == Buf::kNone)
      return setError(ncclInvalidArgument, nullptr, "%s plan: %s to/from peer %d has no buffer",
                      coll, op.isSend ? "send" : "recv", op.peer);
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t buildPlan(const PlanArgs& args, const PlanParams& params, const Algorithm* algo,
                       Plan* plan) {
  BRAID_CHECK(checkArgs(args, params));
  const Algorithm* fallback = defaultAlgorithm(args.coll);
  if (!algo) algo = fallback;
  if (algo && algo->coll != args.coll)
    return setError(ncclInvalidArgument, nullptr, "%s plan: algorithm %s is for %s",
                    collName(args.coll), algo->name, collName(algo->coll));
  for (const Algorithm* a : {algo, fallback}) {
    if (!a) continue;
    plan->programs.clear();
    plan->switchOp = SwitchOp::kNone;  // a declining CollNet builder may have set it
    plan->algorithm = a->name;
    if (a->build(args, params, plan)) {
      if (a != algo)
        BRAID_INFO(kLogTuning, "%s: algorithm %s does not support this call, using %s",
                   collName(args.coll), algo->name, a->name);
      return ncclSuccess;
    }
    if (a == fallback) break;
  }
  plan->programs.clear();
  return setError(ncclInvalidUsage, nullptr,
                  "%s: no algorithm supports this call (nranks %d, count %llu%s)",
                  collName(args.coll), args.nranks,
                  static_cast<unsigned long long>(args.count),
                  args.inPlace ? ", in place" : "");
}

}  // namespace braid
