// The perf programs' command line (perf/options.cc): nccl-tests style command lines, in
// every form the suite's scripts and nccl-tests users write them, give these parsed
// values; sizes with K/M/G suffixes; bad input fails with exit code 2 and names the
// option; -h is exit code 0.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/options.h"
#include "src/tools/cli.h"
#include "tests/perf/command_line.h"

namespace braid_perf {
namespace {

using braid::cli::parseSize;

Options parsed(const std::vector<std::string>& args) {
  Options o;
  int rc = -1;
  EXPECT_TRUE(braid_test::parseWords(parseOptions, "all_reduce_perf", args, &o, &rc))
      << testing::PrintToString(args);
  return o;
}

TEST(PerfOptions, Sizes) {
  size_t v = 0;
  EXPECT_TRUE(parseSize("8", &v));
  EXPECT_EQ(8u, v);
  EXPECT_TRUE(parseSize("1K", &v));
  EXPECT_EQ(1024u, v);
  EXPECT_TRUE(parseSize("32M", &v));
  EXPECT_EQ(32u << 20, v);
  EXPECT_TRUE(parseSize("2G", &v));
  EXPECT_EQ(size_t{2} << 30, v);
  EXPECT_TRUE(parseSize("1.5k", &v));
  EXPECT_EQ(1536u, v);
  EXPECT_FALSE(parseSize("5Q", &v));
  EXPECT_FALSE(parseSize("1KB", &v));
  EXPECT_FALSE(parseSize("", &v));
  EXPECT_FALSE(parseSize("-1", &v));
}

TEST(PerfOptions, Defaults) {
  const Options o = parsed({});
  EXPECT_EQ(1, o.nThreads);
  EXPECT_EQ(1, o.nGpus);
  braid_test::expectSweep(o, 32u << 20, 32u << 20, 1u << 20, 1.0, 20, 5);
  EXPECT_EQ(1, o.aggIters);
  EXPECT_EQ(1, o.check);
  EXPECT_EQ(1, o.average);
  EXPECT_EQ(0, o.blocking);
  EXPECT_EQ(1, o.cycles);
  EXPECT_EQ(std::vector<PerfOp>{PerfOp::kSum}, o.ops);
  EXPECT_EQ(std::vector<ncclDataType_t>{ncclFloat}, o.types);
  EXPECT_EQ(0, o.root);
  EXPECT_EQ("", o.jsonPath);
  EXPECT_EQ(0, o.graph);
  EXPECT_EQ(0, o.device);
}

TEST(PerfOptions, TheSuitesCommandLines) {
  // tests/perf.cmake's small sweep with threads.
  Options o = parsed({"-t", "2", "-b", "8", "-e", "256K", "-f", "8", "-n", "2", "-w", "1",
                      "-c", "1"});
  EXPECT_EQ(2, o.nThreads);
  EXPECT_EQ(8u, o.minBytes);
  EXPECT_EQ(256u << 10, o.maxBytes);
  EXPECT_EQ(8.0, o.stepFactor);
  EXPECT_EQ(2, o.iters);
  EXPECT_EQ(1, o.warmup);
  EXPECT_EQ(1, o.check);
  // Every type and op, every root.
  o = parsed({"-t", "3", "-b", "0", "-e", "2K", "-f", "32", "-n", "1", "-w", "0", "-d", "all",
              "-o", "all", "-r", "-1"});
  EXPECT_EQ(0u, o.minBytes);
  EXPECT_EQ(12u, o.types.size());
  EXPECT_EQ(6u, o.ops.size());
  EXPECT_EQ(-1, o.root);
  EXPECT_EQ(0, o.warmup);
  // Additive steps, aggregation, cycles, min over ranks.
  o = parsed({"-t", "2", "-b", "1K", "-e", "3K", "-i", "1K", "-n", "2", "-w", "1", "-m", "3",
              "-N", "2", "-a", "2"});
  EXPECT_EQ(1024u, o.stepBytes);
  EXPECT_EQ(1.0, o.stepFactor);
  EXPECT_EQ(3, o.aggIters);
  EXPECT_EQ(2, o.cycles);
  EXPECT_EQ(2, o.average);
  // scripts/run-compare.sh; the GPU scripts.
  o = parsed({"-b", "131072", "-e", "8388608", "-f", "2", "-n", "20", "-w", "3", "-c", "0",
              "-N", "3", "-J", "res/braid-proc_n2_s2_all_reduce.json"});
  EXPECT_EQ(131072u, o.minBytes);
  EXPECT_EQ(8388608u, o.maxBytes);
  EXPECT_EQ(0, o.check);
  EXPECT_EQ(3, o.cycles);
  EXPECT_EQ("res/braid-proc_n2_s2_all_reduce.json", o.jsonPath);
  o = parsed({"-g", "2", "-D", "1", "-z", "1", "-G", "1", "-b", "64M", "-e", "1G"});
  EXPECT_EQ(2, o.nGpus);
  EXPECT_EQ(1, o.device);
  EXPECT_EQ(1, o.blocking);
  EXPECT_EQ(1, o.graph);
  EXPECT_EQ(size_t{1} << 30, o.maxBytes);
}

TEST(PerfOptions, LongNamesAttachedValuesAndRepeats) {
  Options o = parsed({"--nthreads", "2", "--ngpus", "3", "--minbytes", "1K", "--maxbytes=1G",
                      "--stepbytes", "4K", "--stepfactor", "1.5", "--iters", "7",
                      "--warmup_iters=0", "--agg_iters", "2", "--check", "0", "--op", "max",
                      "--datatype", "bfloat16", "--root", "3", "--average", "3", "--blocking",
                      "0", "--run_cycles", "0", "--output_file", "out.json", "--cudagraph", "2",
                      "--device", "0"});
  EXPECT_EQ(2, o.nThreads);
  EXPECT_EQ(3, o.nGpus);
  braid_test::expectSweep(o, 1024, size_t{1} << 30, 4096, 1.5, 7, 0);
  EXPECT_EQ(2, o.aggIters);
  EXPECT_EQ(0, o.check);
  EXPECT_EQ(std::vector<PerfOp>{PerfOp::kMax}, o.ops);
  EXPECT_EQ(std::vector<ncclDataType_t>{ncclBfloat16}, o.types);
  EXPECT_EQ(3, o.root);
  EXPECT_EQ(3, o.average);
  EXPECT_EQ(0, o.cycles);
  EXPECT_EQ("out.json", o.jsonPath);
  EXPECT_EQ(2, o.graph);
  // Values attached to short flags, as getopt and nccl-tests take them.
  o = parsed({"-b8", "-e1G", "-f2", "-dhalf", "-oprod", "-t4", "-r-1", "-Jx.json"});
  EXPECT_EQ(8u, o.minBytes);
  EXPECT_EQ(size_t{1} << 30, o.maxBytes);
  EXPECT_EQ(2.0, o.stepFactor);
  EXPECT_EQ(std::vector<ncclDataType_t>{ncclFloat16}, o.types);
  EXPECT_EQ(std::vector<PerfOp>{PerfOp::kProd}, o.ops);
  EXPECT_EQ(4, o.nThreads);
  EXPECT_EQ(-1, o.root);
  EXPECT_EQ("x.json", o.jsonPath);
  // The last of a repeated flag wins (scripts append to a common set).
  o = parsed({"-b", "1K", "-e", "8K", "-b", "2K", "-d", "int8", "-d", "fp64", "-o", "min"});
  EXPECT_EQ(2048u, o.minBytes);
  EXPECT_EQ(std::vector<ncclDataType_t>{ncclFloat64}, o.types);
  EXPECT_EQ(std::vector<PerfOp>{PerfOp::kMin}, o.ops);
  // Numbers as strtol reads them (base prefixes), fractional sizes, -i 0 = 1 byte.
  o = parsed({"-b", "1.5K", "-e", "64M", "-n", "0x10", "-w", "010", "-i", "0"});
  EXPECT_EQ(1536u, o.minBytes);
  EXPECT_EQ(16, o.iters);
  EXPECT_EQ(8, o.warmup);
  EXPECT_EQ(1u, o.stepBytes);
  // nccl-tests flags Braid accepts and ignores.
  o = parsed({"-p", "1", "-C", "1", "-R", "1", "-T", "30", "-M", "1", "--parallel_init", "0",
              "--report_cputime", "1", "--local_register", "2", "--timeout", "5", "--memory",
              "0", "-b", "64"});
  EXPECT_EQ(64u, o.minBytes);
  EXPECT_EQ(32u << 20, o.maxBytes);
}

TEST(PerfOptions, BadInputIsOneLineNamingTheOptionAndExitCode2) {
  struct Case {
    std::vector<std::string> args;
    const char* named;  ///< what the error line must name
  };
  const Case bad[] = {{{"-a", "7"}, "--average"},
                      {{"-b", "5Q"}, "--minbytes"},
                      {{"-x", "1"}, "-x"},
                      {{"--bogus"}, "--bogus"},
                      {{"-t", "0"}, "--nthreads"},
                      {{"-t", "1025"}, "--nthreads"},
                      {{"-b", "2K", "-e", "1K"}, "--maxbytes"},
                      {{"extra"}, "extra"},
                      {{"-n"}, "--iters"},
                      {{"-n", "1.5"}, "--iters"},
                      {{"-d", "nosuch"}, "--datatype"},
                      {{"-o", "nosuch"}, "--op"},
                      {{"-J", ""}, "--output_file"},
                      {{"-f", "0.5"}, "--stepfactor"},
                      {{"-f", "x"}, "--stepfactor"},
                      {{"-D", "2"}, "--device"},
                      {{"-c", "-1"}, "--check"},
                      {{"-r", "-2"}, "--root"},
                      {{"-z", "2"}, "--blocking"},
                      {{"-w", "-1"}, "--warmup_iters"},
                      {{"-N", "-1"}, "--run_cycles"},
                      {{"-m", "0"}, "--agg_iters"},
                      {{"-e", "1KB"}, "--maxbytes"},
                      {{"-g", "x"}, "--ngpus"}};
  for (const Case& c : bad)
    braid_test::expectRejected(parseOptions, "all_reduce_perf", c.args, c.named);
}

TEST(PerfOptions, HelpIsExitCode0) {
  for (const char* h : {"-h", "--help"}) {
    const std::string help = braid_test::expectHelp(parseOptions, "all_reduce_perf", h);
    EXPECT_NE(std::string::npos, help.find("-b,--minbytes")) << help;
  }
}

}  // namespace
}  // namespace braid_perf
