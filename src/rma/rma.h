// One-sided operations (NCCL 2.30: ncclPutSignal, ncclSignal, ncclWaitSignal).
//
// The target takes no part in a put: the origin moves the data, or a progress agent in
// the target's process does. Per peer pair the path is fixed when the communicator's
// RMA state is set up (the first ncclCommWindowRegister, a collective):
//
//   kLocal  the peer is this process (itself, or a thread rank): memcpy / cudaMemcpy
//           straight into its window, then an atomic increment of its signal counter.
//   kCma    the peer is another process on this host (same host id) and a test read
//           of its memory succeeded: process_vm_writev into its window (host memory),
//           or a copy through its window's CUDA IPC mapping (device memory); its
//           signal counters live in a shared-memory segment every such peer maps.
//   kAgent  anything else (another host, BRAID_TRANSPORT=socket, NCCL_SHM_DISABLE, no
//           ptrace permission): frames over a TCP connection to the target process's
//           agent thread, which writes the payload into the window and bumps the counter.
//
// Signal counters: every rank owns `nranks` monotonically increasing counters, one per
// origin; ncclWaitSignal keeps how many it has consumed per origin and waits until the
// counter reaches consumed + opCnt. A counter is raised only after the data of the put
// that raises it is in the window, so the data is visible once the wait returns.
// See docs/architecture.md ("One-sided operations").
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "nccl.h"
#include "src/exec/op.h"

namespace braid {

struct Comm;
struct Registration;
class RmaState;

/// Kinds of OpRecord::rma.
enum class RmaKind : uint8_t { kNone = 0, kPutSignal = 1, kSignal = 2, kWaitSignal = 3 };

/// Sets up comm's RMA state if needed and exchanges window `r` with every rank
/// (collective: every rank calls it, in the same order, for its own window). On return
/// r->peers holds every rank's address, size and memory kind of the window. `ticket`
/// (comm->issue()) is the exchange's place in the comm's order: taken when the user made
/// the call, since grouped registrations run concurrently at ncclGroupEnd.
ncclResult_t rmaExchangeWindow(Comm* comm, Registration* r, uint64_t ticket);
/// The same for a caller that already holds the comm's turn.
ncclResult_t rmaExchangeWindowInTurn(Comm* comm, Registration* r);

/// Whether the communicator's RMA state exists (a window was registered).
bool rmaReady(const Comm* comm);

/// Runs one validated one-sided op to completion (the executing thread of its batch).
/// Puts and signals never wait for the target; a wait returns once its signals arrived,
/// or fails when a waited-on peer is gone, the comm is aborted, or BRAID_TIMEOUT_MS
/// passes without the signals.
ncclResult_t rmaExecute(const OpRecord& op);

/// Deleter for Comm::rma (RmaState is private to rma.cc).
struct RmaStateDeleter {
  void operator()(RmaState* s) const;
};

}  // namespace braid
