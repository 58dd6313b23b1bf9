// The GPU suite's correctness matrix for one rank: every collective x the 12 datatypes x
// every reduction operator (sum, prod, max, min, avg, PreMulSum with a host-immediate
// and with a device-resident scalar) x in-place / out-of-place x a few counts, plus one
// larger case per collective. Inputs are the perf suite's exact patterns
// (perf/pattern.h); expected outputs are computed on the host and compared exactly
// (floats: avg within its rounding tolerance). Output guard bytes must stay untouched.
#ifndef BRAID_TESTS_GPU_MATRIX_H_
#define BRAID_TESTS_GPU_MATRIX_H_

#include <cstddef>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/gpu/mem.h"

namespace braid_gpu {

enum class Coll {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kSendRecv,
};
constexpr int kNumColls = 9;

/// "allreduce", "broadcast", ... (test and worker argument names).
const char* collName(Coll c);
/// Parses collName's names; false for unknown text.
bool parseColl(const std::string& text, Coll* c);

/// One rank's view: its communicator and buffers.
struct RankCtx {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  Mem* mem = nullptr;
  /// Harness self-check: corrupt one checked element of the first case, which must
  /// then be reported as wrong.
  bool corrupt = false;
  /// Ranks are threads of one process: CUDA Graph captures use the thread-local capture
  /// mode (global mode would forbid the other ranks' setup calls during a capture).
  bool threads = false;
};

/// What the matrix covers.
struct MatrixOptions {
  std::vector<size_t> counts{1, 1031, 4099};   ///< the count argument of each call
  size_t largeCount = (size_t(1) << 20) + 13;  ///< one float case of this count (0: none)
  bool allTypes = true;                        ///< false: float and int32 only
};

/// Runs the matrix of `coll` on this rank (every rank of the communicator must call it
/// with the same arguments). Each failed case is printed to stderr. Returns the number
/// of failed cases (a failed call that leaves the peers waiting ends the run: returns
/// at once).
int runMatrix(const RankCtx& r, Coll coll, const MatrixOptions& o);

}  // namespace braid_gpu

#endif  // BRAID_TESTS_GPU_MATRIX_H_
