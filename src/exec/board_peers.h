// BoardPeers: the flag board (src/exec/board.h) as the direct access a plan's
// kSignal .. kPeerPut steps need (algorithms/plan.h), so that the board's collectives
// larger than its inline areas run as plans (algorithms/*/peer_read.cc, two_shot.cc) on
// the host engine. A signal is a board phase: the first of a run also writes this
// rank's buffer addresses into its slot, and every phase carries the call's tag. The
// first phase every rank reached is where the tags are compared, before anything is
// read: a mismatch fails the run alike on every rank with nothing moved. Peers' bytes
// are read (and written) in place within one process and with process_vm_readv
// (process_vm_writev) between processes. A board is one sequence of phases: it serves
// plans whose direct-access steps are all in program 0.
#pragma once
#include <cstdint>
#include <string>

#include "src/exec/call_tag.h"
#include "src/exec/engine.h"

namespace braid {

class Board;

/// "" when every rank published `phase` with `mine`'s tag; otherwise why not (the
/// ranks on each side and both calls, or the ranks that disagree on BRAID_CHECK),
/// computed alike on every rank.
std::string boardTagsDiffer(const Board& b, uint64_t phase, const CallTag& mine);

class BoardPeers : public ConnTable, public PeerAccess {
 public:
  /// A run of one call on `board` from its current phase; tag: the call's (untagged
  /// when the check is off: nothing is compared).
  void start(Board* board, const CallTag& tag);

  // ConnTable: no connections, only direct access.
  FifoSender* sender(int, int) override { return nullptr; }
  FifoReceiver* receiver(int, int) override { return nullptr; }
  PeerAccess* peerAccess() override { return this; }

  // PeerAccess
  int nranks() const override;
  int rank() const override;
  void signal(size_t prog, const PlanBuffers& bufs) override;
  bool reached(size_t prog, int peer, uint64_t k, int* lagging, std::string* why,
               ncclResult_t* code) override;
  char* view(int p, Buf buf, uint64_t off) override;
  int read(int p, Buf buf, uint64_t off, void* dst, uint64_t n) override;
  int write(int p, Buf buf, uint64_t off, const void* src, uint64_t n) override;

  /// The run failed on a mismatch this rank found comparing the tags (not a peer's).
  bool mismatchFound() const { return mismatch_; }

 private:
  /// Rank p's address of byte `off` of `buf` (0: not a buffer peers can see).
  uint64_t address(int p, Buf buf, uint64_t off) const;

  Board* b_ = nullptr;
  CallTag tag_;
  uint64_t base_ = 0;      ///< the board's phase when the run started
  bool compared_ = false;  ///< the tags of the first phase were compared
  bool mismatch_ = false;
};

}  // namespace braid
