// Deterministic per-rank input data of the perf suite and its exact reduction.
#ifndef BRAID_PERF_PATTERN_H_
#define BRAID_PERF_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "perf/datatypes.h"

namespace braid_perf {

/// Input value of every (rank, element) and the reduction of an element over all ranks.
///
/// Values are small non-negative integers chosen per (op, type, nranks) so that every
/// partial result of any reduction order is exactly representable in the type: sums stay
/// within the type's exact-integer range, products are powers of two. So results can be
/// compared exactly, except avg on floating types (the scale by 1/nranks rounds), which
/// gets a tolerance. Element j of rank r depends on (hash(j) + r) mod period, so the
/// reduction of element j only depends on hash(j) mod period and is tabulated once.
class Pattern {
 public:
  /// Pattern for `nranks` ranks reducing with `op` (PerfOp::kNone: data is only moved).
  Pattern(PerfOp op, ncclDataType_t type, int nranks);

  /// Input element `idx` of rank `rank`.
  double input(int rank, size_t idx) const {
    return value(phase(idx) + static_cast<uint64_t>(rank));
  }
  /// The reduction of element `idx` over all ranks (for avg: the exact quotient).
  double reduced(size_t idx) const { return reduced_[phase(idx)]; }
  /// Largest accepted |got - expected| for an expected value (0: exact).
  double tolerance(double expected) const;
  /// The premulsum scalar (as a double; encode it in the type for the library).
  static constexpr double kPreMulScalar = 2.0;

 private:
  uint64_t phase(size_t idx) const {
    return ((static_cast<uint64_t>(idx) + 1) * 0x9E3779B97F4A7C15ull >> 32) % period_;
  }
  double value(uint64_t u) const;

  PerfOp op_;
  ncclDataType_t type_;
  int nranks_;
  uint64_t period_ = 1;
  bool indicator_ = false;       // values are 0/1 (sum of many ranks in a tiny type)
  std::vector<double> reduced_;  // reduction for each phase
};

}  // namespace braid_perf

#endif  // BRAID_PERF_PATTERN_H_
