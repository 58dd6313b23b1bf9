#include "src/exec/board_peers.h"

#include <cerrno>
#include <vector>

#include "src/exec/board.h"

namespace braid {

std::string boardTagsDiffer(const Board& b, uint64_t phase, const CallTag& mine) {
  // Equal tags: the same call (the common case: one compare per rank).
  const int n = b.nranks();
  int r0 = 0;
  while (r0 < n && b.tag(r0, phase) == mine) ++r0;
  if (r0 == n) return "";
  // Every rank's tag, compared alike on every rank: the message names the ranks on
  // each side and both calls.
  std::vector<CallTag> all(static_cast<size_t>(n));
  bool someUntagged = false;
  for (int r = 0; r < n; ++r) {
    all[size_t(r)] = b.tag(r, phase);
    someUntagged |= !all[size_t(r)].tagged();
  }
  return someUntagged ? "collective mismatch check: the ranks disagree on BRAID_CHECK (some "
                        "ranks check their calls, others have the check off)"
                      : compareCallTags(all.data(), n);
}

void BoardPeers::start(Board* board, const CallTag& tag) {
  b_ = board;
  tag_ = tag;
  base_ = board->phase();
  compared_ = !tag.tagged();
  mismatch_ = false;
}

int BoardPeers::nranks() const { return b_->nranks(); }
int BoardPeers::rank() const { return b_->rank(); }

void BoardPeers::signal(size_t prog, const PlanBuffers& bufs) {
  if (prog != 0) return;  // reached() fails the run
  if (b_->phase() == base_) {  // the first: announce the buffers with it
    Board::Slot& my = b_->slot(b_->rank());
    my.sendAddr = uint64_t(reinterpret_cast<uintptr_t>(bufs.send));
    my.recvAddr = uint64_t(reinterpret_cast<uintptr_t>(bufs.recv));
  }
  b_->publish(tag_);
}

bool BoardPeers::reached(size_t prog, int peer, uint64_t k, int* lagging, std::string* why,
                         ncclResult_t* code) {
  if (prog != 0) {
    *why = "internal error: a direct-access plan with signals in program " +
           std::to_string(prog) + " on the flag board (one sequence of phases)";
    *code = ncclInternalError;
    return false;
  }
  const uint64_t phase = base_ + k;
  int lag = peer, failed = -1;
  const bool ok = peer == kAllPeers ? b_->allReached(phase, &lag, &failed)
                                    : b_->reached(peer, phase, &failed);
  if (!ok) {
    *lagging = lag;
    if (failed >= 0) {
      const bool mism = b_->slot(failed).failed.load(std::memory_order_relaxed) ==
                        uint32_t(ncclInvalidUsage);
      *why = "rank " + std::to_string(failed) +
             (mism ? " found a collective mismatch" : " failed") +
             " while this collective ran on the flag board";
      *code = mism ? ncclInvalidUsage : ncclRemoteError;
    }
    return false;
  }
  // The first phase every rank reached: the calls are compared before anything is read.
  if (!compared_ && peer == kAllPeers && k >= 1) {
    compared_ = true;
    std::string differ = boardTagsDiffer(*b_, base_ + 1, tag_);
    if (!differ.empty()) {
      mismatch_ = true;
      *why = differ;
      *code = ncclInvalidUsage;
      return false;
    }
  }
  return true;
}

uint64_t BoardPeers::address(int p, Buf buf, uint64_t off) const {
  const Board::Slot& s = b_->slot(p);
  const uint64_t base = buf == Buf::kSend ? s.sendAddr : buf == Buf::kRecv ? s.recvAddr : 0;
  return base ? base + off : 0;
}

char* BoardPeers::view(int p, Buf buf, uint64_t off) {
  if (!b_->local(p)) return nullptr;
  return reinterpret_cast<char*>(uintptr_t(address(p, buf, off)));
}

int BoardPeers::read(int p, Buf buf, uint64_t off, void* dst, uint64_t n) {
  const uint64_t at = address(p, buf, off);
  if (at == 0) return EFAULT;
  return b_->read(p, dst, at, n);
}

int BoardPeers::write(int p, Buf buf, uint64_t off, const void* src, uint64_t n) {
  const uint64_t at = buf == Buf::kRecv ? address(p, buf, off) : 0;
  if (at == 0) return EFAULT;
  return b_->write(p, at, src, n);
}

}  // namespace braid
