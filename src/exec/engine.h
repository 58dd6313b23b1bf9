// PlanRun: the host executor's interpreter for one rank's Plan.
//
// progress() advances every program of the plan as far as it can without blocking
// (FIFO full or empty stops a program), so one thread can drive many ranks, many
// collectives and many communicators at once (the ncclCommInitAll idiom), and the
// simulator can run all ranks of a plan in one thread over in-memory FIFOs.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"
#include "src/exec/call_tag.h"
#include "src/exec/fifo.h"
#include "src/reduce/reducer.h"

namespace braid {

/// The user buffers a plan's Regions refer to.
struct PlanBuffers {
  const void* send = nullptr;
  void* recv = nullptr;
  void* scratch = nullptr;  ///< Plan::scratchElems elements, owned by the caller
};

/// What runs a plan's direct-access steps (algorithms/plan.h, kSignal .. kPeerPut):
/// the other ranks' buffers of the same call and one signal count per rank and program.
/// The flag board implements it on one host (src/exec/board_peers.h: one program), the
/// simulator in memory.
class PeerAccess {
 public:
  virtual ~PeerAccess() = default;
  virtual int nranks() const = 0;
  virtual int rank() const = 0;
  /// Posts program `prog`'s next signal of the run (its first announces `bufs`, this
  /// rank's buffers of the call, before it is posted).
  virtual void signal(size_t prog, const PlanBuffers& bufs) = 0;
  /// Whether `peer` (kAllPeers: every rank) has posted `k` signals of program `prog` in
  /// this run. If not: *lagging is a rank that has not; a failure to report (the rank
  /// failed, the first signals' calls differ, a program this executor cannot run) is
  /// set in *why and *code, and ends the run.
  virtual bool reached(size_t prog, int peer, uint64_t k, int* lagging, std::string* why,
                       ncclResult_t* code) = 0;
  /// Where this rank can address rank p's bytes at byte `off` of its buffer `buf`, or
  /// null where it cannot (another process: read() and write() them). Valid after a
  /// wait saw p's first signal; writable where `buf` is p's recv buffer.
  virtual char* view(int p, Buf buf, uint64_t off) = 0;
  /// Copies n such bytes into dst. Returns 0 or an errno.
  virtual int read(int p, Buf buf, uint64_t off, void* dst, uint64_t n) = 0;
  /// Copies n bytes from src to such bytes of p's (its recv buffer). 0 or an errno.
  virtual int write(int p, Buf buf, uint64_t off, const void* src, uint64_t n) = 0;
};

/// Where a plan's connections are: one FIFO end per (peer, channel, direction).
class ConnTable {
 public:
  virtual ~ConnTable() = default;
  /// nullptr if there is no such connection (a plan bug: reported as internal error).
  virtual FifoSender* sender(int peer, int channel) = 0;
  virtual FifoReceiver* receiver(int peer, int channel) = 0;
  /// Whether data for (peer, channel) is written into FIFO slots with non-temporal
  /// stores (the reader is another core: see src/exec/stream_copy.h).
  virtual bool streamTo(int peer, int channel) {
    (void)peer;
    (void)channel;
    return false;
  }
  /// Plans writing at least this many bytes of results store them with non-temporal
  /// stores (they cannot stay in cache anyway); UINT64_MAX: never.
  virtual uint64_t streamOutputMinBytes() { return UINT64_MAX; }
  /// The smallest piece worth sending to (peer, channel) as a direct (zero-copy) entry:
  /// 0 where the receiver shares our address space, a threshold where it pulls across
  /// processes (process_vm_readv), UINT64_MAX where direct entries are impossible.
  virtual uint64_t directMinBytes(int peer, int channel) {
    (void)peer;
    (void)channel;
    return UINT64_MAX;
  }
  /// Direct access to the other ranks of the call (nullptr: none; plans with
  /// direct-access steps then fail).
  virtual PeerAccess* peerAccess() { return nullptr; }
  /// Why the connections to `peer` failed (for messages once one was found closed; ""
  /// when the transport cannot say).
  virtual std::string whyClosed(int peer) {
    (void)peer;
    return "";
  }
  /// A step sending to kSwitchPeer on `channel` starts a message of `bytes` bytes:
  /// tells the switch connection what the switch does with it (algorithms/plan.h).
  enum class Announce { kOk, kRetry, kNoSwitch };
  virtual Announce announceSwitch(int channel, SwitchOp op, uint64_t bytes,
                                  const Reducer& red) {
    (void)channel;
    (void)op;
    (void)bytes;
    (void)red;
    return Announce::kNoSwitch;
  }
};

enum class RunState { kRunning, kDone, kError };

class PlanRun {
 public:
  PlanRun() = default;
  /// `plan` and `conns` must outlive the run. allowDirect: the send buffer stays
  /// unchanged until the run is done (out-of-place), so zero-copy entries may point
  /// into it. tag: the call's tag, written into every slot this run fills and compared
  /// with the tag of every slot it reads (untagged: nothing is compared).
  PlanRun(const Plan* plan, PlanBuffers bufs, const Reducer& red, ConnTable* conns,
          bool allowDirect, const CallTag& tag = CallTag());
  /// Re-initialises this object for a new run (as the constructor; keeps the
  /// allocations of the previous run, so a reused PlanRun does not touch the heap).
  void start(const Plan* plan, PlanBuffers bufs, const Reducer& red, ConnTable* conns,
             bool allowDirect, const CallTag& tag = CallTag());

