// NVLinks from NVML, loaded at run time (dlopen of libnvidia-ml.so.1): no build or load
// dependency on the driver. Without NVML (no driver, no GPU) nothing changes.
#pragma once

namespace braid {
namespace topo {

class Topology;

/// Adds the NVLinks of the topology's GPUs (to GPUs and to NVSwitches, which are
/// created from the links' remote ends when not already known) and the GPUs' compute
/// capability. Returns false if NVML could not be used.
bool addNvmlLinks(Topology* t);

}  // namespace topo
}  // namespace braid
