// Ring and tree construction over the node topology, NCCL-style: the intra-node ring
// order that keeps close devices adjacent (worst path type first, then bottleneck
// bandwidth, then how often the worst link is crossed), and for multi-node rings the
// NIC each channel enters and leaves the node by. The tree of a channel is the chain
// of its ring, headed by the rank closest to the channel's NIC.
#pragma once
#include <vector>

#include "src/topo/path.h"
#include "src/topo/topology.h"

namespace braid {
namespace topo {

/// One channel of the search result.
struct RingChannel {
  /// Local ranks in ring order. Multi-node: order.front() receives from the network
  /// (through nicIn) and order.back() sends to it (through nicOut).
  std::vector<int> order;
  int nicIn = -1, nicOut = -1;  ///< NIC node ids; -1 on one node or without NICs
  int treeHead = -1;            ///< local rank talking to the network: order.front()
  std::vector<int> treeChain;   ///< intra-node chain from the head (treeChain[0] == head)
};

struct RingSearch {
  std::vector<RingChannel> channels;
  PathType worstType = PathType::kLoc;  ///< worst intra-node link of channel 0
  double bottleneckGbps = 0;            ///< its slowest intra-node link (GB/s)
};

struct SearchOptions {
  int nChannels = 1;
  bool multiNode = false;  ///< rings leave the node: choose NICs and open the cycle
};

/// The topology node of each local rank: the GPU with that CUDA index, or -1 (host rank
/// or a device the topology does not know).
std::vector<int> rankNodes(const Topology& t, const std::vector<int>& cudaDevOfLocalRank);

/// Rings (and tree chains) over the local ranks placed at `rankNode` (GPU, core or NUMA
/// node ids; any -1 makes every channel the identity order). Deterministic: every rank
/// of a node computes the same result. Exhaustive up to 9 ranks (10 for multi-node
/// chains), greedy nearest neighbour + 2-opt above.
RingSearch searchRings(const Topology& t, const std::vector<int>& rankNode,
                       const SearchOptions& opt);

/// A sort key per local rank (its position in channel 0's single-node ring, which starts
/// at local rank 0). Host ranks (any cudaDev -1) or unknown devices: the identity.
std::vector<int> intraNodeOrder(const Topology& t, const std::vector<int>& cudaDevOfLocalRank);

}  // namespace topo
}  // namespace braid
