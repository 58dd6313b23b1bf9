// Deterministic input data and exact expected reductions (see pattern.h).
#include "perf/pattern.h"

#include <algorithm>
#include <cmath>

namespace braid_perf {
namespace {

constexpr double kMaxValue = 100;  // keeps values small and far from sentinel patterns

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

Pattern::Pattern(PerfOp op, ncclDataType_t type, int nranks)
    : op_(op), type_(type), nranks_(std::max(1, nranks)) {
  const double limit = exactIntegerLimit(type);
  const uint64_t n = static_cast<uint64_t>(nranks_);
  if (op == PerfOp::kNone) {
    period_ = static_cast<uint64_t>(std::min(kMaxValue, limit)) + 1;
  } else if (op == PerfOp::kProd) {
    // Value 2 on at most ceil(n / period) ranks per element, 1 elsewhere: the product is
    // a power of two no larger than the limit.
    const uint64_t maxTwos = static_cast<uint64_t>(std::floor(std::log2(limit)));
    period_ = std::max<uint64_t>(2, ceilDiv(n, maxTwos));
  } else {
    // Sums (and the premulsum's doubled sums) must stay exact for every partial sum.
    const double scale = op == PerfOp::kPreMulSum ? kPreMulScalar : 1.0;
    const double perRank = std::floor(limit / (scale * static_cast<double>(n)));
    if (perRank >= 1) {
      period_ = static_cast<uint64_t>(std::min(kMaxValue, perRank)) + 1;
    } else {
      // More ranks than exact integers: value 1 on at most limit/scale ranks per element.
      indicator_ = true;
      period_ = ceilDiv(n, static_cast<uint64_t>(std::floor(limit / scale)));
    }
  }
  reduced_.resize(period_);
  for (uint64_t t = 0; t < period_; ++t) {
    double sum = 0, prod = 1, lo = value(t), hi = value(t);
    for (uint64_t r = 0; r < n; ++r) {
      const double v = value(t + r);
      sum += v;
      prod *= v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    double red = value(t);
    switch (op) {
      case PerfOp::kSum:
        red = sum;
        break;
      case PerfOp::kProd:
        red = prod;
        break;
      case PerfOp::kMin:
        red = lo;
        break;
      case PerfOp::kMax:
        red = hi;
        break;
      case PerfOp::kAvg:
        // Integers: sum then divide, truncating (sums are non-negative).
        red = isFloatType(type) ? sum / static_cast<double>(n)
                                : std::floor(sum / static_cast<double>(n));
        break;
      case PerfOp::kPreMulSum:
        red = kPreMulScalar * sum;
        break;
      case PerfOp::kNone:
        break;
    }
    reduced_[t] = red;
  }
}

double Pattern::value(uint64_t u) const {
  const uint64_t t = u % period_;
  if (op_ == PerfOp::kProd) return t == 0 ? 2.0 : 1.0;
  if (indicator_) return t == 0 ? 1.0 : 0.0;
  return static_cast<double>(t);
}

double Pattern::tolerance(double /*expected*/) const {
  if (op_ != PerfOp::kAvg || !isFloatType(type_)) return 0;
  // avg on floats scales every input by a rounded 1/nranks and sums: each of the
  // ~2n roundings errs by at most eps/2 of a magnitude bounded by the largest input.
  const double maxInput = indicator_ ? 1.0 : static_cast<double>(period_ - 1);
  return typeEpsilon(type_) * (nranks_ + 2) * std::max(1.0, maxInput);
}

}  // namespace braid_perf
