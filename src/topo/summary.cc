#include "src/topo/summary.h"

#include <algorithm>
#include <cstdio>

#include "src/topo/topology.h"

namespace braid {
namespace topo {

TopoSummary summarize(const Topology& t) {
  TopoSummary s;
  s.packages = t.count(NodeType::kPackage);
  s.numaNodes = t.count(NodeType::kNuma);
  s.cores = t.count(NodeType::kCore);
  s.gpus = t.count(NodeType::kGpu);
  s.nics = t.count(NodeType::kNic);
  s.nvswitches = t.count(NodeType::kNvSwitch);
  for (int n : t.nodesOfType(NodeType::kNic)) {
    double g = t.node(n).effectiveSpeedMbps() / 8000.0;
    s.nicGbps = std::max(s.nicGbps, g);
    s.totalNicGbps += g;
  }
  std::vector<int> gpus = t.nodesOfType(NodeType::kGpu);
  bool first = true;
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      double g = t.path(gpus[i], gpus[j]).gbps;
      s.gpuGpuGbps = first ? g : std::min(s.gpuGpuGbps, g);
      first = false;
    }
  return s;
}

std::string describe(const TopoSummary& s) {
  auto plural = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  char buf[256];
  std::string out = plural(s.packages, "package", "packages") + ", " +
                    plural(s.numaNodes, "NUMA node", "NUMA nodes") + ", " +
                    plural(s.cores, "core", "cores") + ", " + plural(s.gpus, "GPU", "GPUs");
  if (s.gpus > 1) {
    snprintf(buf, sizeof buf, " (GPU-GPU %.1f GB/s)", s.gpuGpuGbps);
    out += buf;
  }
  out += ", " + plural(s.nics, "NIC", "NICs");
  if (s.nics > 0) {
    snprintf(buf, sizeof buf, " (fastest %.1f GB/s, total %.1f GB/s)", s.nicGbps,
             s.totalNicGbps);
    out += buf;
  }
  out += ", " + plural(s.nvswitches, "NVSwitch", "NVSwitches");
  return out;
}

}  // namespace topo
}  // namespace braid
