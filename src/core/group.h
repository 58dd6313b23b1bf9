// The group layer: ncclGroupStart/End with NCCL's semantics. Every API call is
// recorded in the calling thread's group (an implicit group of one outside
// Start/End); at the outermost ncclGroupEnd the recorded ops are handed to the
// executor: ops on a Braid host stream are queued on that stream, all others run to
// completion in the calling thread before GroupEnd returns. Communicator creation
// inside a group (ncclCommInitRank, ncclCommSplit) is deferred to GroupEnd and runs
// concurrently, so one thread can create many ranks.
#pragma once
#include <functional>

#include "nccl.h"
#include "src/exec/op.h"

namespace braid {

ncclResult_t groupStart();
ncclResult_t groupEnd();
/// As groupEnd, but only estimates (simInfo->estimatedTime, us) and drops the ops.
ncclResult_t groupSimulateEnd(ncclSimInfo_t* simInfo);
bool inGroup();

/// Record (or, outside a group, run) one validated op.
ncclResult_t enqueueOp(const OpRecord& op);
/// Record an error raised inside a group: groupEnd returns it and drops the ops.
void groupNoteError(ncclResult_t code);
/// Defer a communicator-creation job to the outermost groupEnd (call only in a group).
void groupDeferInit(std::function<ncclResult_t()> job);

}  // namespace braid
