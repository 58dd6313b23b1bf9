// The shipped dump of the development VM (topologies/this-machine.xml).
#include <fstream>
#include <iterator>

#include "src/topo/search.h"
#include "src/topo/summary.h"
#include "tests/topo/helpers.h"

namespace braid {
namespace topo {
namespace {

TEST(TopoThisMachine, Summary) {
  Topology t = test::loadShipped("this-machine.xml");
  TopoSummary s = summarize(t);
  EXPECT_EQ(s.packages, 1);
  EXPECT_EQ(s.numaNodes, 1);
  EXPECT_EQ(s.cores, 2);
  EXPECT_EQ(s.gpus, 0);
  EXPECT_EQ(s.nvswitches, 0);
  EXPECT_EQ(s.nics, 1);
  EXPECT_DOUBLE_EQ(s.nicGbps, 1.25);  // speed unknown: 10 Gb/s, as NCCL
  EXPECT_DOUBLE_EQ(s.totalNicGbps, 1.25);
  EXPECT_DOUBLE_EQ(s.gpuGpuGbps, 0.0);
  EXPECT_EQ(describe(s),
            "1 package, 1 NUMA node, 2 cores, 0 GPUs, 1 NIC (fastest 1.2 GB/s, total 1.2 GB/s), "
            "0 NVSwitches");
  // The file is exactly what toXml() writes (it was generated, not hand-edited).
  std::string err;
  std::ifstream in(test::topologiesDir() + "/this-machine.xml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(t.toXml(), text);
}

TEST(TopoThisMachine, HostRanksKeepTheIdentityOrder) {
  Topology t = test::loadShipped("this-machine.xml");
  EXPECT_EQ(intraNodeOrder(t, {-1, -1, -1, -1}), (std::vector<int>{0, 1, 2, 3}));
  // Host ranks placed on the cores of the one NUMA node: all LOC; ranks sharing a
  // core are kept adjacent (fewer hops).
  std::vector<int> cores = t.nodesOfType(NodeType::kCore);
  ASSERT_EQ(cores.size(), 2u);
  RingSearch two = searchRings(t, {cores[0], cores[1]}, SearchOptions{});
  EXPECT_EQ(two.channels[0].order, (std::vector<int>{0, 1}));
  RingSearch r = searchRings(t, {cores[0], cores[1], cores[0], cores[1]}, SearchOptions{});
  EXPECT_EQ(r.channels[0].order, (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(r.worstType, PathType::kLoc);
  SearchOptions multi;
  multi.multiNode = true;
  RingSearch m = searchRings(t, {cores[0], cores[1]}, multi);
  EXPECT_EQ(t.node(m.channels[0].nicIn).name, "eth0");
  EXPECT_EQ(t.path(cores[0], m.channels[0].nicIn).type, PathType::kPhb);
}

}  // namespace
}  // namespace topo
}  // namespace braid
