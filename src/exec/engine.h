// PlanRun: the host executor's interpreter for one rank's Plan.
//
// progress() advances every program of the plan as far as it can without blocking
// (FIFO full or empty stops a program), so one thread can drive many ranks, many
// collectives and many communicators at once (the ncclCommInitAll idiom), and the
// simulator can run all ranks of a plan in one thread over in-memory FIFOs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "src/exec/fifo.h"
#include "src/reduce/reducer.h"

namespace braid {

/// Where a plan's connections are: one FIFO end per (peer, channel, direction).
class ConnTable {
 public:
  virtual ~ConnTable() = default;
  /// nullptr if there is no such connection (a plan bug: reported as internal error).
  virtual FifoSender* sender(int peer, int channel) = 0;
  virtual FifoReceiver* receiver(int peer, int channel) = 0;
  /// Whether the receiver of sender(peer, channel) shares our address space.
  virtual bool allowsDirect(int peer, int channel) { (void)peer; (void)channel; return false; }
};

/// The user buffers a plan's Regions refer to.
struct PlanBuffers {
  const void* send = nullptr;
  void* recv = nullptr;
};

enum class RunState { kRunning, kDone, kError };

class PlanRun {
 public:
  PlanRun() = default;
  /// `plan` and `conns` must outlive the run. allowDirect: the send buffer stays
  /// unchanged until the run is done (out-of-place), so zero-copy entries may point
  /// into it.
  PlanRun(const Plan* plan, PlanBuffers bufs, const Reducer& red, ConnTable* conns,
          bool allowDirect);

  /// Advance; returns true if anything moved. Check state() afterwards.
  bool progress();
  RunState state() const { return state_; }
  /// When state() is kError: what went wrong.
  const std::string& error() const { return error_; }
  /// Rank this run is blocked on (for timeout messages), or -1.
  int waitingOn() const;
  /// "receive from rank 3 (step 4 of 12, RecvReduceSend)" (for timeout messages).
  std::string describeWait() const;

 private:
  struct ProgramState {
    size_t step = 0;       ///< index of the current step
    uint64_t done = 0;     ///< bytes of the current step already moved
  };
  bool progressProgram(const Program& prog, ProgramState& ps);
  bool progressStep(const Step& s, ProgramState& ps);
  void fail(const std::string& why);
  char* regionPtr(const Region& r) const;

  const Plan* plan_ = nullptr;
  PlanBuffers bufs_;
  Reducer red_;
  ConnTable* conns_ = nullptr;
  bool allowDirect_ = false;
  std::vector<ProgramState> programs_;
  std::vector<FifoSender*> directUsed_;  ///< senders with direct entries to drain
  RunState state_ = RunState::kRunning;
  std::string error_;
};

}  // namespace braid
