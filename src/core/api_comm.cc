// Communicator teardown and queries: ncclCommFinalize/Destroy/Abort/Revoke,
// ncclCommGetAsyncError, ncclCommCount/CuDevice/UserRank.
#include <sched.h>

#include <thread>

#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/device/device_comm.h"
#include "src/diag/flight_recorder.h"

using namespace braid;

namespace {

/// Waits until no host stream holds work for this comm.
void waitQueued(Comm* c) {
  while (c->queuedBatches.load() > 0) std::this_thread::yield();
}

/// Waits until all work issued on this comm so far (batches, splits) has finished;
/// returns at once if the comm is aborted.
void waitIssued(Comm* c) {
  uint64_t ticket = c->issue();
  TurnGuard turn(c, ticket);
  c->waitTurn(ticket, true);
  waitQueued(c);  // batches that gave up their turn early may still be leaving
}

/// Joins a nonblocking init still running (it gives up promptly once aborted).
void joinInit(Comm* c) {
  if (c->initThread.joinable()) c->initThread.join();
}

}  // namespace

extern "C" {

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  BRAID_CHECK(checkComm(comm, "ncclCommFinalize"));
  Comm* c = asComm(comm);
  joinInit(c);
  waitIssued(c);
  // Device work is stream-ordered: finalizing waits for the launches issued so far
  // (the watchdog fails the communicator if a peer dies meanwhile).
  if (c->device && !c->device->drain(c->settings.timeoutMs))
    return setError(ncclSystemError, c, "ncclCommFinalize: %s: device work made no progress "
                    "for %d ms (BRAID_TIMEOUT_MS)", c->who().c_str(), c->settings.timeoutMs);
  c->finalized = true;
  return ncclResult_t(c->asyncError.load() == ncclInProgress ? ncclSuccess : c->asyncError.load());
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  BRAID_CHECK(checkComm(comm, "ncclCommDestroy"));
  Comm* c = asComm(comm);
  joinInit(c);
  waitIssued(c);
  { std::lock_guard<std::mutex> lock(c->execMutex); }
  Comm::retire(c);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  BRAID_CHECK(checkComm(comm, "ncclCommAbort"));
  Comm* c = asComm(comm);
  c->abortFlag.store(true);
  joinInit(c);
  c->wakeSelf();  // a thread asleep in this comm's work wakes and sees the flag
  // Work cut short is what a later diagnosis needs: write it out (a failure was
  // written when it happened).
  if (c->recorder && c->asyncError.load() == ncclSuccess && c->recorder->outstanding())
    c->recorder->dump("abort");
  // Batches still queued on host streams are not waited for (they may sit behind
  // another communicator's work): when they run they see the flag and fail at once,
  // and the retired shell they touch stays allocated (Comm::retire's quarantine).
  {
    // Any thread inside this comm's work sees the flag within a few microseconds and
    // leaves; taking the lock waits for that. Closing the FIFOs tells the peers.
    std::lock_guard<std::mutex> lock(c->execMutex);
    c->closeConnections(kFifoSenderAborted);
  }
  Comm::retire(c);
  return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  BRAID_CHECK(checkComm(comm, "ncclCommRevoke"));
  Comm* c = asComm(comm);
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return setError(ncclInvalidArgument, c, "ncclCommRevoke: revokeFlags must be "
                    "NCCL_REVOKE_DEFAULT (0), not 0x%x", revokeFlags);
  c->revoked.store(true);
  c->wakeSelf();
  // A thread executing this comm's work notices the flag and closes the connections
  // itself (Comm::fatal); otherwise close them here, so peers fail instead of waiting.
  std::unique_lock<std::mutex> lock(c->execMutex, std::try_to_lock);
  if (lock.owns_lock()) c->closeConnections(kFifoSenderAborted);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  BRAID_CHECK(checkComm(comm, "ncclCommGetAsyncError"));
  if (asyncError == nullptr)
    return setError(ncclInvalidArgument, asComm(comm), "ncclCommGetAsyncError: asyncError is NULL");
  *asyncError = ncclResult_t(asComm(comm)->asyncError.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  BRAID_CHECK(checkComm(comm, "ncclCommCount"));
  if (count == nullptr) return setError(ncclInvalidArgument, asComm(comm), "ncclCommCount: count is NULL");
  *count = asComm(comm)->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  BRAID_CHECK(checkComm(comm, "ncclCommCuDevice"));
  if (device == nullptr)
    return setError(ncclInvalidArgument, asComm(comm), "ncclCommCuDevice: device is NULL");
  *device = asComm(comm)->cudaDev;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  BRAID_CHECK(checkComm(comm, "ncclCommUserRank"));
  if (rank == nullptr) return setError(ncclInvalidArgument, asComm(comm), "ncclCommUserRank: rank is NULL");
  *rank = asComm(comm)->rank;
  return ncclSuccess;
}

}  // extern "C"
