#include "src/core/machine.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/topo/node_topology.h"
#include "src/topo/search.h"
#include "src/topo/summary.h"
#include "transports/net/net_registry.h"

namespace braid {

int intraNodeKey(const std::vector<PeerInfo>& peers, int rank) {
  std::vector<int> devs;
  int mine = 0;
  for (size_t r = 0; r < peers.size(); ++r) {
    if (peers[r].hostHash != peers[size_t(rank)].hostHash) continue;
    if (int(r) == rank) mine = int(devs.size());
    devs.push_back(peers[r].cudaDev);
  }
  const std::vector<int> order = topo::intraNodeOrder(topo::nodeTopology(), devs);
  return size_t(mine) < order.size() ? order[size_t(mine)] : mine;
}

RankLayout makeLayout(const std::vector<PeerInfo>& peers, const std::vector<int>& intraKey) {
  std::vector<int> nodeIds(peers.size(), 0);
  for (size_t r = 0; r < peers.size(); ++r) {
    nodeIds[r] = int(r);
    for (size_t q = 0; q < r; ++q)
      if (peers[q].hostHash == peers[r].hostHash) {
        nodeIds[r] = nodeIds[q];
        break;
      }
  }
  return RankLayout::fromNodes(nodeIds, intraKey);
}

CostModel defaultCostModel(double nicGbps) {
  // Measured on the 2-core development VM (docs/performance.md, "cost model"):
  // shm steps ~1 us apart at ~8 GB/s, TCP steps ~25 us at ~2.5 GB/s per connection.
  CostModel m;
  m.intra.alphaUs = 0.7;
  m.intra.gbps = 8;
  m.inter.alphaUs = 25;
  m.inter.gbps = 2.5;
  m.nicGbps = nicGbps > 0 ? nicGbps : 1.25;
  m.reduceGbps = 20;
  m.stepUs = 0.3;
  m.sliceUs = 0.05;
  return m;
}

void applyNetCost(const Net& net, CostModel* m) {
  if (net.name == "Socket") return;  // the defaults are the Socket net's measurements
  double mbps = 0, latUs = 0;
  for (const ncclNetProperties_v11_t& p : net.devices) {
    mbps += p.speed > 0 ? p.speed : 0;
    latUs = std::max<double>(latUs, p.latency);
  }
  const double devGbps = mbps / 8000.0;  // Mbit/s -> GB/s, all devices
  if (net.name == "UCX") {
    // UCX over TCP measured on the development VM against the Socket net in the same
    // runs (docs/performance.md, perf/net/compare_nets.sh): about 1.2x its per-message
    // time and half its bandwidth.
    m->inter.alphaUs = 30;
    m->inter.gbps = 1.2;
  } else {
    // RDMA and plugins: one connection runs at about the link rate; latency as the
    // device reports it, else a few microseconds (verbs RC round trips on real NICs).
    m->inter.alphaUs = latUs > 0 ? latUs : 3;
    if (devGbps > 0) m->inter.gbps = devGbps / double(net.devices.size());
  }
  if (devGbps > 0 && net.name != "UCX") m->nicGbps = devGbps;
}

CostModel topologyCostModel() {
  return defaultCostModel(topo::summarize(topo::nodeTopology()).nicGbps);
}

ncclResult_t loadCostModel(Comm* comm, CostModel* out) {
  *out = topologyCostModel();
  const std::string path = param::kTunerModel.get();
  if (path.empty()) {
    // The network this communicator's hosts would talk over sets the inter-node costs.
    // Choosing it loads plugins once per process, as NCCL's init does; a network that
    // cannot be used is reported when a connection needs it, not here.
    const Net* net = nullptr;
    if (NetRegistry::get().select(comm->settings.netName, &net) == ncclSuccess) {
      applyNetCost(*net, out);
      BRAID_INFO(kLogTuning, "inter-node costs from the %s net: %.1f us, %.2f GB/s per "
                 "connection, %.2f GB/s per node", net->name.c_str(), out->inter.alphaUs,
                 out->inter.gbps, out->nicGbps);
    }
    return ncclSuccess;
  }
  std::ifstream f(path);
  if (!f)
    return setError(ncclInvalidArgument, comm, "BRAID_TUNER_MODEL: cannot read '%s'",
                    path.c_str());
  std::stringstream text;
  text << f.rdbuf();
  std::string err;
  if (!out->parse(text.str(), &err))
    return setError(ncclInvalidArgument, comm, "BRAID_TUNER_MODEL '%s': %s", path.c_str(),
                    err.c_str());
  BRAID_INFO(kLogTuning, "cost model from %s", path.c_str());
  return ncclSuccess;
}

}  // namespace braid
