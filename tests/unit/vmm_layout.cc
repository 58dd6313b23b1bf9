// The flat window map's layout (vmm::planFlat): strides in 4 GiB units that hold every
// allocation, mappings at multiples of the granularity, peer p's window at
// base + p * stride, refusals that name the peer; and, without a GPU, the VMM calls
// failing with a message instead of crashing.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/os/cuda_rt.h"
#include "src/device/vmm.h"

namespace braid {
namespace {

constexpr uint64_t k4G = uint64_t(1) << 32;
constexpr size_t k2M = size_t(2) << 20;

/// Every property mapFlat relies on, for a layout planFlat accepted.
void checkLayout(const std::vector<size_t>& size, const std::vector<size_t>& off, size_t g,
                 const vmm::FlatLayout& l) {
  const size_t n = size.size();
  ASSERT_EQ(l.mapAt.size(), n);
  EXPECT_GT(l.stride, 0u);
  EXPECT_EQ(l.stride % k4G, 0u) << "stride " << l.stride;
  EXPECT_LE(l.stride / k4G, UINT32_MAX);
  EXPECT_EQ(l.reserve % g, 0u);
  for (size_t p = 0; p < n; ++p) {
    SCOPED_TRACE("peer " + std::to_string(p));
    EXPECT_GE(l.stride, off[p] + size[p]);
    EXPECT_EQ(l.mapAt[p] % g, 0u);
    EXPECT_EQ(uint64_t(l.mapAt[p]) + off[p], uint64_t(l.baseOffset) + p * l.stride);
    EXPECT_LE(uint64_t(l.mapAt[p]) + size[p], l.reserve);  // inside the reservation
    if (p + 1 < n) {
      EXPECT_LE(l.mapAt[p] + size[p], l.mapAt[p + 1]);  // no overlap
    }
  }
}

TEST(VmmLayout, OneToEightPeersOfVariedSizes) {
  for (size_t g : {size_t(4096), k2M}) {
    for (size_t n = 1; n <= 8; ++n) {
      std::vector<size_t> size(n), off(n);
      for (size_t p = 0; p < n; ++p) {
        size[p] = g * (1 + (p * 7 + n) % 5);
        if (p == 2) size[p] = size_t(5) * k4G + g;  // one peer above 4 GiB: stride grows
        off[p] = g * ((p * 3) % (size[p] / g));     // windows inside their allocations
      }
      SCOPED_TRACE("g " + std::to_string(g) + ", " + std::to_string(n) + " peers");
      vmm::FlatLayout l;
      std::string why;
      ASSERT_TRUE(vmm::planFlat(size, off, g, &l, &why)) << why;
      checkLayout(size, off, g, l);
      EXPECT_EQ(l.stride, n > 2 ? 6 * k4G : k4G);  // 5 GiB and a few granules: 6
    }
  }
}

TEST(VmmLayout, StrideRoundsUpToFourGiB) {
  vmm::FlatLayout l;
  std::string why;
  // offset + size exactly 4 GiB: one unit; a granule more: two.
  ASSERT_TRUE(vmm::planFlat({size_t(k4G) - k2M, 2 * k2M}, {0, k2M}, k2M, &l, &why)) << why;
  EXPECT_EQ(l.stride, k4G);
  checkLayout({size_t(k4G) - k2M, 2 * k2M}, {0, k2M}, k2M, l);
  ASSERT_TRUE(vmm::planFlat({size_t(k4G), 2 * k2M}, {0, k2M}, k2M, &l, &why)) << why;
  EXPECT_EQ(l.stride, 2 * k4G);
  checkLayout({size_t(k4G), 2 * k2M}, {0, k2M}, k2M, l);
}

TEST(VmmLayout, EqualUnalignedOffsetsAreMapped) {
  // Windows 4 KiB into 2 MiB-granular allocations on every peer: base moves with them.
  std::vector<size_t> size = {4 * k2M, 2 * k2M, 8 * k2M}, off = {4096, 4096 + k2M, 4096};
  vmm::FlatLayout l;
  std::string why;
  ASSERT_TRUE(vmm::planFlat(size, off, k2M, &l, &why)) << why;
  checkLayout(size, off, k2M, l);
  EXPECT_EQ(l.baseOffset % k2M, 4096u);
}

TEST(VmmLayout, MisalignedOffsetNamesThePeer) {
  vmm::FlatLayout l;
  std::string why;
  EXPECT_FALSE(vmm::planFlat({k2M, k2M, k2M}, {0, 0, 4096}, k2M, &l, &why));
  EXPECT_NE(why.find("team member 2"), std::string::npos) << why;
  EXPECT_NE(why.find("4096"), std::string::npos) << why;
  EXPECT_NE(why.find(std::to_string(k2M)), std::string::npos) << why;
}

TEST(VmmLayout, WindowOutsideItsAllocationNamesThePeer) {
  vmm::FlatLayout l;
  std::string why;
  EXPECT_FALSE(vmm::planFlat({k2M, k2M}, {0, k2M}, k2M, &l, &why));
  EXPECT_NE(why.find("team member 1"), std::string::npos) << why;
  EXPECT_FALSE(vmm::planFlat({k2M, 0}, {0, 0}, k2M, &l, &why));
  EXPECT_NE(why.find("team member 1"), std::string::npos) << why;
}

TEST(VmmLayout, BadArgumentsAndOverflowAreRefused) {
  vmm::FlatLayout l;
  std::string why;
  EXPECT_FALSE(vmm::planFlat({}, {}, k2M, &l, &why));
  EXPECT_FALSE(vmm::planFlat({k2M}, {0, 0}, k2M, &l, &why));
  for (size_t g : {size_t(0), size_t(3 << 20), size_t(2 * k4G)}) {
    why.clear();
    EXPECT_FALSE(vmm::planFlat({k2M}, {0}, g, &l, &why)) << g;
    EXPECT_NE(why.find("granularity"), std::string::npos) << why;
  }
  why.clear();
  EXPECT_FALSE(vmm::planFlat({SIZE_MAX / 2 + 1, k2M}, {0, 0}, k2M, &l, &why));
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
  why.clear();
  EXPECT_FALSE(vmm::planFlat(std::vector<size_t>(9, size_t(1) << 61), std::vector<size_t>(9, 0),
                             k2M, &l, &why));
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
}

TEST(VmmLayout, WithoutAGpuEveryCallFailsWithAMessage) {
  if (cudart::available()) GTEST_SKIP() << "a GPU is usable: the GPU suites cover this";
  EXPECT_FALSE(vmm::supported(0));
  void* p = reinterpret_cast<void*>(1);
  EXPECT_NE(vmm::memAlloc(&p, 1 << 20, 0), ncclSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_STRNE(ncclGetLastError(nullptr), "");
  EXPECT_FALSE(vmm::owns(p));
  int host[4] = {};
  vmm::FlatMap m;
  EXPECT_NE(vmm::mapFlat({host, host + 1}, 0, &m), ncclSuccess);
  EXPECT_EQ(m.base, nullptr);
  EXPECT_STRNE(ncclGetLastError(nullptr), "");
  EXPECT_EQ(vmm::memFree(nullptr), ncclSuccess);
}

}  // namespace
}  // namespace braid
