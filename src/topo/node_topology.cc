#include "src/topo/node_topology.h"

#include <chrono>
#include <mutex>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/topo/summary.h"

namespace braid {
namespace topo {

Topology loadNodeTopology(const std::string& topoFile, const std::string& dumpFile) {
  auto t0 = std::chrono::steady_clock::now();
  std::optional<Topology> t;
  std::string error;
  if (!topoFile.empty()) {
    t = Topology::load(topoFile, &error);
    if (!t) BRAID_WARN("NCCL_TOPO_FILE: %s; detecting the topology instead", error.c_str());
  }
  if (!t) {
    t = Topology::detect(&error);
    if (!t) BRAID_WARN("topology detection failed (%s); using a minimal topology", error.c_str());
  }
  if (!t) t = Topology::minimal();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
  BRAID_INFO(kLogGraph, "topology from %s in %.1f ms: %s", t->source().c_str(), ms,
             describe(summarize(*t)).c_str());
  if (!dumpFile.empty()) {
    if (t->save(dumpFile, &error))
      BRAID_INFO(kLogGraph, "NCCL_TOPO_DUMP_FILE: wrote the topology to %s", dumpFile.c_str());
    else
      BRAID_WARN("NCCL_TOPO_DUMP_FILE: %s", error.c_str());
  }
  return std::move(*t);
}

const Topology& nodeTopology() {
  static std::once_flag once;
  static const Topology* topo = nullptr;
  std::call_once(once, [] {
    topo = new Topology(loadNodeTopology(param::kTopoFile.get(), param::kTopoDumpFile.get()));
  });
  return *topo;
}

}  // namespace topo
}  // namespace braid
