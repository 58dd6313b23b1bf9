// The peer benchmarks' command line (perf/compare/bench_options.cc): the command lines
// scripts/run-compare.sh and tests/compare/bench_test.sh give mpi_bench and gloo_bench
// parse to these values; bad input fails with exit code 2 and names the option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/compare/bench.h"
#include "tests/perf/command_line.h"

namespace {

using braid_compare::BenchOptions;
using braid_compare::Coll;

BenchOptions parsed(const std::vector<std::string>& args) {
  BenchOptions o;
  int rc = -1;
  EXPECT_TRUE(braid_test::parseWords(braid_compare::parseBenchOptions, "gloo_bench", args, &o, &rc))
      << testing::PrintToString(args);
  return o;
}

TEST(CompareOptions, Defaults) {
  const BenchOptions o = parsed({});
  braid_test::expectSweep(o, 8, 1u << 20, 1u << 20, 2.0, 20, 5);
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

TEST(CompareOptions, BadInputIsOneLineNamingTheOptionAndExitCode2) {
  struct Case {
    std::vector<std::string> args;
    const char* named;  ///< what the error line must name
  };
  const Case bad[] = {{{"-C", "allreduce"}, "-C"},   {{"-C", ","}, "-C"},
                      {{"-A", ","}, "-A"},           {{"-c", "2"}, "-c"},
                      {{"-r", "-1"}, "-r"},          {{"-i", "0"}, "--stepbytes"},
                      {{"-K", "2"}, "-K"},           {{"-I", "x"}, "-I"},
                      {{"-N", "0"}, "-N"},           {{"-n", "0"}, "--iters"},
                      {{"-w", "-1"}, "--warmup_iters"}, {{"-b", "4K", "-e", "1K"}, "--maxbytes"},
                      {{"-S", ""}, "-S"},            {{"-J", ""}, "-J"},
                      {{"-t", "2"}, "-t"},           {{"--bogus"}, "--bogus"},
                      {{"foo"}, "foo"},              {{"-b", "1Q"}, "--minbytes"},
                      {{"-f", "0.9"}, "--stepfactor"}, {{"-e"}, "--maxbytes"}};
  for (const Case& c : bad)
    braid_test::expectRejected(braid_compare::parseBenchOptions, "gloo_bench", c.args, c.named);
  braid_test::expectHelp(braid_compare::parseBenchOptions, "gloo_bench", "-h");
}

}  // namespace
