// The peer benchmarks' command line (perf/compare/bench_options.cc): the command lines
// scripts/run-compare.sh and tests/compare/bench_test.sh give mpi_bench and gloo_bench
// parse to these values; bad input fails with exit code 2 and names the option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/compare/bench.h"

namespace {

using braid_compare::BenchOptions;
using braid_compare::Coll;

/// Parses `args` (the words after the program's name) into *o.
bool parse(std::vector<std::string> args, BenchOptions* o, int* rc) {
  args.insert(args.begin(), "gloo_bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return braid_compare::parseBenchOptions(static_cast<int>(args.size()), argv.data(),
                                          "gloo_bench", o, rc);
}

BenchOptions parsed(const std::vector<std::string>& args) {
  BenchOptions o;
  int rc = -1;
  EXPECT_TRUE(parse(args, &o, &rc)) << testing::PrintToString(args);
  return o;
}

TEST(CompareOptions, Defaults) {
  const BenchOptions o = parsed({});
  EXPECT_EQ(8u, o.minBytes);
  EXPECT_EQ(1u << 20, o.maxBytes);
  EXPECT_EQ(1u << 20, o.stepBytes);
  EXPECT_EQ(2.0, o.stepFactor);
  EXPECT_EQ(20, o.iters);
  EXPECT_EQ(5, o.warmup);
  EXPECT_EQ(3, o.reps);
  EXPECT_EQ(1, o.check);
  EXPECT_EQ(0, o.root);
  EXPECT_FALSE(o.inPlace);
  EXPECT_EQ(braid_compare::allColls(), o.colls);
  EXPECT_TRUE(o.algorithms.empty());
  EXPECT_EQ("", o.jsonPrefix);
  EXPECT_EQ("", o.variant);
  EXPECT_EQ("", o.store);
  EXPECT_FALSE(o.corrupt);
}

TEST(CompareOptions, TheScriptsCommandLines) {
  // tests/compare/bench_test.sh
  BenchOptions o = parsed({"-S", "/tmp/st", "-b", "8", "-e", "4K", "-f", "2", "-n", "2", "-w",
                           "1", "-N", "1", "-c", "1", "-I", "1", "-J", "/tmp/out_", "-K", "1"});
  EXPECT_EQ("/tmp/st", o.store);
  EXPECT_EQ(8u, o.minBytes);
  EXPECT_EQ(4096u, o.maxBytes);
  EXPECT_EQ(2.0, o.stepFactor);
  EXPECT_EQ(2, o.iters);
  EXPECT_EQ(1, o.warmup);
  EXPECT_EQ(1, o.reps);
  EXPECT_TRUE(o.inPlace);
  EXPECT_EQ("/tmp/out_", o.jsonPrefix);
  EXPECT_TRUE(o.corrupt);
  o = parsed({"-S", "/tmp/st", "-C", "all_gather", "-b", "8", "-e", "16", "-n", "1", "-w", "0",
              "-N", "1", "-J", "/tmp/out_"});
  EXPECT_EQ(std::vector<Coll>{Coll::kAllGather}, o.colls);
  EXPECT_EQ(16u, o.maxBytes);
  EXPECT_EQ(0, o.warmup);
  // scripts/run-compare.sh (mpi_bench under mpirun)
  o = parsed({"-b", "16777216", "-e", "268435456", "-f", "4", "-n", "3", "-w", "1", "-N", "5",
              "-C", "all_reduce,reduce_scatter,all_gather,alltoall,broadcast,reduce", "-L",
              "mpirun --mca btl self,vader", "-J", "res/openmpi_n2_s3_"});
  EXPECT_EQ(size_t{16} << 20, o.minBytes);
  EXPECT_EQ(size_t{256} << 20, o.maxBytes);
  EXPECT_EQ(4.0, o.stepFactor);
  EXPECT_EQ(5, o.reps);
  EXPECT_EQ(braid_compare::allColls(), o.colls);
  EXPECT_EQ("mpirun --mca btl self,vader", o.variant);
  EXPECT_EQ("res/openmpi_n2_s3_", o.jsonPrefix);
}

TEST(CompareOptions, AttachedValuesRepeatsAndLists) {
  BenchOptions o = parsed({"-b1K", "-e4M", "-f1", "-i512", "-Cbroadcast,reduce", "-Aring,,bcube",
                           "-r1", "-I0", "-N2", "-N4", "-L", ""});
  EXPECT_EQ(1024u, o.minBytes);
  EXPECT_EQ(4u << 20, o.maxBytes);
  EXPECT_EQ(1.0, o.stepFactor);
  EXPECT_EQ(512u, o.stepBytes);
  EXPECT_EQ((std::vector<Coll>{Coll::kBroadcast, Coll::kReduce}), o.colls);
  EXPECT_EQ((std::vector<std::string>{"ring", "bcube"}), o.algorithms);
  EXPECT_EQ(1, o.root);
  EXPECT_FALSE(o.inPlace);
  EXPECT_EQ(4, o.reps);
  EXPECT_EQ("", o.variant);
  o = parsed({"-C", "reduce", "-C", "alltoall", "-c", "0", "-K", "0"});
  EXPECT_EQ(std::vector<Coll>{Coll::kAlltoall}, o.colls);
  EXPECT_EQ(0, o.check);
  EXPECT_FALSE(o.corrupt);
}

TEST(CompareOptions, BadInputFailsWithExitCode2) {
  const std::vector<std::vector<std::string>> bad = {
      {"-C", "allreduce"}, {"-C", ","},   {"-A", ","},         {"-c", "2"},
      {"-r", "-1"},        {"-i", "0"},   {"-K", "2"},         {"-I", "x"},
      {"-N", "0"},         {"-n", "0"},   {"-w", "-1"},        {"-b", "4K", "-e", "1K"},
      {"-S", ""},          {"-J", ""},    {"-t", "2"},         {"--bogus"},
      {"foo"},             {"-b", "1Q"},  {"-f", "0.9"},       {"-e"}};
  for (const auto& args : bad) {
    BenchOptions o;
    int rc = -1;
    EXPECT_FALSE(parse(args, &o, &rc)) << testing::PrintToString(args);
    EXPECT_EQ(2, rc) << testing::PrintToString(args);
  }
  BenchOptions o;
  int rc = -1;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_FALSE(parse({"-h"}, &o, &rc));
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(0, rc);
}

}  // namespace
