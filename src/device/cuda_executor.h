// The CUDA executor: runs ops on device buffers with the same plans as the host
// executor, as kernels on the user's stream (src/device/kernels/*.cu walk the steps).
//
// executeDeviceOps is called by the batch layer (src/exec/batch.cc) for the ops of a
// group whose buffers are device memory, with their communicators' turns held. For each
// communicator it makes the plans (the tuner, with device channel counts), the device
// connections the plans need (p2p / shm / net with pinned staging, all ranks together),
// the plans' GPU-readable images, and then enqueues its ops as few launches as possible:
// a launch holds up to DevLaunch::kMaxWorks works of one kernel (datatype and reduction
// family); collectives follow each other inside it (grid barrier), a group's send/recv
// ops run side by side (one block range per peer and direction). Nothing waits for the
// GPU: completion is the stream's (cudaStreamSynchronize, events, graph capture).
#pragma once
#include <vector>

#include "nccl.h"
#include "src/exec/op.h"

namespace braid {

/// Enqueues `ops` (device buffers; in issue order per communicator) on their streams.
/// Errors fail the communicators involved (ncclCommGetAsyncError) and are returned.
ncclResult_t executeDeviceOps(const std::vector<const OpRecord*>& ops);

}  // namespace braid
