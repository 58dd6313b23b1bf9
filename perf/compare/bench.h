// The shared driver of the peer benchmarks (mpi_bench, gloo_bench): nccl-tests sizes and
// busbw factors exactly as Braid's perf suite uses them (perf/table.cc), the size sweep,
// repetitions with medians, a small correctness check, and JSON in the schema of
// Braid's `-J` output (perf/report.cc) plus "library", "algorithm" and "variant".
#ifndef BRAID_PERF_COMPARE_BENCH_H_
#define BRAID_PERF_COMPARE_BENCH_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "perf/options.h"

namespace braid_compare {

/// The collectives the comparison measures, named as Braid's perf programs.
enum class Coll { kAllReduce, kReduceScatter, kAllGather, kAlltoall, kBroadcast, kReduce };

/// "all_reduce", "reduce_scatter", ...
const char* collName(Coll c);
/// Parse a collective name; false when unknown.
bool parseColl(const std::string& name, Coll* out);
/// All six, in the order above.
std::vector<Coll> allColls();

/// Element counts of one size, as nccl-tests and perf/table.cc define them.
struct Counts {
  size_t count = 0;       ///< "count" column: elements of the largest buffer
  size_t sendElems = 0;   ///< elements of each rank's send buffer
  size_t recvElems = 0;   ///< elements of each rank's receive buffer
  size_t paramCount = 0;  ///< count argument of the call (per-rank block for n-block collectives)
};

/// Counts for a requested size of `bytes` with elements of `eltSize` bytes.
Counts collCounts(Coll c, size_t bytes, size_t eltSize, int nranks);
/// busbw = algbw * busBwFactor (nccl-tests: 2(n-1)/n, (n-1)/n or 1).
double busBwFactor(Coll c, int nranks);
/// True for broadcast and reduce.
bool collRooted(Coll c);
/// True for all_reduce, reduce_scatter and reduce.
bool collReduces(Coll c);

/// Command line shared by the peer benchmarks: the sweep of the perf suite's parser
/// (perf/options.h: -b -e -i -f -n -w) and their own flags.
struct BenchOptions : braid_perf::Sweep {
  BenchOptions() : Sweep{8, 1u << 20, 1u << 20, 2, 20, 5} {}
  int reps = 3;                         ///< -N repetitions of the whole sweep (median reported)
  int check = 1;                        ///< -c 1: check results once (first repetition)
  int root = 0;                         ///< -r root of broadcast and reduce
  bool inPlace = false;                 ///< -I 1: also measure the in-place form where it exists
  std::vector<Coll> colls;              ///< -C list (default: all six)
  std::vector<std::string> algorithms;  ///< -A list (benchmark specific; empty: all)
  std::string jsonPrefix;               ///< -J prefix: one file <prefix><collective>[.<alg>].json
  std::string variant;                  ///< -L label written as "variant" (e.g. BTL settings)
  std::string store;                    ///< -S rendezvous directory (gloo)
  bool corrupt = false;  ///< -K 1: corrupt one checked element (proves the check fails)
};

/// Parse argv; false with *exitCode when the program should end (0 after -h, which
/// printed the usage; 2 after an error, which printed its line).
bool parseBenchOptions(int argc, char** argv, const char* program, BenchOptions* opt,
                       int* exitCode);
/// The requested sizes of the sweep, in perf/common.cc's order and rounding.
std::vector<size_t> sweepSizes(const BenchOptions& opt);

/// Median of a non-empty list (mean of the middle two for even lengths).
double median(std::vector<double> v);

/// What the driver needs from a peer library: identity, a barrier and a sum over ranks.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  /// In-place sum of `n` doubles over all ranks.
  virtual void sumDoubles(double* v, size_t n) = 0;
};

/// One prepared operation: run() issues it once; `in` is where this rank's input
/// (Counts::sendElems floats) lives and `out` where its output (recvElems) is read.
struct Op {
  std::function<void()> run;
  float* in = nullptr;
  float* out = nullptr;
};

/// Buffers the driver owns (sized for the largest size of every collective).
struct Buffers {
  float* send = nullptr;
  float* recv = nullptr;
};

/// One measured case: a collective by one algorithm, out-of-place or in-place.
struct Case {
  Coll coll = Coll::kAllReduce;
  std::string algorithm = "default";
  bool inPlace = false;
  /// Build the op for one size (may throw std::exception: recorded as an error row).
  std::function<Op(const Buffers& b, const Counts& c, int root)> prepare;
};

/// Run every case over the sweep with repetitions and write the JSON files (rank 0).
/// Returns the process exit code (1 when a check found wrong elements).
int runBench(Backend& backend, const BenchOptions& opt, const std::vector<Case>& cases,
             const std::string& program, const std::string& library);

}  // namespace braid_compare

#endif  // BRAID_PERF_COMPARE_BENCH_H_
