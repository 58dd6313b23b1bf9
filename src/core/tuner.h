// Tuner: chooses the algorithm and its parameters for one operation. Today: the
// first registered algorithm for the collective that NCCL_ALGO allows and whose
// builder accepts the arguments; chunk size from the FIFO geometry; channels from
// NCCL_MIN/MAX_NCHANNELS. (The cost-model tuner replaces the choice, not the interface.)
#pragma once
#include <memory>

#include "algorithms/plan.h"
#include "nccl.h"

namespace braid {

struct Comm;

/// Builds (or fetches from the comm's cache) the plan for `args` on `comm`.
ncclResult_t makePlan(Comm* comm, const PlanArgs& args, std::shared_ptr<const Plan>* out);

/// Whether NCCL_ALGO (as given in `spec`) allows the algorithm called `name` (or, if
/// not null, `ncclName`) for `coll`. Syntax: "ring,tree", "^tree",
/// "allreduce:ring;broadcast:chain" (case-insensitive).
bool algoAllowed(const std::string& spec, Coll coll, const char* name, const char* ncclName);

}  // namespace braid
