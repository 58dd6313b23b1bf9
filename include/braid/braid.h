/*
 * Braid extensions to the NCCL API. Everything here is optional: a program that uses
 * only <nccl.h> runs on Braid unchanged.
 *
 * Host streams. NCCL orders work on CUDA streams; for host (CPU) buffers Braid offers a
 * host stream: ops passed a braidHostStream_t (cast with braidHostStreamAsCuda) are
 * queued and run in order on the stream's own thread, so the caller can compute while
 * communication proceeds, and then wait with braidHostStreamSynchronize:
 *
 *   braidHostStream_t hs;
 *   braidHostStreamCreate(&hs);
 *   ncclAllReduce(grad, grad, n, ncclFloat, ncclSum, comm, braidHostStreamAsCuda(hs));
 *   ... compute ...
 *   braidHostStreamSynchronize(hs);   // the all-reduce is done (or its error returned)
 *
 * Buffers must stay valid and unchanged until the op completes. A null stream keeps
 * NCCL's host semantics: the op completes before the call (or ncclGroupEnd) returns.
 */
#ifndef BRAID_BRAID_H_
#define BRAID_BRAID_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/// A host stream (opaque).
typedef struct braidHostStream* braidHostStream_t;

/// Creates a host stream with its worker thread.
ncclResult_t braidHostStreamCreate(braidHostStream_t* stream);
/// Waits for the stream's queued work, then destroys it.
ncclResult_t braidHostStreamDestroy(braidHostStream_t stream);
/// Waits until every op queued so far has completed; returns the first error among
/// them (and clears it), else ncclSuccess.
ncclResult_t braidHostStreamSynchronize(braidHostStream_t stream);
/// ncclSuccess if all queued work is done, ncclInProgress if some is pending, or the
/// first error of completed work.
ncclResult_t braidHostStreamQuery(braidHostStream_t stream);

/// Queues fn(userData) on the stream: it runs on the stream's thread after all work
/// queued before it, and work queued after it waits for it (as cudaLaunchHostFunc).
/// fn must not call NCCL on the same stream.
ncclResult_t braidHostStreamLaunchHostFunc(braidHostStream_t stream, void (*fn)(void*),
                                           void* userData);

/// The value to pass as the cudaStream_t argument of NCCL calls.
static inline cudaStream_t braidHostStreamAsCuda(braidHostStream_t stream) {
  return (cudaStream_t)(void*)stream;
}

/// Writes the communicator's flight record (its last BRAID_FLIGHT_RECORDER operations,
/// with state, algorithm, times and what a stalled one waits on) as JSON to `path`, or,
/// when path is NULL or empty, to BRAID_FLIGHT_RECORDER_DIR/braid-fr-<comm>-rank<r>.json;
/// the WARN log gets a summary. Read the files of all ranks with braid-doctor.
/// ncclInvalidUsage if the recorder is off (BRAID_FLIGHT_RECORDER=0); ncclSystemError
/// if the file cannot be written.
ncclResult_t braidCommDumpFlightRecord(ncclComm_t comm, const char* path);

/// Braid's own version ("0.1.0") and build features ("cuda=0 sanitize=...").
const char* braidVersionString(void);
const char* braidBuildFeatures(void);

#ifdef __cplusplus
}
#endif
#endif /* BRAID_BRAID_H_ */
