// The shipped DGX H100 topology: paths, summary, rings and trees over it.
#include <algorithm>
#include <set>

#include "src/topo/search.h"
#include "src/topo/summary.h"
#include "tests/topo/helpers.h"

namespace braid {
namespace topo {
namespace {

class DgxH100 : public ::testing::Test {
 protected:
  void SetUp() override { t = test::loadShipped("dgx-h100.xml"); }
  int gpu(int dev) const { return t.gpuOfCudaDev(dev); }
  int nic(int dev) const {
    for (int n : t.nodesOfType(NodeType::kNic))
      if (t.node(n).index == dev) return n;
    return -1;
  }
  std::vector<int> allGpus() const { return rankNodes(t, {0, 1, 2, 3, 4, 5, 6, 7}); }
  Topology t;
};

TEST_F(DgxH100, Counts) {
  TopoSummary s = summarize(t);
  EXPECT_EQ(s.packages, 2);
  EXPECT_EQ(s.numaNodes, 2);
  EXPECT_EQ(s.cores, 112);
  EXPECT_EQ(s.gpus, 8);
  EXPECT_EQ(s.nics, 8);
  EXPECT_EQ(s.nvswitches, 4);
  EXPECT_EQ(t.count(NodeType::kPciSwitch), 4);
  EXPECT_DOUBLE_EQ(s.nicGbps, 50.0);        // 400 Gb/s
  EXPECT_DOUBLE_EQ(s.totalNicGbps, 400.0);  // 8 x 50 GB/s
  EXPECT_NEAR(s.gpuGpuGbps, 450.0, 1e-9);
  for (int g : t.nodesOfType(NodeType::kGpu)) {
    EXPECT_EQ(t.node(g).sm, 90);
    double links = 0;
    for (const NvLink& l : t.nvlinks())
      if (l.from == g || l.to == g) links += l.count;
    EXPECT_EQ(links, 18);
  }
  std::string d = describe(s);
  EXPECT_NE(d.find("8 GPUs (GPU-GPU 450.0 GB/s)"), std::string::npos) << d;
}

TEST_F(DgxH100, GpuGpuIsNvlink450) {
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      Path p = t.path(gpu(a), gpu(b));
      if (a == b) {
        EXPECT_EQ(p.type, PathType::kLoc);
        continue;
      }
      EXPECT_EQ(p.type, PathType::kNvl) << a << "-" << b;
      EXPECT_NEAR(p.gbps, 450.0, 1e-9);
      EXPECT_EQ(p.hops, 2);  // through the NVSwitches
    }
  Path toSwitch = t.path(gpu(0), t.nodesOfType(NodeType::kNvSwitch)[0]);
  EXPECT_EQ(toSwitch.type, PathType::kNvl);
  EXPECT_DOUBLE_EQ(toSwitch.gbps, 125.0);  // 5 links
}

TEST_F(DgxH100, GpuToNicPaths) {
  // GPU 2k and 2k+1 share a switch with NICs 2k and 2k+1.
  for (int g = 0; g < 8; ++g)
    for (int n = 0; n < 8; ++n) {
      Path p = t.path(gpu(g), nic(n));
      EXPECT_EQ(p.hops, t.path(nic(n), gpu(g)).hops);
      if (g / 2 == n / 2) {
        EXPECT_TRUE(p.type == PathType::kPix || p.type == PathType::kPxb)
            << g << "-" << n << " " << pathTypeName(p.type);
        EXPECT_DOUBLE_EQ(p.gbps, 50.0);  // the NIC port, below PCIe Gen5 x16
        EXPECT_EQ(p.hops, 2);
      } else if (g / 4 == n / 4) {
        EXPECT_EQ(p.type, PathType::kPhb) << g << "-" << n;
      } else {
        EXPECT_EQ(p.type, PathType::kSys) << g << "-" << n;
        EXPECT_DOUBLE_EQ(p.gbps, t.interSocketGbps());
      }
    }
  // CPU side: cores of one NUMA node are LOC, across sockets SYS; a GPU is PHB to its
  // own NUMA node and SYS to the other.
  std::vector<int> numas = t.nodesOfType(NodeType::kNuma);
  std::vector<int> cores = t.nodesOfType(NodeType::kCore);
  EXPECT_EQ(t.path(cores[0], cores[1]).type, PathType::kLoc);
  EXPECT_EQ(t.path(cores[0], cores[60]).type, PathType::kSys);
  EXPECT_EQ(t.path(gpu(0), numas[0]).type, PathType::kPhb);
  EXPECT_EQ(t.path(gpu(0), numas[1]).type, PathType::kSys);
  EXPECT_STREQ(pathTypeName(PathType::kPxb), "PXB");
}

TEST_F(DgxH100, MultiNodeRingsUseDifferentNicsAndStartNearThem) {
  SearchOptions opt;
  opt.nChannels = 8;
  opt.multiNode = true;
  RingSearch r = searchRings(t, allGpus(), opt);
  ASSERT_EQ(r.channels.size(), 8u);
  EXPECT_EQ(r.worstType, PathType::kNvl);
  EXPECT_NEAR(r.bottleneckGbps, 450.0, 1e-9);
  std::set<int> nicsIn;
  for (const RingChannel& ch : r.channels) {
    std::vector<int> sorted = ch.order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7})) << "visits every GPU once";
    ASSERT_GE(ch.nicIn, 0);
    ASSERT_GE(ch.nicOut, 0);
    nicsIn.insert(ch.nicIn);
    // Enters at a GPU on the NIC's switch, leaves from one on nicOut's switch.
    EXPECT_LE(t.path(gpu(ch.order.front()), ch.nicIn).type, PathType::kPxb);
    EXPECT_LE(t.path(gpu(ch.order.back()), ch.nicOut).type, PathType::kPxb);
    // Tree: the head is next to the NIC, the chain covers the node.
    EXPECT_EQ(ch.treeHead, ch.order.front());
    EXPECT_LE(t.path(gpu(ch.treeHead), ch.nicIn).type, PathType::kPix);
    ASSERT_EQ(ch.treeChain.size(), 8u);
    EXPECT_EQ(ch.treeChain[0], ch.treeHead);
  }
  EXPECT_EQ(nicsIn.size(), 8u) << "8 channels over 8 NICs";
  EXPECT_NE(r.channels[0].order.front(), r.channels[1].order.front())
      << "channels sharing a switch enter at different GPUs";
}

