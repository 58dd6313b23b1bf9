// Every registered collective algorithm run through the CUDA executor's interpreter
// (host emulation) and compared byte for byte with the host executor: rank counts 1..5
// and 8, counts from 1 to many slices, roots, in and out of place, several FIFO
// geometries (wrap-around, slices smaller than a slot, two channels), every type x op.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/device_emu/emu_case.h"

namespace braid {
namespace emutest {
namespace {

std::vector<int> collectiveAlgos() {
  std::vector<int> out;
  const auto& all = allAlgorithms();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].coll != Coll::kSendRecv) out.push_back(int(i));
  return out;
}

std::string algoLabel(const ::testing::TestParamInfo<int>& info) {
  const Algorithm& a = allAlgorithms()[info.param];
  return std::string(collName(a.coll)) + "_" + a.name;
}

bool isHier(const Algorithm& a) { return std::string(a.name) == "hier"; }

/// Geometries: {nslots, slotBytes, chunkBytes, nChannels, sliceBytes}.
struct Geo {
  uint32_t nslots;
  uint64_t slotBytes, chunkBytes;
  int nChannels;
  uint64_t sliceBytes;
};
constexpr Geo kGeos[] = {
    {4, 256, 512, 1, 0},   // whole slots, wrap-around after 4
    {4, 256, 128, 2, 64},  // slices of a quarter slot, two channels
    {2, 64, 64, 1, 0},     // tiny FIFO: every step wraps
};

void check(const EmuCase& c) {
  const EmuResult r = runEmuCase(c);
  if (r.status == EmuStatus::kUnsupported) return;  // the builder declined (e.g. hier on 1 node)
  EXPECT_EQ(r.status, EmuStatus::kPassed) << r.message;
}

class EmuAlgo : public ::testing::TestWithParam<int> {};

TEST_P(EmuAlgo, RanksCountsRootsPlacements) {
  const Algorithm* algo = &allAlgorithms()[GetParam()];
  int k = 0;  // rotates types, ops and geometries across cases
  for (int n : {1, 2, 3, 4, 5, 8}) {
    std::set<uint64_t> counts = {1, 7, uint64_t(n > 1 ? n - 1 : 1), 613};
    if (n == 8) counts = {5, 613};
    std::set<int> roots = {0};
    if (isRooted(algo->coll)) roots = {0, n - 1};
    std::shared_ptr<const RankLayout> layout;
    if (isHier(*algo) && n % 2 == 0 && n >= 4) {
      std::vector<int> nodes;
      for (int r = 0; r < n; ++r) nodes.push_back(r / 2);
      layout = std::make_shared<const RankLayout>(RankLayout::fromNodes(nodes));
    }
    for (uint64_t count : counts) {
      for (int root : roots) {
        for (bool inPlace : {false, true}) {
          EmuCase c;
          c.algo = algo;
          c.nranks = n;
          c.count = count;
          c.root = root;
          c.inPlace = inPlace;
          c.layout = layout;
          const Geo& g = kGeos[k % 3];
          c.nslots = g.nslots;
          c.slotBytes = g.slotBytes;
          c.chunkBytes = g.chunkBytes;
          c.nChannels = g.nChannels;
          c.sliceBytes = g.sliceBytes;
          c.type = k % 4 == 0 ? typeAt((k / 4) % kNumTypes) : ncclFloat32;
          c.op = Op((k / 3) % kNumOps);
          c.scalarByPointer = k % 2 == 1;
          c.mixedSlices = g.sliceBytes != 0 && k % 2 == 0;
          ++k;
          check(c);
          if (HasFailure()) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, EmuAlgo, ::testing::ValuesIn(collectiveAlgos()), algoLabel);

// ---- every type x op through the reducing algorithms ---------------------------------

TEST(EmuTypes, EveryTypeAndOpRingAllReduce) {
  const Algorithm* algo = findAlgorithm(Coll::kAllReduce, "ring");
  ASSERT_NE(algo, nullptr);
  for (int t = 0; t < kNumTypes; ++t) {
    for (int o = 0; o < kNumOps; ++o) {
      EmuCase c;
      c.algo = algo;
      c.nranks = 3;
      c.count = 517;
      c.type = typeAt(t);
      c.op = Op(o);
      c.inPlace = (t + o) % 2 == 0;
      c.scalarByPointer = t % 2 == 0;
      c.sliceBytes = (t + o) % 3 == 0 ? 64 : 0;
      c.chunkBytes = c.sliceBytes ? 128 : 512;
      c.mixedSlices = (t + o) % 2 == 0;
      check(c);
      if (HasFailure()) return;
    }
  }
}

TEST(EmuTypes, EveryTypeReduceScatterAndReduce) {
  for (Coll coll : {Coll::kReduceScatter, Coll::kReduce}) {
    for (const Algorithm* algo : algorithmsFor(coll)) {
      if (isHier(*algo)) continue;
      for (int t = 0; t < kNumTypes; ++t) {
        for (Op op : {Op::kAvg, Op::kPreMulSum, Op::kMin}) {
          EmuCase c;
          c.algo = algo;
          c.nranks = 4;
          c.count = 37;
          c.type = typeAt(t);
          c.op = op;
          c.root = 1;
          c.inPlace = t % 2 == 1;
          check(c);
          if (HasFailure()) return;
        }
      }
    }
  }
}

// ---- direct access: several programs (CUDA blocks) per rank -----------------------------

TEST(EmuDirect, ManyProgramsEveryDirectAlgorithm) {
  // 5 programs of 64-byte shares over counts that leave some programs empty, some
  // with a partial share; odd counts reach the element-wise paths at unaligned offsets.
  for (const Algorithm& a : allAlgorithms()) {
    if (!a.needsPeerAccess) continue;
    for (uint64_t count : {3u, 100u, 2053u}) {
      for (bool inPlace : {false, true}) {
        EmuCase c;
        c.algo = &a;
        c.nranks = 3;
        c.count = count;
        c.root = 2;
        c.inPlace = inPlace;
        c.nChannels = 5;
        c.type = count == 100 ? ncclFloat16 : ncclFloat32;
        c.op = count == 3 ? Op::kAvg : Op::kSum;
        check(c);
        if (HasFailure()) return;
      }
    }
  }
}

// ---- larger counts: many laps of a small FIFO ------------------------------------------

TEST(EmuLarge, ManySlicesAllReduceAndAllGather) {
  for (const char* name : {"ring", "tree", "rabenseifner"}) {
    EmuCase c;
    c.algo = findAlgorithm(Coll::kAllReduce, name);
    ASSERT_NE(c.algo, nullptr) << name;
    c.nranks = 4;
    c.count = 20011;  // ~80 KB: hundreds of slots through 4 x 256-byte FIFOs
    c.type = ncclFloat32;
    c.op = Op::kSum;
    check(c);
  }
  EmuCase c;
  c.algo = findAlgorithm(Coll::kAllGather, "ring");
  c.nranks = 3;
  c.count = 9001;
  c.type = ncclBfloat16;
  c.sliceBytes = 96;
  c.chunkBytes = 192;
  check(c);
}

}  // namespace
}  // namespace emutest
}  // namespace braid
