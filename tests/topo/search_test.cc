// Ring and tree search on small synthetic topologies (PCIe only, no NVLink).
#include <algorithm>

#include "src/topo/search.h"
#include "src/topo/summary.h"
#include "tests/topo/helpers.h"

namespace braid {
namespace topo {
namespace {

/// Two sockets, each with one PCIe switch holding two GPUs and one NIC; GPU bus order
/// interleaves the sockets (dev 0 and 2 on socket 0, 1 and 3 on socket 1).
const char* kPcieBox = R"(<system version="1">
  <cpu numaid="0" package="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <core id="0" cpus="0"/>
    <pci busid="0000:10:00.0" class="0x060400" vendor="0x1000" device="0xc010" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" device="0x20b5" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="80"/></pci>
      <pci busid="0000:12:00.0" class="0x030200" vendor="0x10de" device="0x20b5" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="2" sm="80"/></pci>
      <pci busid="0000:13:00.0" class="0x020000" vendor="0x15b3" device="0x101d" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="100000" port="1" rdma="1"/></nic>
      </pci>
    </pci>
  </cpu>
  <cpu numaid="1" package="1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <core id="1" cpus="1"/>
    <pci busid="0000:90:00.0" class="0x060400" vendor="0x1000" device="0xc010" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:91:00.0" class="0x030200" vendor="0x10de" device="0x20b5" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="1" sm="80"/></pci>
      <pci busid="0000:92:00.0" class="0x030200" vendor="0x10de" device="0x20b5" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="3" sm="80"/></pci>
      <pci busid="0000:93:00.0" class="0x020000" vendor="0x15b3" device="0x101d" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_1" dev="1" speed="100000" port="1" rdma="1"/></nic>
      </pci>
    </pci>
  </cpu>
</system>
)";

int countType(const Topology& t, const std::vector<int>& nodes, const std::vector<int>& ring,
              PathType type, bool cycle) {
  int n = 0;
  size_t links = cycle ? ring.size() : ring.size() - 1;
  for (size_t i = 0; i < links; ++i)
    n += t.path(nodes[size_t(ring[i])], nodes[size_t(ring[(i + 1) % ring.size()])]).type == type;
  return n;
}

TEST(TopoSearch, PcieRingKeepsSwitchNeighboursTogether) {
  Topology t = test::parse(kPcieBox);
  std::vector<int> nodes = rankNodes(t, {0, 1, 2, 3});
  EXPECT_EQ(t.path(nodes[0], nodes[2]).type, PathType::kPix);
  EXPECT_EQ(t.path(nodes[0], nodes[1]).type, PathType::kSys);
  RingSearch r = searchRings(t, nodes, SearchOptions{});
  const std::vector<int>& ring = r.channels[0].order;
  ASSERT_EQ(ring.size(), 4u);
  EXPECT_EQ(countType(t, nodes, ring, PathType::kSys, true), 2) << "cross the sockets twice";
  EXPECT_EQ(countType(t, nodes, ring, PathType::kPix, true), 2);
  EXPECT_EQ(r.worstType, PathType::kSys);
  EXPECT_DOUBLE_EQ(r.bottleneckGbps, t.interSocketGbps());
  // Identity order would cross four times; sorting the ranks by the key crosses twice.
  EXPECT_EQ(countType(t, nodes, {0, 1, 2, 3}, PathType::kSys, true), 4);
  std::vector<int> key = intraNodeOrder(t, {0, 1, 2, 3});
  std::vector<int> byKey(4);
  for (int r = 0; r < 4; ++r) byKey[size_t(key[size_t(r)])] = r;
  EXPECT_EQ(byKey, ring);
  EXPECT_EQ(countType(t, nodes, byKey, PathType::kSys, true), 2);
}

TEST(TopoSearch, SingleNodeChannelsRotateTheSameRing) {
  Topology t = test::parse(kPcieBox);
  SearchOptions opt;
  opt.nChannels = 3;
  RingSearch r = searchRings(t, rankNodes(t, {0, 1, 2, 3}), opt);
  ASSERT_EQ(r.channels.size(), 3u);
  const std::vector<int>& r0 = r.channels[0].order;
  EXPECT_EQ(r.channels[1].order, (std::vector<int>{r0[1], r0[2], r0[3], r0[0]}));
  for (const RingChannel& ch : r.channels) {
    EXPECT_EQ(ch.nicIn, -1);
    EXPECT_EQ(ch.treeHead, ch.order.front());
  }
  EXPECT_NE(r.channels[0].treeHead, r.channels[1].treeHead);
}

TEST(TopoSearch, MultiNodeRingEntersAndLeavesNearItsNic) {
  Topology t = test::parse(kPcieBox);
  std::vector<int> nodes = rankNodes(t, {0, 1, 2, 3});
  SearchOptions opt;
  opt.nChannels = 2;
  opt.multiNode = true;
  RingSearch r = searchRings(t, nodes, opt);
  ASSERT_EQ(r.channels.size(), 2u);
  EXPECT_NE(r.channels[0].nicIn, r.channels[1].nicIn);
  for (const RingChannel& ch : r.channels) {
    EXPECT_EQ(t.path(nodes[size_t(ch.order.front())], ch.nicIn).type, PathType::kPix);
    EXPECT_EQ(t.path(nodes[size_t(ch.order.back())], ch.nicOut).type, PathType::kPix);
    // As a chain, only one socket crossing: it leaves by the other socket's NIC.
    EXPECT_NE(ch.nicIn, ch.nicOut);
    EXPECT_EQ(countType(t, nodes, ch.order, PathType::kSys, false), 1);
    EXPECT_EQ(ch.treeHead, ch.order.front());
  }
}

TEST(TopoSearch, DegenerateInputs) {
  Topology t = test::parse(kPcieBox);
  RingSearch none = searchRings(t, {}, SearchOptions{});
  ASSERT_EQ(none.channels.size(), 1u);
  EXPECT_TRUE(none.channels[0].order.empty());
  RingSearch one = searchRings(t, rankNodes(t, {3}), SearchOptions{1, true});
  EXPECT_EQ(one.channels[0].order, (std::vector<int>{0}));
  EXPECT_EQ(t.node(one.channels[0].nicIn).name, "mlx5_1") << "the NIC next to GPU 3";
  RingSearch unknown = searchRings(t, {-1, -1, -1}, SearchOptions{2, true});
  EXPECT_EQ(unknown.channels[1].order, (std::vector<int>{0, 1, 2}));
  EXPECT_GE(unknown.channels[0].nicIn, 0);
  // Two ranks on one GPU: still a permutation.
  std::vector<int> key = intraNodeOrder(t, {1, 1, 0});
  std::sort(key.begin(), key.end());
  EXPECT_EQ(key, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace topo
}  // namespace braid