TEST_F(DgxH100, FourGpusOfOneSocketUseOnlyTheirNics) {
  SearchOptions opt;
  opt.nChannels = 4;
  opt.multiNode = true;
  RingSearch r = searchRings(t, rankNodes(t, {0, 1, 2, 3}), opt);
  std::set<int> used;
  for (const RingChannel& ch : r.channels) {
    used.insert(t.node(ch.nicIn).index);
    used.insert(t.node(ch.nicOut).index);
  }
  EXPECT_EQ(used, (std::set<int>{0, 1, 2, 3}));
}

TEST_F(DgxH100, IntraNodeOrderIsAPermutation) {
  std::vector<int> key = intraNodeOrder(t, {3, 1, 7, 5, 0, 2, 4, 6});
  std::vector<int> sorted = key;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(key[0], 0) << "the ring starts at local rank 0";
  // Unknown devices or host ranks: identity.
  EXPECT_EQ(intraNodeOrder(t, {0, 9}), (std::vector<int>{0, 1}));
  EXPECT_EQ(intraNodeOrder(t, {-1, -1, -1}), (std::vector<int>{0, 1, 2}));
}

TEST_F(DgxH100, HostRanksOnCoresCrossTheSocketsTwice) {
  // 12 ranks on cores alternating between the sockets: the ring must group each
  // socket's ranks (2 SYS crossings), the greedy + 2-opt path (more than 10 ranks).
  std::vector<int> cores = t.nodesOfType(NodeType::kCore);
  std::vector<int> nodes;
  for (int i = 0; i < 12; ++i) nodes.push_back(cores[size_t(i % 2 ? 56 + i : i)]);
  RingSearch r = searchRings(t, nodes, SearchOptions{});
  const std::vector<int>& ring = r.channels[0].order;
  ASSERT_EQ(ring.size(), 12u);
  int crossings = 0;
  for (size_t i = 0; i < ring.size(); ++i)
    crossings += t.path(nodes[size_t(ring[i])], nodes[size_t(ring[(i + 1) % 12])]).type ==
                 PathType::kSys;
  EXPECT_EQ(crossings, 2);
  EXPECT_EQ(r.worstType, PathType::kSys);
}

}  // namespace
}  // namespace topo
}  // namespace braid
