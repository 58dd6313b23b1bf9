// The GPU suite's scenarios beyond the matrix, each run by every rank of a worker's
// communicator (see worker.h). Each returns the number of failed checks (0: passed),
// printing every failure to stderr.
#ifndef BRAID_TESTS_GPU_SCENARIOS_H_
#define BRAID_TESTS_GPU_SCENARIOS_H_

#include "tests/gpu/matrix.h"

namespace braid_gpu {

/// An int32 sum all-reduce captured on the rank's stream (global capture mode; thread-local
/// when ranks are threads),
/// instantiated, and launched 3 times with new inputs; the capture must not run it, and
/// every launch's result is checked.
int runGraph(const RankCtx& r);

/// Five ops of different collectives, types and ops in one ncclGroupStart/End: run
/// eagerly and checked; then captured, where the group must be one kernel node, and
/// launched and checked.
int runGroup(const RankCtx& r);

/// A loop of 64 MiB float all-reduces; after 3 complete, one byte goes to statusFd. Rank
/// 1 loops until the parent kills it. Rank 0 must see ncclCommGetAsyncError report an
/// error within 30 s of its call getting stuck, and ncclCommAbort must then return.
int runKilled(const RankCtx& r, int statusFd);

/// Device work in flight at ncclCommAbort (the communicator was made with nonblocking
/// init): both ranks run one 64 MiB all-reduce together (the first call sets the
/// device connections up with the peer, as NCCL's runtime connection does), then rank
/// 0 starts a second one that rank 1 never joins, and aborts; the abort must return
/// and rank 0's stream must drain (the kernel gave up), each within 20 s. Rank 1
/// aborts its idle communicator. A call may return ncclInProgress (nonblocking
/// communicator). Runs with the worker's "abort" mode.
int runAbortInFlight(const RankCtx& r);

/// BRAID_CHECK=1 on device buffers: the last rank calls an all-reduce with another
/// count; every rank must get ncclInvalidUsage naming the count, and the next matching
/// all-reduce must run and be right. Runs with the worker's "mismatch" mode.
int runMismatch(const RankCtx& r);

}  // namespace braid_gpu

#endif  // BRAID_TESTS_GPU_SCENARIOS_H_