  /// Advance; returns true if anything moved. Check state() afterwards.
  bool progress();
  RunState state() const { return state_; }
  /// When state() is kError: what went wrong, and the code for it: ncclInvalidUsage
  /// for a collective mismatch (found here, or by the peer that closed a connection
  /// for it), ncclRemoteError otherwise.
  const std::string& error() const { return error_; }
  ncclResult_t errorCode() const { return errorCode_; }
  /// Whether the error is a collective mismatch this run found itself.
  bool foundMismatch() const { return foundMismatch_; }
  /// Rank this run is blocked on (for timeout messages), or -1.
  int waitingOn() const;
  /// "receive from rank 3 (step 4 of 12, RecvReduceSend)" (for timeout messages).
  std::string describeWait() const;

 private:
  struct ProgramState {
    size_t step = 0;       ///< index of the current step
    uint64_t done = 0;     ///< bytes of the current step already moved
    bool announced = false;  ///< a switch message: announced to the connection
    uint64_t signals = 0;  ///< direct-access signals this program posted
  };
  bool progressProgram(const Program& prog, ProgramState& ps);
  bool progressStep(const Step& s, ProgramState& ps);
  /// Runs a direct-access step of program `prog`; false while it waits (or failed).
  bool directStep(const Step& s, size_t prog, ProgramState& ps);
  /// Stores n bytes from src into dst at rank p (this rank's own: a plain copy).
  bool putAt(int p, const Region& dst, uint64_t off, const char* src, uint64_t n);
  /// Rank p's src bytes [off, off + n) of step s: in place, or read into `into`.
  const char* peerBytes(int p, const Region& src, uint64_t off, uint64_t n, char* into);
  void fail(const std::string& why, ncclResult_t code = ncclRemoteError);
  /// Whether the front slot of `in` (from `peer`) belongs to this run's call; fails
  /// the run with a mismatch otherwise.
  bool tagMatches(const FifoReceiver* in, int peer) {
    const CallTag& t = in->frontTag();
    if (!tag_.tagged() || !t.tagged() || t == tag_) return true;
    mismatch(peer, t);
    return false;
  }
  void mismatch(int peer, const CallTag& theirs);
  /// A closed connection's message (and code: a mismatch found by the peer).
  void failClosed(const char* dir, int peer, uint32_t why);
  /// Stores n bytes of results: dst and/or slot (either may be null) receive
  /// `in op local` (reduce) or `in` (copy), with the op's pre/post flags; non-temporal
  /// stores into dst when streamOut_, into slot when streamSlot.
  void emit(char* dst, char* slot, const char* in, const char* local, uint64_t n,
            uint8_t flags, bool reduce, bool streamSlot);
  /// A sender whose direct entries we must see drained before we are done.
  void noteDirect(FifoSender* out, int peer);
  /// Pulls n bytes of a remote (other-process) direct entry at `remote` into dst;
  /// false (and the run failed) if the read failed.
  bool pull(FifoReceiver* in, int peer, char* dst, const char* remote, uint64_t n);
  /// Pulls the front of a remote entry (at most `capacity` bytes: *n shrinks) into
  /// this thread's bounce buffer and points *p at it.
  bool pullBounce(FifoReceiver* in, int peer, const char** p, uint64_t* n, uint64_t capacity);
  char* regionPtr(const Region& r) const;
  /// Largest piece moved into one slot of `out` (Plan::sliceBytes, the protocol).
  uint64_t slice(const FifoSender* out) const {
    const uint64_t slot = out->slotBytes();
    return plan_->sliceBytes && plan_->sliceBytes < slot ? plan_->sliceBytes : slot;
  }

  const Plan* plan_ = nullptr;
  PlanBuffers bufs_;
  Reducer red_;
  ConnTable* conns_ = nullptr;
  bool allowDirect_ = false;
  bool streamOut_ = false;  ///< results go to dst with non-temporal stores
  std::vector<ProgramState> programs_;
  /// Senders with direct entries to drain, and the peer each one goes to.
  std::vector<std::pair<FifoSender*, int>> directUsed_;
  CallTag tag_;
  int waitPeer_ = -1;     ///< the rank a direct-access wait is on
  RunState state_ = RunState::kRunning;
  std::string error_;
  ncclResult_t errorCode_ = ncclSuccess;
  bool foundMismatch_ = false;
};

}  // namespace braid
