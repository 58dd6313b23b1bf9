// Batch: the host executor's unit of work. A batch is what one ncclGroupEnd hands to
// one execution context (the calling thread, or a Braid host stream's thread): the
// recorded ops of possibly many communicators. Executing it
//   1. turns ops into tasks (tuner picks the algorithm, the builder makes the Plan),
//   2. makes the connections the plans need that do not exist yet, for all
//      communicators at once (three phases, so one thread can connect many ranks),
//   3. drives every communicator's tasks to completion in one progress loop: per
//      communicator, collectives run in call order; consecutive send/recv ops form one
//      stage whose lanes (one per peer and direction) run concurrently.
// Waiting spins, then yields; a stall longer than BRAID_PEER_CHECK_MS checks the peers
// waited on, and one longer than BRAID_TIMEOUT_MS fails the op naming the rank.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "nccl.h"
#include "src/exec/op.h"

namespace braid {

struct Comm;

/// The ops of one group end, with their places in each communicator's issue order.
struct Batch {
  std::vector<OpRecord> ops;
  std::vector<std::pair<Comm*, uint64_t>> tickets;  ///< one per distinct comm
};

/// The builder arguments of one op (in-place detection with NCCL's offset rule).
PlanArgs planArgsFor(const Comm* comm, const OpRecord& op);

/// Takes the batch's tickets (one per communicator, in one global order). Call once,
/// when the batch is issued: execution then waits for the work issued before it.
void issueBatch(Batch* batch);

/// Executes the ops to completion once their turn has come, and ends their turns.
/// Returns the first error; every failed communicator records its own error
/// (ncclCommGetAsyncError, ncclGetLastError).
ncclResult_t executeBatch(const Batch& batch);

/// One blocking collective outside a group that runs on the flag board, issued and run
/// without a batch (src/exec/board_fast.cc): the common small-message call. Returns
/// false, having done nothing, when `op` does not qualify; else *result is the outcome.
bool runOnBoardDirectly(const OpRecord& op, ncclResult_t* result);

/// Plan and connections for `ops` without running them: the cost estimate of
/// ncclGroupSimulateEnd, in microseconds.
float estimateBatchUs(const std::vector<OpRecord>& ops);

}  // namespace braid
