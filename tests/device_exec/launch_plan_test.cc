// planLaunches: the CUDA executor's packing of one communicator's ops into launches.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/device/launch_plan.h"

using namespace braid;

namespace {

LaunchItem coll(ncclDataType_t t, DevRed red, uint32_t programs, size_t scratch = 0) {
  LaunchItem it;
  it.coll = red == DevRed::kNone ? Coll::kAllGather : Coll::kAllReduce;
  it.type = t;
  it.red = red;
  it.nPrograms = programs;
  it.scratchBytes = scratch;
  return it;
}

LaunchItem p2p(bool isSend, int peer, uint32_t programs = 1) {
  LaunchItem it;
  it.coll = Coll::kSendRecv;
  it.isSend = isSend;
  it.peer = peer;
  it.nPrograms = programs;
  it.type = ncclFloat32;
  it.red = DevRed::kNone;
  return it;
}

std::vector<LaunchSpec> plan(const std::vector<LaunchItem>& items) {
  std::vector<LaunchSpec> out;
  std::string why;
  EXPECT_TRUE(planLaunches(items, &out, &why)) << why;
  return out;
}

}  // namespace

TEST(LaunchPlan, CollectivesOfOneKernelShareALaunchWithABarrierBetween) {
  auto specs = plan({coll(ncclFloat32, DevRed::kSum, 4), coll(ncclFloat32, DevRed::kSum, 2),
                     coll(ncclFloat32, DevRed::kSum, 8)});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].count, 3u);
  EXPECT_EQ(specs[0].nBlocks, 8u);
  EXPECT_EQ(specs[0].type, ncclFloat32);
  EXPECT_EQ(specs[0].red, DevRed::kSum);
  EXPECT_EQ(specs[0].newStage, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(specs[0].firstBlock, (std::vector<uint16_t>{0, 0, 0}));
}

TEST(LaunchPlan, AnotherKernelStartsAnotherLaunch) {
  auto specs = plan({coll(ncclFloat32, DevRed::kSum, 2), coll(ncclFloat32, DevRed::kMax, 2),
                     coll(ncclFloat16, DevRed::kMax, 2), coll(ncclFloat16, DevRed::kMax, 1)});
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].count, 1u);
  EXPECT_EQ(specs[1].first, 1u);
  EXPECT_EQ(specs[1].red, DevRed::kMax);
  EXPECT_EQ(specs[2].first, 2u);
  EXPECT_EQ(specs[2].count, 2u);
  EXPECT_EQ(specs[2].type, ncclFloat16);
}

TEST(LaunchPlan, CopyOnlyOpsOfAnyTypeShareTheByteKernel) {
  auto specs = plan({coll(ncclFloat32, DevRed::kNone, 2), coll(ncclInt8, DevRed::kNone, 2),
                     p2p(true, 1), coll(ncclFloat64, DevRed::kNone, 1)});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].type, ncclUint8);
  EXPECT_EQ(specs[0].red, DevRed::kNone);
  EXPECT_EQ(specs[0].count, 4u);
}

TEST(LaunchPlan, SendRecvLanesRunSideBySideAndALaneKeepsItsBlocks) {
  // send to 1, recv from 1, send to 2 (2 programs), send to 1 again, recv from 3
  auto specs = plan({p2p(true, 1), p2p(false, 1), p2p(true, 2, 2), p2p(true, 1),
                     p2p(false, 3)});
  ASSERT_EQ(specs.size(), 1u);
  const LaunchSpec& s = specs[0];
  EXPECT_EQ(s.newStage, (std::vector<uint8_t>{1, 0, 0, 0, 0}));
  // lanes: send1 -> block 0, recv1 -> 1, send2 -> 2..3, recv3 -> 4
  EXPECT_EQ(s.firstBlock, (std::vector<uint16_t>{0, 1, 2, 0, 4}));
  EXPECT_EQ(s.nBlocks, 5u);
}

TEST(LaunchPlan, ALaneIsAsWideAsItsWidestOp) {
  auto specs = plan({p2p(true, 1, 1), p2p(true, 1, 3), p2p(false, 1, 2)});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].firstBlock, (std::vector<uint16_t>{0, 0, 3}));
  EXPECT_EQ(specs[0].nBlocks, 5u);
}

TEST(LaunchPlan, ACollectiveBetweenSendRecvRunsEndsTheStage) {
  auto specs = plan({p2p(true, 1), coll(ncclUint8, DevRed::kNone, 2), p2p(false, 1)});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].newStage, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(specs[0].firstBlock, (std::vector<uint16_t>{0, 0, 0}));
}

TEST(LaunchPlan, FullLaunchesSplitAtStageBoundaries) {
  std::vector<LaunchItem> items;
  for (int i = 0; i < DevLaunch::kMaxWorks + 3; ++i) items.push_back(coll(ncclInt32, DevRed::kSum, 1));
  auto specs = plan(items);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].count, size_t(DevLaunch::kMaxWorks));
  EXPECT_EQ(specs[1].count, 3u);
  // A send/recv stage is never split: it moves to the next launch whole.
  items.assign(size_t(DevLaunch::kMaxWorks) - 1, coll(ncclUint8, DevRed::kNone, 1));
  items.push_back(p2p(true, 1));
  items.push_back(p2p(false, 1));
  specs = plan(items);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1].count, 2u);
  EXPECT_EQ(specs[1].firstBlock, (std::vector<uint16_t>{0, 1}));
}

