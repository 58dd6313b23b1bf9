// BoardRun: one collective executed on the communicator's flag board (src/exec/board.h)
// instead of through a Plan and the FIFOs. Two paths, chosen per call by size alike on
// every rank (chooseBoardPath):
//   inline  each rank's part fits the board's inline area: one phase (write, publish,
//           wait for all, compute the result from every rank's inline data; rooted
//           collectives too: a broadcast's root waits for the others to arrive, except
//           with the check off, where roots may run ahead: board.h);
//   copy    single copy, as a plan of direct-access steps (algorithms/*/peer_read.cc,
//           allreduce/two_shot.cc) run by the host engine over the board
//           (src/exec/board_peers.h): ranks publish their buffer addresses and read each
//           other's buffers directly (memcpy in one process, process_vm_readv between
//           processes), with one more phase so no rank returns while its buffers are
//           being read. All-reduce is two-shot: rank r reduces chunk r of every rank's
//           input (in rank order, so every rank gets the same bits), then every rank
//           copies the other chunks from their owners.
// A third, kCheck, moves no data: the phase a collective that runs as a plan (too large
// for the board) publishes with its tag just before the plan runs (and before its
// connections are made, where it makes some: batch.cc), so that every collective on a
// board comm is compared at a phase of its own, whichever way it moves its data.
// Every path compares every rank's tag of its first phase before it reads or reduces
// anything: a mismatch fails the run on every rank alike (mismatch()), with no data
// moved, so the communicator stays usable.
// Like PlanRun, progress() never blocks: the batch's progress loop waits, checks peers,
// times out and aborts for it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "src/exec/board_peers.h"
#include "src/exec/call_tag.h"
#include "src/exec/engine.h"
#include "src/exec/op.h"
#include "src/reduce/reducer.h"

namespace braid {

class Board;
struct Comm;

enum class BoardPath : uint8_t { kNone, kInline, kCopy, kCheck };

/// The board path for `op` (the same answer on every rank making the same call), or
/// kNone: the op goes through a Plan.
BoardPath chooseBoardPath(const Comm* comm, const OpRecord& op);
const char* boardPathName(BoardPath p);

class BoardRun {
 public:
  /// `op` must stay valid until the run is over. tag: op's call (compared with every
  /// rank's at the first phase; untagged on every rank when the check is off).
  void start(Comm* comm, const OpRecord& op, BoardPath path, const CallTag& tag);
  bool progress();
  RunState state() const { return state_; }
  const std::string& error() const { return error_; }
  /// The error is a collective mismatch, found alike by every rank (nothing moved):
  /// ncclInvalidUsage, and the communicator stays usable.
  bool mismatch() const { return mismatch_; }
  /// The error's code: ncclInvalidUsage for a mismatch (ours, or the rank whose
  /// failure stopped us found one), ncclRemoteError otherwise.
  ncclResult_t errorCode() const { return mismatch_ ? ncclInvalidUsage : failedCode_; }
  /// The rank a wait is on (-1 if none).
  int waitingOn() const {
    if (planStarted_) return run_.waitingOn();
    return waiting_ ? lagging_ : -1;
  }
  std::string describeWait() const;

 private:
  /// Does the work after the current wait; publishes the next phase or finishes.
  void runStage();
  /// Copies this rank's part of an inline collective into its next phase's area.
  void writeInlinePart();
  /// The inline path with the check off (roots may run ahead: board.h).
  void runAheadInline();
  void publishAndWait();
  /// After the first phase: whether every rank published the same call.
  bool tagsAgree();
  void fail(const std::string& why);
  void inlineResult();
  /// The single-copy path: builds (or reuses) the call's direct-access plan and starts
  /// it over the board.
  void startPlan();
  bool progressPlan();

  Board* b_ = nullptr;
  const OpRecord* op_ = nullptr;  ///< the caller's record (outlives the run)
  CallTag tag_;
  bool mismatch_ = false;
  ncclResult_t failedCode_ = ncclRemoteError;
  Reducer red_;
  BoardPath path_ = BoardPath::kNone;
  int stage_ = 0;
  bool waiting_ = false;
  uint64_t target_ = 0;  ///< the phase waited for
  int waitRank_ = -1;    ///< ... by this rank only (-1: every rank)
  bool runAhead_ = false;  ///< the check is off: rooted collectives need not wait for all
  bool safeWaitPending_ = false;  ///< runAhead_: the safe-phase wait is still to be set up
  int lagging_ = -1;
  // The single-copy path's plan, kept for the next call of the same shape. On the heap,
  // as run_ points at it and at peers_ (a BoardRun may move with its task).
  Comm* comm_ = nullptr;
  std::unique_ptr<Plan> plan_;
  PlanArgs planKey_;
  std::vector<char> scratch_;  ///< the plan's scratch (all-to-all in place)
  std::unique_ptr<BoardPeers> peers_;
  PlanRun run_;
  bool planStarted_ = false;
  RunState state_ = RunState::kDone;
  std::string error_;
};

}  // namespace braid
