// The bootstrap root: a detached thread that collects every rank's listen address and
// sends the table back (see bootstrap.h for the protocol's purpose).
#pragma once
#include <cstdint>

#include "nccl.h"
#include "src/net/socket.h"

namespace braid {

/// Starts a detached thread serving `listener` (already listening) for the job whose
/// id carries `secret`. The thread exits when every rank got the table, when no rank
/// arrived for `timeoutMs` (<= 0: never; logs a WARN), or when a rank that had joined
/// leaves before the others arrived (the others are told).
ncclResult_t bootstrapStartRoot(Socket listener, uint64_t secret, int timeoutMs);

/// Root threads of this process still running (tests check that none leak).
int bootstrapRootsRunning();

}  // namespace braid
