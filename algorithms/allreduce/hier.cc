// PLACEHOLDER, being written: declines every call (the registry falls back).
#include "algorithms/builders.h"

namespace braid {
namespace builders {

bool allReduceHier(const PlanArgs& args, const PlanParams& params, Plan* plan) {
  (void)args; (void)params; (void)plan;
  return false;
}

}  // namespace builders
}  // namespace braid
