// Every collective algorithm, simulated for every rank count 1..16, odd and tiny
// counts, roots, every type and op, in and out of place, over small FIFOs so the
// multi-slice, multi-loop and multi-channel paths run (see sim_case.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/algorithms/sim_case.h"

namespace braid {
namespace algotest {
namespace {

/// Indices into allAlgorithms() of the collective algorithms (not p2p).
std::vector<int> collectiveAlgos(bool reducing, bool movement) {
  std::vector<int> out;
  const auto& all = allAlgorithms();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].coll == Coll::kSendRecv) continue;
    if (isReducing(all[i].coll) ? reducing : movement) out.push_back(int(i));
  }
  return out;
}

std::string algoLabel(int index) {
  const Algorithm& a = allAlgorithms()[index];
  return std::string(collName(a.coll)) + "_" + a.name;
}

std::vector<int> rootsFor(Coll coll, int n) {
  if (!isRooted(coll)) return {0};
  std::set<int> roots = {0, n - 1, n / 2};
  return std::vector<int>(roots.begin(), roots.end());
}

/// Runs a case; EXPECTs success (every builder supports every valid call).
void check(const CaseSpec& spec) {
  CaseResult res = runCase(spec);
  if (spec.algo->needsPeerAccess && isReducing(spec.algo->coll) && spec.op == Op::kPreMulSum) {
    // Direct-access reductions take built-in ops only (sim_case.cc says why).
    EXPECT_EQ(res.status, CaseStatus::kUnsupported) << res.message;
    return;
  }
  EXPECT_EQ(res.status, CaseStatus::kPassed) << res.message;
}

// ---- every rank count, many counts and roots ---------------------------------------

class RankSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RankSweep, AllCountsRootsPlacements) {
  const Algorithm* algo = &allAlgorithms()[std::get<0>(GetParam())];
  const int n = std::get<1>(GetParam());
  std::set<uint64_t> counts = {0, 1, uint64_t(n - 1), uint64_t(n), uint64_t(n + 1), 13, 97, 1009};
  int k = 0;  // rotates types, ops and setups across cases
  for (uint64_t count : counts) {
    for (int root : rootsFor(algo->coll, n)) {
      for (bool inPlace : {false, true}) {
        for (int pass = 0; pass < 2; ++pass, ++k) {
          CaseSpec spec;
          spec.algo = algo;
          spec.nranks = n;
          spec.count = count;
          spec.root = root;
          spec.inPlace = inPlace;
          spec.type = typeAt(k % kNumTypes).type;
          spec.op = opAt((k + k / kNumTypes) % kNumOps);
          // Pass 0: the smallest FIFOs, one channel. Pass 1: another setup in turn.
          int setup = pass == 0 ? 0 : 1 + (k / 2) % (kNumSetups - 1);
          if (setup == 2 && count > 97) setup = 1;  // 8-byte slots: keep it quick
          spec.setup = setupAt(setup);
          spec.allowDirect = pass == 1 && (k / 2) % 2 == 0;
          check(spec);
          if (HasFailure()) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, RankSweep,
    ::testing::Combine(::testing::ValuesIn(collectiveAlgos(true, true)), ::testing::Range(1, 17)),
    [](const ::testing::TestParamInfo<RankSweep::ParamType>& info) {
      return algoLabel(std::get<0>(info.param)) + "_n" + std::to_string(std::get<1>(info.param));
    });

// ---- every type x op for the reducing collectives ------------------------------------

class TypeOpMatrix : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(TypeOpMatrix, EveryOp) {
  const Algorithm* algo = &allAlgorithms()[std::get<0>(GetParam())];
  const TypeInfo& t = typeAt(std::get<1>(GetParam()));
  int k = 0;
  for (int o = 0; o < kNumOps; ++o) {
    for (int n : {1, 2, 3, 5, 8, 16}) {
      for (uint64_t count : {uint64_t(1), uint64_t(n + 1), uint64_t(97), uint64_t(1009)}) {
        for (bool inPlace : {false, true}) {
          ++k;
          CaseSpec spec;
          spec.algo = algo;
          spec.nranks = n;
          spec.count = count;
          spec.type = t.type;
          spec.op = opAt(o);
          spec.root = (n / 2 + k) % n;
          spec.inPlace = inPlace;
          spec.setup = setupAt(k % 2 == 0 ? 0 : 3);
          spec.allowDirect = k % 4 == 1;
          check(spec);
          if (HasFailure()) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reducing, TypeOpMatrix,
    ::testing::Combine(::testing::ValuesIn(collectiveAlgos(true, false)),
                       ::testing::Range(0, kNumTypes)),
    [](const ::testing::TestParamInfo<TypeOpMatrix::ParamType>& info) {
      return algoLabel(std::get<0>(info.param)) + "_" + typeAt(std::get<1>(info.param)).name;
    });

// ---- every type for the data-movement collectives ------------------------------------

class MovementTypes : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(MovementTypes, EveryType) {
  const Algorithm* algo = &allAlgorithms()[std::get<0>(GetParam())];
  const TypeInfo& t = typeAt(std::get<1>(GetParam()));
  int k = 0;
  for (int n : {1, 2, 3, 7, 16}) {
    for (uint64_t count : {uint64_t(1), uint64_t(n + 1), uint64_t(97)}) {
      for (bool inPlace : {false, true}) {
        ++k;
        CaseSpec spec;
        spec.algo = algo;
        spec.nranks = n;
        spec.count = count;
        spec.type = t.type;
        spec.root = (k * 5) % n;
        spec.inPlace = inPlace;
        spec.setup = setupAt(k % 3 == 0 ? 3 : 0);
        spec.allowDirect = k % 3 == 0;
        check(spec);
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Movement, MovementTypes,
    ::testing::Combine(::testing::ValuesIn(collectiveAlgos(false, true)),
                       ::testing::Range(0, kNumTypes)),
    [](const ::testing::TestParamInfo<MovementTypes::ParamType>& info) {
      return algoLabel(std::get<0>(info.param)) + "_" + typeAt(std::get<1>(info.param)).name;
    });

// ---- large counts: many loops, many slices -------------------------------------------

class LargeCounts : public ::testing::TestWithParam<int> {};

TEST_P(LargeCounts, ManyLoops) {
  const Algorithm* algo = &allAlgorithms()[GetParam()];
  const bool perRank = algo->coll == Coll::kAllGather || algo->coll == Coll::kReduceScatter ||
                       algo->coll == Coll::kAllToAll || algo->coll == Coll::kGather ||
                       algo->coll == Coll::kScatter;
  int k = 0;
  for (int n : {2, 5, 16}) {
    // Per-rank counts keep the total near 100003 elements.
    const uint64_t count = perRank ? (100003 / uint64_t(n)) | 1 : 100003;
    for (int setup : {0, 4}) {
      for (bool inPlace : {false, true}) {
        ++k;
        CaseSpec spec;
        spec.algo = algo;
        spec.nranks = n;
        spec.count = count;
        spec.type = k % 2 ? ncclFloat32 : ncclInt8;
        spec.op = k % 2 ? Op::kSum : Op::kMax;
        spec.root = n - 1;
        spec.inPlace = inPlace;
        spec.setup = setupAt(setup);
        spec.allowDirect = setup == 4;
        check(spec);
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, LargeCounts,
                         ::testing::ValuesIn(collectiveAlgos(true, true)),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return algoLabel(info.param);
                         });

}  // namespace
}  // namespace algotest
}  // namespace braid
