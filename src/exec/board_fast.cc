// The flag board's fast path: one blocking collective outside a group, on host buffers,
// that the board takes (chooseBoardPath). It is issued in order like any batch (ticket,
// collective number, flight record) and waits the same way (Stall: spin, yield, nap,
// peer checks, BRAID_TIMEOUT_MS, abort), but without a batch's tasks, tuner, plan,
// scratch and connection pass: for an 8-byte all-reduce those cost more than the
// exchange itself.
#include <mutex>
#include <string>

#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/tuner.h"
#include "src/diag/flight_recorder.h"
#include "src/exec/batch.h"
#include "src/exec/board.h"
#include "src/exec/board_run.h"
#include "src/exec/call_tag.h"
#include "src/exec/stall.h"

namespace braid {
namespace {

/// Fails the op: the error (naming the call and the comm), the flight record, and the
/// communicator's fatal state (so its peers stop waiting for it).
/// fatal: false for a mismatch (found alike by every rank before anything moved: the
/// comm stays usable).
ncclResult_t failOp(Comm* c, const OpRecord& op, uint64_t opIndex, ncclResult_t code,
                    const std::string& why, const char* reason, bool fatal = true) {
  setError(code, c, "%s (%s, op #%llu, count %zu %s) failed: %s", op.call, c->who().c_str(),
           static_cast<unsigned long long>(opIndex), op.count, dataTypeName(op.type),
           why.c_str());
  if (c->recorder) c->recorder->finished(op.frSeq, false, why.c_str());
  if (fatal) c->fatal(code, reason);
  else if (c->recorder) c->recorder->dump(reason);
  return code;
}

}  // namespace

bool runOnBoardDirectly(const OpRecord& in, ncclResult_t* result) {
  Comm* c = in.comm;
  if (!c->board || c->settings.check || in.mem != MemKind::kHost || in.rma != 0) return false;
  const BoardPath path = chooseBoardPath(c, in);
  if (path == BoardPath::kNone) return false;
  OpRecord op = in;
  // One per thread, reused: it keeps the single-copy plan of the last call's shape.
  thread_local BoardRun run;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(c->issueMu);  // one comm: no global order needed
    op.collSeq = c->collSeqNext++;
    if (c->recorder) c->recorder->queuedStarted(&op, boardPathName(path));
    ticket = c->takeTicket();
  }
  TurnGuard turn(c, ticket);
  if (!c->waitTurn(ticket)) {
    *result = setError(ncclInvalidUsage, c, "%s: the communicator was %s before its queued work "
                       "could run", c->who().c_str(), c->revoked.load() ? "revoked" : "aborted");
    return true;
  }
  std::lock_guard<std::mutex> exec(c->execMutex);
  if (c->magic.load() != Comm::kMagic || c->abortFlag.load()) {
    *result = setError(ncclInvalidUsage, nullptr,
                       "comm %p was aborted or destroyed while its work was queued",
                       static_cast<void*>(c));
    return true;
  }
  const uint64_t opIndex = c->opCount++;
  if (logEnabled(LogLevel::kInfo, kLogTuning))
    logBoardChoice(planArgsFor(c, op), path == BoardPath::kInline ? "inline" : "copy");
  run.start(c, op, path, c->settings.tagCalls ? makeCallTag(op) : CallTag());
  Stall stall(c->settings);
  stall.wakeOn(&c->board->wake(c->rank));  // only phases are waited for here
  for (uint64_t loops = 0;; ++loops) {
    const bool moved = run.progress();
    if (run.state() == RunState::kDone) break;
    if (run.state() == RunState::kError) {
      *result = run.mismatch()
                    ? failOp(c, op, opIndex, ncclInvalidUsage, run.error(), "mismatch", false)
                    : failOp(c, op, opIndex, run.errorCode(), run.error(), "peer");
      return true;
    }
    if ((loops & 1023) == 0 || !moved) {
      if (c->abortFlag.load(std::memory_order_relaxed) ||
          c->revoked.load(std::memory_order_relaxed)) {
        *result = failOp(c, op, opIndex, ncclInvalidUsage,
                         c->revoked.load() ? "the communicator was revoked"
                                           : "the communicator was aborted",
                         "abort");
        return true;
      }
    }
    if (moved) {
      stall.moved();
      continue;
    }
    bool timedOut = false;
    int64_t stalledMs = 0;
    if (!stall.idle(&timedOut, &stalledMs)) continue;
    const int peer = run.waitingOn();
    std::string why;
    if (peer >= 0 && !c->board->peerAlive(peer, &why)) {
      *result = failOp(c, op, opIndex, ncclRemoteError, why, "peer");
      return true;
    }
    if (c->recorder && peer >= 0) c->recorder->waiting(op.frSeq, peer, run.describeWait());
    if (timedOut) {
      *result = failOp(c, op, opIndex, ncclSystemError,
                       "no progress for " + std::to_string(stalledMs) +
                           " ms (BRAID_TIMEOUT_MS): " + run.describeWait(),
                       "timeout");
      return true;
    }
  }
  if (c->recorder) c->recorder->finished(op.frSeq, true);
  *result = ncclSuccess;
  return true;
}

}  // namespace braid
