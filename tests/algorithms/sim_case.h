// One simulated collective call: builds every rank's plan with one algorithm, runs
// them in the Simulator over small FIFOs, and compares every byte of every rank's
// buffers with an independently computed expectation (outputs, untouched inputs,
// untouched non-output regions, guard zones around each buffer).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "algorithms/plan.h"
#include "algorithms/registry.h"
#include "tests/sim/simulator.h"
#include "tests/algorithms/values.h"

namespace braid {
namespace algotest {

/// FIFO geometry plus the plan parameters used with it (chunkBytes <= capacity / 2).
struct Setup {
  const char* name;
  SimGeometry geo;
  PlanParams params;
};
const Setup& setupAt(int i);
constexpr int kNumSetups = 5;

struct CaseSpec {
  const Algorithm* algo = nullptr;
  int nranks = 1;
  uint64_t count = 0;
  ncclDataType_t type = ncclFloat32;
  Op op = Op::kSum;  ///< ignored by data-movement collectives
  int root = 0;
  bool inPlace = false;
  Setup setup = setupAt(0);
  bool allowDirect = false;  ///< zero-copy entries (out of place only)
  /// Where the ranks are (nullptr: one node); must have nranks entries.
  std::shared_ptr<const RankLayout> layout;
  std::string describe() const;
};

enum class CaseStatus { kPassed, kUnsupported, kFailed };
struct CaseResult {
  CaseStatus status = CaseStatus::kFailed;
  std::string message;  ///< failure details (with describe()), or why unsupported
};

/// Runs the case in the Simulator; CollNet algorithms get the switch model
/// (Simulator::enableSwitch on the spec's layout) and PlanArgs::collnet.
CaseResult runCase(const CaseSpec& spec);
/// The algorithm talks to the aggregation switch (Algorithm::needsSwitch).
bool usesSwitch(const Algorithm* algo);

/// Whether the collective reduces (and so takes an op).
bool isReducing(Coll c);
/// Whether the collective has a root.
bool isRooted(Coll c);

}  // namespace algotest
}  // namespace braid