TEST(LaunchPlan, TooManyLanesIsAnErrorThatSaysSo) {
  std::vector<LaunchItem> items;
  for (int p = 0; p < DevLaunch::kMaxBlocks + 1; ++p) items.push_back(p2p(true, p));
  std::vector<LaunchSpec> out;
  std::string why;
  EXPECT_FALSE(planLaunches(items, &out, &why));
  EXPECT_NE(why.find("send/recv"), std::string::npos) << why;
  EXPECT_NE(why.find("split the group"), std::string::npos) << why;
}

TEST(LaunchPlan, ScratchPiecesAreAlignedAndDisjoint) {
  auto specs = plan({coll(ncclFloat32, DevRed::kSum, 1, 100), coll(ncclFloat32, DevRed::kSum, 1, 0),
                     coll(ncclFloat32, DevRed::kSum, 1, 1000)});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].scratchOffset, (std::vector<size_t>{0, 256, 256}));
  EXPECT_EQ(specs[0].scratchBytes, 256u + 1024u);
}

TEST(LaunchPlan, StreamsAreCollectedOnceFirstOpFirst) {
  auto a = reinterpret_cast<cudaStream_t>(uintptr_t(0x10));
  auto b = reinterpret_cast<cudaStream_t>(uintptr_t(0x20));
  std::vector<LaunchItem> items{coll(ncclFloat32, DevRed::kSum, 1), coll(ncclFloat32, DevRed::kSum, 1),
                                coll(ncclFloat32, DevRed::kSum, 1)};
  items[0].stream = b;
  items[1].stream = a;
  items[2].stream = b;
  auto specs = plan(items);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].streams, (std::vector<cudaStream_t>{b, a}));
}

TEST(LaunchPlan, NothingToLaunch) { EXPECT_TRUE(plan({}).empty()); }

TEST(LaunchPlan, AGroupIsOrderedOneKernelAfterAnother) {
  // The mixed group of tests/gpu: float sum, int32 bcast, uint8 gather, double max, p2p.
  std::vector<LaunchItem> items{coll(ncclFloat32, DevRed::kSum, 2), coll(ncclInt32, DevRed::kNone, 2),
                                coll(ncclUint8, DevRed::kNone, 2), coll(ncclFloat64, DevRed::kMax, 2),
                                p2p(true, 1), p2p(false, 2), coll(ncclFloat32, DevRed::kSum, 1)};
  const std::vector<size_t> order = kernelOrder(items);
  EXPECT_EQ(order, (std::vector<size_t>{4, 5, 1, 2, 0, 6, 3}));
  std::vector<LaunchItem> sorted;
  for (size_t i : order) sorted.push_back(items[i]);
  auto specs = plan(sorted);
  ASSERT_EQ(specs.size(), 3u) << "one launch per kernel";
  EXPECT_EQ(specs[0].count, 4u);
  EXPECT_EQ(specs[0].newStage, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(specs[0].firstBlock, (std::vector<uint16_t>{0, 1, 0, 0}));
  EXPECT_EQ(specs[1].red, DevRed::kSum);
  EXPECT_EQ(specs[2].red, DevRed::kMax);
}

// The deadlock this order prevents: ranks whose groups name the same collectives but
// different send/recv ops must still launch the collectives in the same order, and
// keep all their send/recv ops in one stage.
TEST(LaunchPlan, GroupOrderDoesNotDependOnARanksOwnSendRecv) {
  // Rank A: {send to B, all-reduce f32, all-gather}; rank B: {all-reduce, all-gather,
  // recv from A}.
  std::vector<LaunchItem> a{p2p(true, 1), coll(ncclFloat32, DevRed::kSum, 2),
                            coll(ncclUint8, DevRed::kNone, 2)};
  std::vector<LaunchItem> b{coll(ncclFloat32, DevRed::kSum, 2), coll(ncclUint8, DevRed::kNone, 2),
                            p2p(false, 0)};
  auto collOrder = [](const std::vector<LaunchItem>& items) {
    std::vector<std::pair<int, int>> out;  // (coll, red) of the collectives, launch order
    for (size_t i : kernelOrder(items))
      if (items[i].coll != Coll::kSendRecv) out.emplace_back(int(items[i].coll), int(items[i].red));
    return out;
  };
  EXPECT_EQ(collOrder(a), collOrder(b));
  // Send/recv separated by a collective still form one stage, ahead of it.
  std::vector<LaunchItem> c{p2p(true, 1), coll(ncclUint8, DevRed::kNone, 2), p2p(false, 1)};
  std::vector<LaunchItem> sorted;
  for (size_t i : kernelOrder(c)) sorted.push_back(c[i]);
  auto specs = plan(sorted);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].newStage, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(specs[0].firstBlock, (std::vector<uint16_t>{0, 1, 0}));
}
