// Tuner: chooses algorithm, protocol, channels and chunk size for one operation, by
// the cost model (algorithms/cost.h) over the candidates NCCL_ALGO / NCCL_PROTO allow,
// and builds (or fetches from the comm's cache) the plan. Every rank of a communicator
// decides alike: the inputs (layout, model, settings) are the same on all of them.
//
// NCCL_ALGO / NCCL_PROTO syntax (case-insensitive, as NCCL's): a comma list ("ring,tree"),
// "^" negating the whole list ("^tree"), and per-collective lists separated by ';'
// ("allreduce:tree,ring;broadcast:chain"); a list without a prefix applies to the
// collectives the prefixed lists do not name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/plan.h"
#include "algorithms/registry.h"
#include "nccl.h"
#include "src/exec/transport.h"

namespace braid {

struct Comm;

/// A protocol of the host executor: the piece moved through a FIFO slot at once.
struct Protocol {
  const char* name;     ///< NCCL's name it answers to (Simple, LL128, LL)
  uint64_t sliceBytes;  ///< 0: a whole slot
};
/// Simple, LL128, LL (in preference order for equal cost).
const std::vector<Protocol>& protocols();

/// Everything one tuning decision depends on.
struct TuneInput {
  PlanArgs args;          ///< args.layout set (nullptr: one node)
  std::string algoSpec;   ///< NCCL_ALGO
  std::string protoSpec;  ///< NCCL_PROTO
  CostModel model;
  FifoGeometry geometry;
  uint64_t smallMsgBytes = 32768;
  int minChannels = 1, maxChannels = 1;
  /// Only the direct-access algorithms (where args.peerAccess and the collective has
  /// them): the CUDA executor between ranks of one GPU, where staging through FIFOs
  /// only adds traffic on the same memory.
  bool directOnly = false;
};

/// One ranked candidate.
struct TuneChoice {
  const Algorithm* algo;
  const char* protocol;
  PlanParams params;
  uint64_t sliceBytes;
  double us;  ///< predicted microseconds (+inf: no formula)
};

/// The candidates for `in`, cheapest first (the first one whose builder accepts the
/// arguments runs). If NCCL_ALGO/NCCL_PROTO allow nothing (or `ignoreSpecs`), every
/// candidate is ranked.
std::vector<TuneChoice> rankChoices(const TuneInput& in, bool ignoreSpecs = false);

/// Builds (or fetches from the comm's cache) the plan for `args` on `comm`.
/// device: a plan for the CUDA executor (cached apart; channels from
/// BRAID_DEVICE_NCHANNELS and the message size).
ncclResult_t makePlan(Comm* comm, const PlanArgs& args, std::shared_ptr<const Plan>* out,
                      bool device = false);

/// The TUNING log line for a collective that runs on the flag board (`path`: "inline",
/// "copy"), once per size in a row.
void logBoardChoice(const PlanArgs& args, const char* path);

/// Whether NCCL_ALGO (as given in `spec`) allows the algorithm called `name` (or, if
/// not null, `ncclName`) for `coll` (syntax above).
bool algoAllowed(const std::string& spec, Coll coll, const char* name, const char* ncclName);

/// Whether the list of `spec` that applies to `coll` is a positive list naming it
/// (NCCL_ALGO=direct asks for a one-shot algorithm at any size; ^ring does not).
bool algoNamed(const std::string& spec, Coll coll, const char* name, const char* ncclName);

/// The same rule for NCCL_PROTO and a protocol name.
bool protoAllowed(const std::string& spec, Coll coll, const char* name);

}  // namespace braid
