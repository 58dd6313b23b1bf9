// Board: a communicator's shared flag board, for ranks that all live on one machine.
//
// One shared-memory segment per communicator (made at init, when every rank is on the
// same host), with one slot per rank. A slot has a phase counter and a failure word in
// one cache line, the addresses of the rank's current buffers next to them, and
// kInlineAreas inline areas (phase t uses area t mod kInlineAreas). An inline
// area starts with the tag of the call that published the phase, then its inline
// data: a small message and its tag travel in one cache line. Collectives
// that run on the board (src/exec/board_run.h) are sequences of phases: a rank writes what it
// contributes (inline data or buffer addresses), publishes the next phase with the tag
// of its call (src/exec/call_tag.h), and waits until every rank has published it. Between
// phases it reads the others' inline data or, for larger messages, their buffers
// directly: memcpy within one process, process_vm_readv between processes (single copy;
// probed at init, used only where every pair may read each other).
//
// Every collective on host buffers on a communicator with a board publishes a phase
// when it starts, also those that then run as plans (a check phase), and compares
// every rank's tag
// before anyone reads or reduces: a rank that called another collective, count, type,
// op or root is found by every rank at the same phase, before any data moved.
//
// Why the areas need no acknowledgement: with the check on, every phase is a barrier (a
// rank waits for every rank to publish phase t before it writes anything for t+1), so
// no rank is ever more than one phase ahead of another, and a rank writes area t+1
// only after every rank finished reading area t-1.
//
// With the check off (BRAID_CHECK=0), rooted collectives need not wait for everyone:
// a broadcast's root publishes its data and returns, the others read it once the
// root's phase is there and then publish theirs; a reduce's non-roots publish their
// parts and return. Why the inline areas need no acknowledgement then: with K areas, a
// rank publishes phase t only after seeing every rank at t-(K-1) (every collective
// starts by checking that), and a rank reaches t-(K-1) only after it finished reading
// what was published at t-K, which is what phase t overwrites; so a root may run up to
// K-1 such collectives ahead of the slowest rank. (With the check on that wait is
// always met at once.)
//
// After the slots, one WakeWord per rank (src/exec/wake.h): a rank that has waited long
// enough sleeps on its word; publishing a phase or a failure rings every other rank's,
// and the FIFOs between the ranks ring the word of the rank at their other end.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"
#include "src/exec/call_tag.h"
#include "src/exec/wake.h"

namespace braid {

struct Comm;

class Board {
 public:
  /// Inline areas per rank: how many phases a rank may publish ahead of the slowest.
  static constexpr uint64_t kInlineAreas = 8;
  static_assert(kInlineAreas > uint64_t(kMaxSignalsAhead),
                "a direct-access plan's signals must not overwrite tags still to be compared");
  /// One rank's slot header (one cache line).
  struct alignas(64) Slot {
    std::atomic<uint64_t> phase;   ///< the last phase this rank published
    std::atomic<uint32_t> failed;  ///< nonzero: this rank failed (its ncclResult_t)
    uint32_t pad;
    uint64_t sendAddr;  ///< this rank's buffers in its own address space, written
    uint64_t recvAddr;  ///< before the phase that announces them
  };
  static_assert(sizeof(Slot) == 64, "a board slot header is one cache line");

  /// Collective: every rank of `comm` calls it at init (after the peer table and the
  /// layout are set). Makes the board when rank 0 asks for one (BRAID_BOARD; its
  /// inline and copy sizes apply), every rank is on one host, and every rank could
  /// map the segment; *out stays null otherwise (or on error).
  /// cmaMaxBytes: the single-copy limit where some ranks are other processes.
  static ncclResult_t setup(Comm* comm, uint64_t inlineBytes, uint64_t copyMaxBytes,
                            uint64_t cmaMaxBytes, std::unique_ptr<Board>* out);
  ~Board();
  Board(const Board&) = delete;
  Board& operator=(const Board&) = delete;

  int nranks() const { return nranks_; }
  int rank() const { return rank_; }
  /// Inline bytes per rank and phase; messages whose per-rank part fits run in one phase.
  uint64_t inlineBytes() const { return inlineBytes_; }
  /// Largest message (bytes of the larger buffer) moved by single copy; 0: none.
  uint64_t copyMaxBytes() const { return singleCopy_ ? copyMaxBytes_ : 0; }
  /// Every rank lives in this process (single copy is memcpy).
  bool allLocal() const { return allLocal_; }

