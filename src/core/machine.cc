#include "src/core/machine.h"

#include <fstream>
#include <sstream>
#include <string>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/core/comm.h"
#include "src/core/error.h"

namespace braid {

RankLayout makeLayout(const std::vector<PeerInfo>& peers) {
  std::vector<int> nodeIds(peers.size(), 0);
  for (size_t r = 0; r < peers.size(); ++r) {
    nodeIds[r] = int(r);
    for (size_t q = 0; q < r; ++q)
      if (peers[q].hostHash == peers[r].hostHash) {
        nodeIds[r] = nodeIds[q];
        break;
      }
  }
  // Inside a node: GPU ranks by device, then host ranks by rank.
  std::vector<int> order(peers.size(), 0);
  for (size_t r = 0; r < peers.size(); ++r)
    order[r] = peers[r].cudaDev >= 0 ? peers[r].cudaDev : 1 << 20;
  return RankLayout::fromNodes(nodeIds, order);
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

ncclResult_t loadCostModel(Comm* comm, CostModel* out) {
  *out = defaultCostModel(0);
  const std::string path = param::kTunerModel.get();
  if (path.empty()) return ncclSuccess;
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
