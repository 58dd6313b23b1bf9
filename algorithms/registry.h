// The algorithm registry: every plan builder as one row of a table, so selection
// (tuner, NCCL_ALGO) and the tests iterate algorithms as data.
//
//   const Algorithm* algo = findAlgorithm(Coll::kAllReduce, "ring");
//   Plan plan;
//   BRAID_CHECK(buildPlan(args, params, algo, &plan));
#pragma once
#include <string>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/plan.h"
#include "nccl.h"

namespace braid {

struct Algorithm {
  Coll coll;
  const char* name;         ///< our name, lower case ("ring", "chain", "pairwise")
  const char* ncclName;     ///< the NCCL_ALGO name it answers to ("Ring"), or nullptr
  const char* description;  ///< one line, for braid-info and logs
  /// Appends the plan's programs to an empty Plan; false if the arguments are not
  /// supported (the caller falls back to another algorithm).
  bool (*build)(const PlanArgs& args, const PlanParams& params, Plan* plan);
  /// Its predicted microseconds (algorithms/cost.h: costs::<builder name>); negative:
  /// no prediction for this query. nullptr: no formula (grouped send/receive).
  double (*cost)(const CostQuery& q) = nullptr;
  /// A small-message algorithm: the tuner prefers it up to its small-message
  /// threshold and does not pick it above (NCCL_ALGO still can).
  bool small = false;
  /// An in-network algorithm: talks to the aggregation switch (kSwitchPeer), so it is
  /// a candidate only where PlanArgs::collnet says a switch serves the call.
  bool needsSwitch = false;
  /// A direct-access algorithm (kSignal .. kPeerPut steps): a candidate only where
  /// PlanArgs::peerAccess says the executor reaches the other ranks' buffers.
  bool needsPeerAccess = false;
};

/// Every algorithm, grouped by collective; the first of each collective is its default.
const std::vector<Algorithm>& allAlgorithms();

/// The algorithms of one collective, default first.
std::vector<const Algorithm*> algorithmsFor(Coll coll);

/// The algorithm of `coll` whose name or NCCL name equals `name` (any case), or nullptr.
const Algorithm* findAlgorithm(Coll coll, const std::string& name);

/// The collective's first direct-access algorithm (Algorithm::needsPeerAccess: the one
/// the flag board runs), or nullptr.
const Algorithm* peerAccessAlgorithm(Coll coll);

/// The collective's default algorithm (never nullptr for a valid collective).
const Algorithm* defaultAlgorithm(Coll coll);

/// Builds `plan` (cleared first) for `args` with `algo` (nullptr: the default). If the
/// algorithm declines the arguments, falls back to the collective's default. Returns
/// ncclInvalidArgument for inconsistent arguments (rank, root, p2p peers, params) and
/// ncclInvalidUsage when no algorithm supports them; both with a message via setError.
ncclResult_t buildPlan(const PlanArgs& args, const PlanParams& params, const Algorithm* algo,
                       Plan* plan);

}  // namespace braid
