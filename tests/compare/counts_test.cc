// The peer benchmarks (perf/compare) must size and score every operation exactly as
// Braid's perf suite does (perf/table.cc and the collective table entries), or the
// comparison would line up different things.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/common.h"
#include "perf/compare/bench.h"
#include "perf/options.h"

namespace {

using braid_compare::Coll;

struct Rule {
  Coll coll;
  braid_perf::Counts (*counts)(size_t, size_t, int);
  double (*factor)(int);
};

// The CollSpec entries of perf/<collective>.cc.
const Rule kRules[] = {
    {Coll::kAllReduce, braid_perf::countsSameSize, braid_perf::factorAllReduce},
    {Coll::kReduceScatter, braid_perf::countsScatter, braid_perf::factorRing},
    {Coll::kAllGather, braid_perf::countsGather, braid_perf::factorRing},
    {Coll::kAlltoall, braid_perf::countsAlltoall, braid_perf::factorRing},
    {Coll::kBroadcast, braid_perf::countsSameSize, braid_perf::factorOne},
    {Coll::kReduce, braid_perf::countsSameSize, braid_perf::factorOne},
};

TEST(CompareCounts, SameAsPerfSuite) {
  const std::vector<size_t> sizes = {0,        1,        3,    4,    7,      8,
                                     12,       100,      4096, 4100, 65536,  1000003,
                                     1u << 20, 3u << 20, 8191, 12,   123456, 1u << 28};
  for (const Rule& r : kRules) {
    for (int n = 1; n <= 9; ++n) {
      for (size_t bytes : sizes) {
        for (size_t elt : {size_t(1), size_t(4), size_t(8)}) {
          const braid_compare::Counts mine = braid_compare::collCounts(r.coll, bytes, elt, n);
          const braid_perf::Counts theirs = r.counts(bytes, elt, n);
          SCOPED_TRACE(std::string(braid_compare::collName(r.coll)) + " n=" + std::to_string(n) +
                       " bytes=" + std::to_string(bytes) + " elt=" + std::to_string(elt));
          EXPECT_EQ(mine.count, theirs.count);
          EXPECT_EQ(mine.sendElems, theirs.sendElems);
          EXPECT_EQ(mine.recvElems, theirs.recvElems);
          EXPECT_EQ(mine.paramCount, theirs.paramCount);
        }
      }
      EXPECT_DOUBLE_EQ(braid_compare::busBwFactor(r.coll, n), r.factor(n))
          << braid_compare::collName(r.coll) << " n=" << n;
    }
  }
}

TEST(CompareCounts, NamesRoundTrip) {
  const std::vector<Coll> all = braid_compare::allColls();
  ASSERT_EQ(all.size(), 6u);
  for (Coll c : all) {
    Coll back;
    ASSERT_TRUE(braid_compare::parseColl(braid_compare::collName(c), &back));
    EXPECT_EQ(back, c);
  }
  Coll dummy;
  EXPECT_FALSE(braid_compare::parseColl("allreduce", &dummy));
}

TEST(CompareSweep, FactorTwoCoversEightBytesTo256MiB) {
  braid_compare::BenchOptions o;
  o.minBytes = 8;
  o.maxBytes = 256u << 20;
  o.stepFactor = 2;
  const std::vector<size_t> s = braid_compare::sweepSizes(o);
  ASSERT_EQ(s.size(), 26u);
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s[1], 16u);
  EXPECT_EQ(s.back(), size_t(256) << 20);
}

TEST(CompareSweep, FractionalFactorAndAdditiveStep) {
  braid_compare::BenchOptions o;
  o.minBytes = 3;
  o.maxBytes = 10;
  o.stepFactor = 1.5;  // 3 -> 4 (truncated) -> 6 -> 9, as perf/common.cc
  EXPECT_EQ(braid_compare::sweepSizes(o), (std::vector<size_t>{3, 4, 6, 9}));
  o.stepFactor = 1;
  o.stepBytes = 4;
  EXPECT_EQ(braid_compare::sweepSizes(o), (std::vector<size_t>{3, 7}));
  o.minBytes = 0;
  o.maxBytes = 2;
  o.stepFactor = 2;  // 0 * 2 does not advance: +1, as perf/common.cc
  EXPECT_EQ(braid_compare::sweepSizes(o), (std::vector<size_t>{0, 1, 2}));
}

TEST(CompareOptions, CommandLine) {
  const char* args[] = {"bench", "-b",         "1K", "-e",      "4M",
                        "-f",    "4",          "-n", "7",       "-w",
                        "0",     "-N",         "5",  "-C",      "all_gather,reduce",
                        "-A",    "ring,bcube", "-J", "/tmp/x_", "-I",
                        "1",     "-r",         "1"};
  braid_compare::BenchOptions o;
  int rc = -1;
  ASSERT_TRUE(braid_compare::parseBenchOptions(sizeof(args) / sizeof(args[0]),
                                               const_cast<char**>(args), "bench", &o, &rc));
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 4u << 20);
  EXPECT_EQ(o.stepFactor, 4);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.reps, 5);
  EXPECT_EQ(o.colls, (std::vector<Coll>{Coll::kAllGather, Coll::kReduce}));
  EXPECT_EQ(o.algorithms, (std::vector<std::string>{"ring", "bcube"}));
  EXPECT_EQ(o.jsonPrefix, "/tmp/x_");
  EXPECT_TRUE(o.inPlace);
  EXPECT_EQ(o.root, 1);
  const char* bad[] = {"bench", "-C", "allreduce"};
  braid_compare::BenchOptions o2;
  EXPECT_FALSE(braid_compare::parseBenchOptions(3, const_cast<char**>(bad), "bench", &o2, &rc));
  EXPECT_EQ(rc, 2);
  const char* inverted[] = {"bench", "-b", "4K", "-e", "1K"};
  braid_compare::BenchOptions o3;
  EXPECT_FALSE(
      braid_compare::parseBenchOptions(5, const_cast<char**>(inverted), "bench", &o3, &rc));
}

TEST(CompareStats, Median) {
  EXPECT_DOUBLE_EQ(braid_compare::median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(braid_compare::median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(braid_compare::median({5}), 5);
}

}  // namespace
