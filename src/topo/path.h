// How two topology nodes reach each other, with NCCL's path-type vocabulary.
#pragma once
#include <cstdint>

namespace braid {
namespace topo {

/// Path types from closest to farthest (the enum order is the ranking).
enum class PathType : uint8_t {
  kLoc,  ///< the same device, or CPU-side nodes of one NUMA node
  kNvl,  ///< NVLink, direct or through NVSwitches
  kNvb,  ///< NVLink through one intermediate GPU
  kPix,  ///< through at most one PCIe switch
  kPxb,  ///< through several PCIe switches, not through the CPU
  kPhb,  ///< through the CPU's PCIe host bridge (same NUMA node)
  kSys,  ///< across the SMP interconnect between NUMA nodes / sockets
  kNet,  ///< across the network (another node)
};

/// "LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET".
const char* pathTypeName(PathType t);

/// A path between two nodes: its type, bottleneck bandwidth and number of links.
struct Path {
  PathType type = PathType::kSys;
  double gbps = 0;  ///< bottleneck bandwidth in GB/s per direction
  int hops = 0;     ///< links traversed (0 for a node to itself)
};

}  // namespace topo
}  // namespace braid
