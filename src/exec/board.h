// Board: a communicator's shared flag board, for ranks that all live on one machine.
//
// One shared-memory segment per communicator (made at init, when every rank is on the
// same host), with one slot per rank. A slot has a phase counter and a failure word in
// one cache line, the addresses of the rank's current buffers next to them, and
// kInlineAreas inline data areas (phase t uses area t mod kInlineAreas). Collectives
// that run on the board (src/exec/board_run.h) are sequences of phases: a rank writes what it
// contributes (inline data or buffer addresses), publishes the next phase with the tag
// of its call (src/exec/call_tag.h), and waits until every rank has published it. Between
// phases it reads the others' inline data or, for larger messages, their buffers
// directly: memcpy within one process, process_vm_readv between processes (single copy;
// probed at init, used only where every pair may read each other).
//
// Every collective on a communicator with a board publishes a phase when it starts,
// also those that then run as plans (a check phase), and compares every rank's tag
// before anyone reads or reduces: a rank that called another collective, count, type,
// op or root is found by every rank at the same phase, before any data moved.
//
// Why the inline areas and tags need no acknowledgement: every phase is a barrier (a
// rank waits for every rank to publish phase t before it writes anything for t+1), so
// no rank is ever more than one phase ahead of another. A rank writes area and tag
// t+1 mod 2 only after every rank published t, that is, after every rank finished
// reading what was published at t-1 (the same area and tag).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/exec/call_tag.h"

namespace braid {

struct Comm;

class Board {
 public:
  /// Inline areas per rank (phase t uses area t mod 2: see above).
  static constexpr uint64_t kInlineAreas = 2;
  /// One rank's slot header (one cache line: what a waiting rank polls holds the tags).
  struct alignas(64) Slot {
    std::atomic<uint64_t> phase;   ///< the last phase this rank published
    std::atomic<uint32_t> failed;  ///< nonzero: this rank failed (its ncclResult_t)
    uint32_t pad;
    uint64_t sendAddr;  ///< this rank's buffers in its own address space, written
    uint64_t recvAddr;  ///< before the phase that announces them
    CallTag tags[2];    ///< the call of phase t in tags[t % 2], written before it
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

  /// Bytes of a rank's check area: a group's collectives (a CollFingerprint) for the
  /// group check phase (board_run.h), two of them (phase t uses t mod 2, as the tags).
  static constexpr size_t kCheckAreaBytes = 128;

  Slot& slot(int r) const { return *reinterpret_cast<Slot*>(base_ + slotOffset(r)); }
  /// Rank r's check area for phase `phase`.
  char* checkArea(int r, uint64_t phase) const {
    return base_ + slotOffset(r) + sizeof(Slot) + (phase % 2) * kCheckAreaBytes;
  }
  /// Rank r's inline area for phase `phase`.
  char* inlineData(int r, uint64_t phase) const {
    return base_ + slotOffset(r) + kAreasOffset + (phase % kInlineAreas) * inlineBytes_;
  }
  /// The last phase this rank published, and the next one.
  uint64_t phase() const { return phase_; }
  uint64_t nextPhase() const { return phase_ + 1; }
  /// Publishes the next phase, for call `tag` (after the inline data and addresses
  /// were written).
  uint64_t publish(const CallTag& tag) {
    Slot& s = slot(rank_);
    ++phase_;
    s.tags[phase_ % 2] = tag;
    s.phase.store(phase_, std::memory_order_release);
    return phase_;
  }
  /// The tag rank r published with `phase` (valid once every rank reached `phase`,
  /// until this rank publishes the next one).
  const CallTag& tag(int r, uint64_t phase) const { return slot(r).tags[phase % 2]; }
  /// Whether every rank has published `phase`; otherwise *lagging is one that has not.
  /// A rank that failed: returns false with *failedRank set.
  bool allReached(uint64_t phase, int* lagging, int* failedRank) const;
  /// Tells the other ranks this one failed (they stop waiting for it).
  void markFailed(ncclResult_t code);
  /// Whether rank r still runs (same-machine pid check); *why says otherwise.
  bool peerAlive(int r, std::string* why) const;

  /// Whether rank r shares this address space (its addresses can be dereferenced).
  bool local(int r) const { return pids_[size_t(r)] == 0; }
  /// Copies n bytes at rank r's address `remote` into dst. Returns 0 or an errno.
  int read(int r, void* dst, uint64_t remote, uint64_t n) const;

 private:
  Board() = default;
  size_t slotOffset(int r) const { return size_t(r) * slotBytes_; }
  static constexpr size_t kAreasOffset = sizeof(Slot) + 2 * kCheckAreaBytes;

  char* base_ = nullptr;
  std::string name_;  ///< the segment's name (ranks of one process share its mapping)
  size_t bytes_ = 0;
  size_t slotBytes_ = 0;
  int nranks_ = 0, rank_ = 0;
  uint64_t inlineBytes_ = 0, copyMaxBytes_ = 0;
  bool singleCopy_ = false;
  bool allLocal_ = true;
  uint64_t phase_ = 0;
  std::vector<pid_t> pids_;         ///< 0 for ranks in this process
  std::vector<uint64_t> starts_;    ///< process start times, for liveness checks
};

}  // namespace braid
