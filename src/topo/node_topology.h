// The process's node topology, found once: NCCL_TOPO_FILE if set, else hwloc detection,
// else (on failure, with a warning) a minimal one. NCCL_TOPO_DUMP_FILE, if set, receives
// the result once.
#pragma once
#include <string>

#include "src/topo/topology.h"

namespace braid {
namespace topo {

/// The cached node topology (thread-safe; the first call loads or detects it).
const Topology& nodeTopology();

/// What nodeTopology() does, uncached, with explicit settings (tests): loads
/// `topoFile` if non-empty, else detects; falls back to Topology::minimal() with a
/// warning on failure; then writes `dumpFile` if non-empty (a failure only warns).
Topology loadNodeTopology(const std::string& topoFile, const std::string& dumpFile);

}  // namespace topo
}  // namespace braid
