// Command line of the perf programs: the nccl-tests flags (see perf/README.md).
#ifndef BRAID_PERF_OPTIONS_H_
#define BRAID_PERF_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "perf/datatypes.h"

namespace braid_perf {

/// Parsed command line.
struct Options {
  int nThreads = 1;                       ///< -t: ranks as threads of this process
  int nGpus = 1;                          ///< -g: ranks per thread (driven inside one group)
  size_t minBytes = 32u << 20;            ///< -b
  size_t maxBytes = 32u << 20;            ///< -e
  size_t stepBytes = 1u << 20;            ///< -i
  double stepFactor = 1;                  ///< -f (1: use stepBytes)
  int iters = 20;                         ///< -n
  int warmup = 5;                         ///< -w
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

/// Parse argv; on error (or -h) prints usage to stderr and returns false with *exitCode.
bool parseOptions(int argc, char** argv, const char* program, Options* opt, int* exitCode);

/// Parse a size with an optional K/M/G suffix (powers of 1024). False on bad text.
bool parseSize(const std::string& text, size_t* out);

}  // namespace braid_perf

#endif  // BRAID_PERF_OPTIONS_H_
