// The nccl-tests command line (see perf/README.md), one parser for every program that
// takes it, over CLI11 (src/tools/cli.h): the sweep flags (-b -e -i -f -n -w) are
// declared once, by addSweepOptions, for the perf suite's *_perf programs (Options,
// parseOptions, here) and the peer benchmarks (perf/compare/bench_options.cc), which
// add their own flags beside them.
#ifndef BRAID_PERF_OPTIONS_H_
#define BRAID_PERF_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "perf/datatypes.h"

namespace braid::cli {
class App;
}  // namespace braid::cli

namespace braid_perf {

/// The sizes and iterations of a sweep (nccl-tests' flags); a program's defaults are
/// the values it starts with.
struct Sweep {
  size_t minBytes;    ///< -b,--minbytes
  size_t maxBytes;    ///< -e,--maxbytes
  size_t stepBytes;   ///< -i,--stepbytes: the additive step, used when stepFactor is 1
  double stepFactor;  ///< -f,--stepfactor: the multiplicative step (1: additive)
  int iters;          ///< -n,--iters: timed iterations per size
  int warmup;         ///< -w,--warmup_iters
};

/// Declares -b -e -i -f -n -w on `app`; parsing stores into *s.
void addSweepOptions(braid::cli::App& app, Sweep* s);
/// Parses argv with `app` (addSweepOptions and the program's flags), then checks that
/// -e is not below -b. False with *exitCode when the program should end: 0 after -h, 2
/// after an error (printed: one line naming the option).
bool parseSweepCommandLine(braid::cli::App& app, int argc, char** argv, const Sweep& s,
                           int* exitCode);
/// The size after `bytes` in the sweep: times the factor, else plus the step; at least
/// one byte more.
size_t nextSweepSize(const Sweep& s, size_t bytes);

/// The perf programs' command line.
struct Options : Sweep {
  Options() : Sweep{32u << 20, 32u << 20, 1u << 20, 1, 20, 5} {}
  int nThreads = 1;                       ///< -t: ranks as threads of this process
  int nGpus = 1;                          ///< -g: ranks per thread (driven inside one group)
  int aggIters = 1;                       ///< -m: ops per group per iteration
  int check = 1;                          ///< -c: check iterations per size (0: off)
  int average = 1;                        ///< -a: 0 rank0, 1 avg, 2 min, 3 max
  int blocking = 0;                       ///< -z: accepted; host calls always complete on return
  int cycles = 1;                         ///< -N: sweeps (0: forever)
  std::vector<PerfOp> ops{PerfOp::kSum};  ///< -o
  std::vector<ncclDataType_t> types{ncclFloat};  ///< -d
  int root = 0;                                  ///< -r (-1: every root)
  std::string jsonPath;                          ///< -J
  int graph = 0;                                 ///< -G: accepted (no CUDA graphs on host)
  /// -D/--device: 1 = device buffers (cudaMalloc on device local rank % device count, one
  /// CUDA stream per rank, completion by cudaStreamSynchronize); 0 = host memory.
  int device = 0;
};

/// Parse argv; false with *exitCode when the program should end (0 after -h, which
/// printed the usage; 2 after an error, which printed its line).
bool parseOptions(int argc, char** argv, const char* program, Options* opt, int* exitCode);

}  // namespace braid_perf

#endif  // BRAID_PERF_OPTIONS_H_
