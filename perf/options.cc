// The nccl-tests command line over CLI11 (see options.h): the sweep flags every such
// program shares and the perf suite's own.
#include "perf/options.h"

#include "src/tools/cli.h"

namespace braid_perf {

void addSweepOptions(braid::cli::App& app, Sweep* s) {
  const int kMaxIters = 1 << 30;
  app.addSize("-b,--minbytes", &s->minBytes, "smallest size, K/M/G suffixes");
  app.addSize("-e,--maxbytes", &s->maxBytes, "largest size");
  app.addSize("-i,--stepbytes", &s->stepBytes, "additive step (when -f is 1)");
  app.add_option("-f,--stepfactor", s->stepFactor, "multiplicative step (1: additive, -i)")
      ->check(braid::cli::atLeast(1.0))
      ->type_name("X");
  app.add_option("-n,--iters", s->iters, "timed iterations")
      ->check(braid::cli::range(1, kMaxIters));
  app.add_option("-w,--warmup_iters", s->warmup, "warmup iterations")
      ->check(braid::cli::range(0, kMaxIters));
}

bool parseSweepCommandLine(braid::cli::App& app, int argc, char** argv, const Sweep& s,
                           int* exitCode) {
  if (!app.parseCommandLine(argc, argv, exitCode)) return false;
  if (s.maxBytes < s.minBytes) {
    *exitCode = app.fail("--maxbytes", std::to_string(s.maxBytes) + " is below --minbytes (" +
                                           std::to_string(s.minBytes) + ")");
    return false;
  }
  return true;
}

size_t nextSweepSize(const Sweep& s, size_t bytes) {
  const size_t next = s.stepFactor > 1
                          ? static_cast<size_t>(static_cast<double>(bytes) * s.stepFactor)
                          : bytes + s.stepBytes;
  return next > bytes ? next : bytes + 1;
}

bool parseOptions(int argc, char** argv, const char* program, Options* opt, int* exitCode) {
  braid::cli::App app(
      "Braid's perf suite, nccl-tests compatible: one collective timed over a "
      "sweep of sizes, results checked.",
      program);
  app.footer(
      "Sizes take K/M/G suffixes (powers of 1024). Defaults: -b 32M -e 32M -i 1M -f 1 -n 20 "
      "-w 5.\nProcesses: launch with braidrun -n N (or mpirun); world = processes x threads x "
      "ngpus.");
  app.add_option("-t,--nthreads", opt->nThreads, "ranks as threads of this process (default 1)")
      ->check(braid::cli::range(1, 1024));
  app.add_option("-g,--ngpus", opt->nGpus, "ranks per thread, driven in one group (default 1)")
      ->check(braid::cli::range(1, 1024));
  app.add_option("-D,--device", opt->device,
                 "1: device buffers (cudaMalloc on device local rank % device count, a CUDA "
                 "stream per rank); 0: host memory (default)")
      ->check(braid::cli::range(0, 1));
  addSweepOptions(app, opt);
  app.add_option("-m,--agg_iters", opt->aggIters, "operations aggregated per group (default 1)")
      ->check(braid::cli::range(1, 1 << 20));
  app.add_option("-c,--check", opt->check, "check iterations per size, 0 = off (default 1)")
      ->check(braid::cli::range(0, 1 << 20));
  app.addRead<std::vector<PerfOp>>(
         "-o,--op", &opt->ops,
         [](const std::string& text, std::vector<PerfOp>* out) {
           *out = parseOps(text);
           return !out->empty();
         },
         "an operator (see --help)", "sum prod min max avg premulsum, or all (default sum)")
      ->type_name("OP");
  app.addRead<std::vector<ncclDataType_t>>(
         "-d,--datatype", &opt->types,
         [](const std::string& text, std::vector<ncclDataType_t>* out) {
           *out = parseTypes(text);
           return !out->empty();
         },
         "a type (see --help)",
         "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2, or "
         "all (default float)")
      ->type_name("TYPE");
  app.add_option("-r,--root", opt->root, "root, -1 = every root (default 0)")
      ->check(braid::cli::range(-1, 1 << 24));
  app.add_option("-a,--average", opt->average,
                 "time over ranks: 0 rank 0, 1 avg, 2 min, 3 max (default 1)")
      ->check(braid::cli::range(0, 3));
  app.add_option("-z,--blocking", opt->blocking, "accepted (host calls complete on return)")
      ->check(braid::cli::range(0, 1));
  app.add_option("-N,--run_cycles", opt->cycles,
                 "repeat the sweep n times, 0 = forever (default 1)")
      ->check(braid::cli::range(0, 1 << 30));
  app.add_option("-J,--output_file", opt->jsonPath, "write all results as JSON to this file")
      ->check(braid::cli::nonEmpty())
      ->type_name("FILE");
  app.add_option("-G,--cudagraph", opt->graph, "accepted, ignored")
      ->check(braid::cli::range(0, 1 << 30));
  std::string ignored;
  for (const char* names : {"-p,--parallel_init", "-C,--report_cputime", "-R,--local_register",
                            "-T,--timeout", "-M,--memory"}) {
    app.add_option(names, ignored, "nccl-tests' flag, accepted and ignored")->type_name("V");
  }
  if (!parseSweepCommandLine(app, argc, argv, *opt, exitCode)) return false;
  if (opt->stepFactor <= 1 && opt->stepBytes == 0) opt->stepBytes = 1;
  return true;
}

}  // namespace braid_perf
