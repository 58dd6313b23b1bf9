// A few numbers about the node topology, for the tuner's cost-model defaults and logs.
#pragma once
#include <string>

namespace braid {
namespace topo {

class Topology;

struct TopoSummary {
  int packages = 0, numaNodes = 0, cores = 0, gpus = 0, nics = 0, nvswitches = 0;
  double nicGbps = 0;       ///< GB/s of the fastest NIC port, 0 if none
  double totalNicGbps = 0;  ///< sum over NIC ports, GB/s
  double gpuGpuGbps = 0;    ///< bottleneck GB/s between two GPUs (worst pair), 0 if < 2 GPUs
};

/// Counts and bandwidths of a topology. NIC speeds unknown to the system count as
/// 10 Gb/s (as NCCL).
TopoSummary summarize(const Topology& t);

/// One line for logs: "1 package, 1 NUMA node, 2 cores, 0 GPUs, 1 NIC (fastest 1.2 GB/s,
/// total 1.2 GB/s), 0 NVSwitches".
std::string describe(const TopoSummary& s);

}  // namespace topo
}  // namespace braid