  Slot& slot(int r) const { return *reinterpret_cast<Slot*>(base_ + slotOffset(r)); }
  /// Rank r's inline data for phase `phase` (after the tag: 16-byte aligned).
  char* inlineData(int r, uint64_t phase) const { return area(r, phase) + sizeof(CallTag); }
  /// The phase every rank must have reached before this rank publishes its next one.
  uint64_t safePhase() const {
    return phase_ + 2 > kInlineAreas ? phase_ + 2 - kInlineAreas : 0;
  }
  /// The last phase this rank published, and the next one.
  uint64_t phase() const { return phase_; }
  uint64_t nextPhase() const { return phase_ + 1; }
  /// Publishes the next phase, for call `tag` (after the inline data and addresses
  /// were written).
  uint64_t publish(const CallTag& tag) {
    ++phase_;
    *reinterpret_cast<CallTag*>(area(rank_, phase_)) = tag;
    slot(rank_).phase.store(phase_, std::memory_order_release);
    wakeOthers();
    return phase_;
  }
  /// Rank r's wake word (it sleeps on it; peers ring it).
  WakeWord& wake(int r) const {
    return *reinterpret_cast<WakeWord*>(base_ + wakeOffset_ + size_t(r) * sizeof(WakeWord));
  }
  /// Rings every other rank's wake word (after publishing something they may wait for).
  void wakeOthers() const {
    wakeFence();  // one fence for all the rings
    for (int r = 0; r < nranks_; ++r)
      if (r != rank_) wakeRingFenced(&wake(r));
  }
  /// The tag rank r published with `phase` (valid once it reached `phase`, until every
  /// rank did: board_run.h).
  const CallTag& tag(int r, uint64_t phase) const {
    return *reinterpret_cast<const CallTag*>(area(r, phase));
  }
  /// Whether every rank has published `phase`; otherwise *lagging is one that has not.
  /// A rank that failed: returns false with *failedRank set.
  bool allReached(uint64_t phase, int* lagging, int* failedRank) const;
  /// Whether rank r has published `phase` (*failedRank = r if it failed instead).
  bool reached(int r, uint64_t phase, int* failedRank) const {
    const Slot& s = slot(r);
    if (s.phase.load(std::memory_order_acquire) >= phase) return true;
    if (s.failed.load(std::memory_order_relaxed) != 0) *failedRank = r;
    return false;
  }
  /// Tells the other ranks this one failed (they stop waiting for it).
  void markFailed(ncclResult_t code);
  /// Whether rank r still runs (same-machine pid check); *why says otherwise.
  bool peerAlive(int r, std::string* why) const;

  /// Whether rank r shares this address space (its addresses can be dereferenced).
  bool local(int r) const { return pids_[size_t(r)] == 0; }
  /// Copies n bytes at rank r's address `remote` into dst. Returns 0 or an errno.
  int read(int r, void* dst, uint64_t remote, uint64_t n) const;
  /// Copies n bytes from src to rank r's address `remote`. Returns 0 or an errno.
  int write(int r, uint64_t remote, const void* src, uint64_t n) const;

 private:
  Board() = default;
  size_t slotOffset(int r) const { return size_t(r) * slotBytes_; }
  char* area(int r, uint64_t phase) const {
    return base_ + slotOffset(r) + kAreasOffset + (phase % kInlineAreas) * areaBytes_;
  }
  static constexpr size_t kAreasOffset = sizeof(Slot);

  char* base_ = nullptr;
  std::string name_;  ///< the segment's name (ranks of one process share its mapping)
  size_t bytes_ = 0;
  size_t slotBytes_ = 0;
  size_t wakeOffset_ = 0;  ///< where the wake words start (after the slots)
  int nranks_ = 0, rank_ = 0;
  uint64_t inlineBytes_ = 0, copyMaxBytes_ = 0;
  size_t areaBytes_ = 0;  ///< a tag and inlineBytes_ of data, whole cache lines
  bool singleCopy_ = false;
  bool allLocal_ = true;
  uint64_t phase_ = 0;
  std::vector<pid_t> pids_;         ///< 0 for ranks in this process
  std::vector<uint64_t> starts_;    ///< process start times, for liveness checks
};

}  // namespace braid
