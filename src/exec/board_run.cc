#include "src/exec/board_run.h"

#include <cstring>
#include <vector>

#include "src/core/comm.h"
#include "src/exec/board.h"

namespace braid {
namespace {

/// Elements are reduced in blocks of this many bytes (read from another process into
/// a bounce buffer first), so the sources and the partial result stay in cache.
constexpr uint64_t kBlockBytes = 32 << 10;

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

/// Bytes one rank contributes (what an inline phase must hold).
uint64_t partBytes(Coll c, uint64_t bytes, int n) {
  switch (c) {
    case Coll::kReduceScatter: case Coll::kAllToAll: case Coll::kScatter: return bytes * uint64_t(n);
    default: return bytes;
  }
}

/// Bytes of the larger buffer.
uint64_t bufferBytes(Coll c, uint64_t bytes, int n) {
  switch (c) {
    case Coll::kAllReduce: case Coll::kBroadcast: case Coll::kReduce: return bytes;
    default: return bytes * uint64_t(n);
  }
}

struct Bounce {
  std::vector<char> a, b, acc;
};
Bounce& bounce() {
  thread_local Bounce b;
  return b;
}

}  // namespace

BoardPath chooseBoardPath(const Comm* comm, const OpRecord& op) {
  const Board* b = comm->board.get();
  if (!b || op.mem != MemKind::kHost || op.rma != 0 || op.coll == Coll::kSendRecv) return BoardPath::kNone;
  // PreMulSum scales each rank's own input by its own scalar: the plans do that.
  if (reduces(op.coll) && int(op.op) >= int(ncclNumOps)) return BoardPath::kNone;
  const uint64_t bytes = uint64_t(op.count) * dataTypeSize(op.type);
  if (partBytes(op.coll, bytes, b->nranks()) <= b->inlineBytes()) return BoardPath::kInline;
  // Reduce reads every input at the root: between processes the pipelined plans win.
  if (op.coll == Coll::kReduce && !b->allLocal()) return BoardPath::kNone;
  if (bufferBytes(op.coll, bytes, b->nranks()) <= b->copyMaxBytes()) return BoardPath::kCopy;
  return BoardPath::kNone;
}

const char* boardPathName(BoardPath p) {
  switch (p) {
    case BoardPath::kInline: return "board-inline";
    case BoardPath::kCopy: return "board-copy";
    case BoardPath::kCheck: return "board-check";
    default: return "none";
  }
}

void BoardRun::start(Comm* comm, const OpRecord& op, BoardPath path, const CallTag& tag) {
  b_ = comm->board.get();
  op_ = &op;
  tag_ = tag;
  // PreMulSum never runs on the board (only its check phase): no reducer for it.
  const bool userOp = int(op.op) >= int(ncclNumOps);
  red_ = Reducer(op.type, reduces(op.coll) && !userOp ? op.op : ncclSum, comm->nranks);
  path_ = path;
  stage_ = 0;
  runAhead_ = !tag.tagged();
  // Checked collectives are barriers: nobody is ever more than a phase ahead. Unchecked
  // ones first make sure everyone is far enough (rooted collectives return without
  // waiting for all) that this run's phases overwrite no inline area someone still reads.
  target_ = runAhead_ ? b_->safePhase() : 0;
  waiting_ = target_ > 0;
  waitRank_ = -1;
  lagging_ = -1;
  stagedResult_ = false;
  mismatch_ = false;
  failedCode_ = ncclRemoteError;
  state_ = RunState::kRunning;
  error_.clear();
}

bool BoardRun::tagsAgree() {
  // Equal tags: the same call (the common case: one compare per rank, in the line the
  // data of small messages shares).
  const int n = b_->nranks();
  int r0 = 0;
  while (r0 < n && b_->tag(r0, target_) == tag_) ++r0;
  if (r0 == n) return true;
  // Every rank's tag, compared alike on every rank: the message names the ranks on
  // each side and both calls.
  std::vector<CallTag> all(static_cast<size_t>(n));
  bool someUntagged = false;
  for (int r = 0; r < n; ++r) {
    all[size_t(r)] = b_->tag(r, target_);
    someUntagged |= !all[size_t(r)].tagged();
  }
  const std::string why =
      someUntagged ? "collective mismatch check: the ranks disagree on BRAID_CHECK (some "
                     "ranks check their calls, others have the check off)"
                   : compareCallTags(all.data(), n);
  fail(why);
  mismatch_ = true;
  return false;
}

void BoardRun::fail(const std::string& why) {
  if (state_ != RunState::kRunning) return;
  state_ = RunState::kError;
  error_ = why;
}

bool BoardRun::progress() {
  bool moved = false;
  while (state_ == RunState::kRunning) {
    if (waiting_) {
      int lag = waitRank_, failed = -1;
      if (waitRank_ >= 0 ? !b_->reached(waitRank_, target_, &failed)
                         : !b_->allReached(target_, &lag, &failed)) {
        lagging_ = lag;
        if (failed >= 0) {
          const bool mism = b_->slot(failed).failed.load(std::memory_order_relaxed) ==
                            uint32_t(ncclInvalidUsage);
          fail("rank " + std::to_string(failed) +
               (mism ? " found a collective mismatch" : " failed") +
               " while this collective ran on the flag board");
          failedCode_ = mism ? ncclInvalidUsage : ncclRemoteError;
        }
        return moved;
      }
      waiting_ = false;
    }
    runStage();
    moved = true;
  }
  return moved;
}

void BoardRun::publishAndWait() {
  target_ = b_->publish(tag_);
  waitRank_ = -1;
  waiting_ = true;
  ++stage_;
}

std::string BoardRun::describeWait() const {
  return "wait for rank " + std::to_string(lagging_) + " on the flag board (" +
         boardPathName(path_) + " " + collName(op_->coll) + ", phase " + std::to_string(target_) +
         ")";
}

bool BoardRun::readFrom(int r, void* dst, uint64_t remote, uint64_t n) {
  if (n == 0) return true;
  const int e = b_->read(r, dst, remote, n);
  if (e == 0) return true;
  fail("reading " + std::to_string(n) + " bytes from rank " + std::to_string(r) +
       " (process_vm_readv) failed: " + std::strerror(e));
  return false;
}

bool BoardRun::reduceFromAll(char* dst, uint64_t off, uint64_t elems) {
  const int n = b_->nranks(), me = b_->rank();
  const uint64_t ts = red_.typeSize(), blk = kBlockBytes / ts;
  const uint8_t post = kPostOp;
  Bounce& bb = bounce();
  if (bb.a.size() < kBlockBytes) {
    bb.a.resize(kBlockBytes);
    bb.b.resize(kBlockBytes);
    bb.acc.resize(kBlockBytes);
  }
  for (uint64_t e = 0; e < elems; e += blk) {
    const uint64_t k = std::min(blk, elems - e), at = off + e * ts;
    // Rank p's elements of this block: in place where we can see them, else pulled.
    auto src = [&](int p, char* into) -> const char* {
      if (p == me) return static_cast<const char*>(op_->sendbuff) + at;
      const uint64_t remote = b_->slot(p).sendAddr + at;
      if (b_->local(p)) return reinterpret_cast<const char*>(uintptr_t(remote));
      return readFrom(p, into, remote, k * ts) ? into : nullptr;
    };
    char* out = dst + e * ts;
    const char* s0 = src(0, bb.a.data());
    const char* s1 = s0 ? src(1, bb.b.data()) : nullptr;
    if (!s1) return false;
    if (n == 2) {
      red_.reduce(out, s1, s0, k, post);
      continue;
    }
    red_.reduce(bb.acc.data(), s1, s0, k, 0);
    for (int p = 2; p < n; ++p) {
      const char* sp = src(p, bb.b.data());
      if (!sp) return false;
      red_.reduce(p == n - 1 ? out : bb.acc.data(), sp, bb.acc.data(), k, p == n - 1 ? post : 0);
    }
  }
  return true;
}

void BoardRun::inlineResult() {
  const int n = b_->nranks(), me = b_->rank();
  const uint64_t ts = red_.typeSize(), S = uint64_t(op_->count) * ts;
  auto d = [&](int p) -> const char* { return b_->inlineData(p, target_); };
  char* recv = static_cast<char*>(op_->recvbuff);
  auto reduceAll = [&](uint64_t off) {
    red_.reduce(recv, d(1) + off, d(0) + off, op_->count, n == 2 ? kPostOp : 0);
    for (int p = 2; p < n; ++p)
      red_.reduce(recv, d(p) + off, recv, op_->count, p == n - 1 ? kPostOp : 0);
  };
  switch (op_->coll) {
    case Coll::kAllReduce: reduceAll(0); break;
    case Coll::kReduce: if (me == op_->root) reduceAll(0); break;
    case Coll::kReduceScatter: reduceAll(uint64_t(me) * S); break;
    case Coll::kBroadcast:
      if (recv != d(op_->root)) std::memcpy(recv, d(op_->root), S);
      break;
    case Coll::kScatter: std::memcpy(recv, d(op_->root) + uint64_t(me) * S, S); break;
    case Coll::kGather:
      if (me != op_->root) break;
      [[fallthrough]];
    case Coll::kAllGather:
      for (int p = 0; p < n; ++p) std::memcpy(recv + uint64_t(p) * S, d(p), S);
      break;
    case Coll::kAllToAll:
      for (int p = 0; p < n; ++p) std::memcpy(recv + uint64_t(p) * S, d(p) + uint64_t(me) * S, S);
      break;
    default: fail("internal error: no board path for this collective"); return;
  }
  state_ = RunState::kDone;
}

void BoardRun::writeInlinePart() {
  const int me = b_->rank();
  // Only the root's part counts where it alone contributes.
  if ((op_->coll == Coll::kBroadcast || op_->coll == Coll::kScatter) && me != op_->root) return;
  const bool perRank = op_->coll == Coll::kScatter || op_->coll == Coll::kReduceScatter ||
                       op_->coll == Coll::kAllToAll;
  const uint64_t bytes = uint64_t(op_->count) * red_.typeSize() *
                         (perRank ? uint64_t(b_->nranks()) : 1);
  std::memcpy(b_->inlineData(me, b_->nextPhase()), op_->sendbuff, bytes);
}

void BoardRun::runAheadInline() {
  const bool root = b_->rank() == op_->root;
  // Only the root contributes / only the root needs the result.
  const bool fromRoot = op_->coll == Coll::kBroadcast || op_->coll == Coll::kScatter;
  const bool toRoot = op_->coll == Coll::kReduce || op_->coll == Coll::kGather;
  if (stage_ == 1) {
    inlineResult();
    if (fromRoot && !root && state_ == RunState::kDone) b_->publish(tag_);  // done reading
    return;
  }
  if (fromRoot && !root) {  // wait for the root's part only, read it, then publish
    target_ = b_->nextPhase();
    waitRank_ = op_->root;
    waiting_ = true;
    stage_ = 1;
    return;
  }
  writeInlinePart();
  if ((fromRoot && root) || (toRoot && !root)) {  // nothing to wait for
    target_ = b_->publish(tag_);
    return inlineResult();
  }
  publishAndWait();
}

void BoardRun::runStage() {
  const int n = b_->nranks(), me = b_->rank();
  const uint64_t ts = red_.typeSize(), S = uint64_t(op_->count) * ts;
  const char* send = static_cast<const char*>(op_->sendbuff);
  char* recv = static_cast<char*>(op_->recvbuff);
  // Every path's first phase is published with the call's tag: compare before using
  // anything another rank wrote (the check on; then every phase is a barrier).
  if (stage_ == 1 && !runAhead_ && !tagsAgree()) return;
  if (path_ == BoardPath::kCheck) {
    if (stage_ == 0) return publishAndWait();
    state_ = RunState::kDone;
    return;
  }
  if (path_ == BoardPath::kInline && runAhead_) return runAheadInline();
  if (path_ == BoardPath::kInline) {
    if (stage_ == 1) return inlineResult();
    writeInlinePart();
    return publishAndWait();
  }
  // Single copy.
  Board::Slot& my = b_->slot(me);
  auto peerSend = [&](int p) { return b_->slot(p).sendAddr; };
  switch (stage_) {
    case 0:
      my.sendAddr = uint64_t(reinterpret_cast<uintptr_t>(send));
      my.recvAddr = uint64_t(reinterpret_cast<uintptr_t>(recv));
      return publishAndWait();
    case 1:
      switch (op_->coll) {
        case Coll::kAllReduce: {
          const uint64_t lo = op_->count * uint64_t(me) / uint64_t(n);
          const uint64_t hi = op_->count * uint64_t(me + 1) / uint64_t(n);
          if (!reduceFromAll(recv + lo * ts, lo * ts, hi - lo)) return;
          break;
        }
        case Coll::kReduce:
          if (me == op_->root && !reduceFromAll(recv, 0, op_->count)) return;
          break;
        case Coll::kReduceScatter:
          if (!reduceFromAll(recv, uint64_t(me) * S, op_->count)) return;
          break;
        case Coll::kBroadcast:
          if (me != op_->root) {
            if (!readFrom(op_->root, recv, peerSend(op_->root), S)) return;
          } else if (recv != send) {
            std::memcpy(recv, send, S);
          }
          break;
        case Coll::kScatter:
          if (me != op_->root) {
            if (!readFrom(op_->root, recv, peerSend(op_->root) + uint64_t(me) * S, S)) return;
          } else if (recv != send + uint64_t(me) * S) {
            std::memcpy(recv, send + uint64_t(me) * S, S);
          }
          break;
        case Coll::kGather:
          if (me != op_->root) break;
          [[fallthrough]];
        case Coll::kAllGather:
          for (int p = 0; p < n; ++p) {
            char* dst = recv + uint64_t(p) * S;
            if (p == me) {
              if (dst != send) std::memcpy(dst, send, S);
            } else if (!readFrom(p, dst, peerSend(p), S)) {
              return;
            }
          }
          break;
        case Coll::kAllToAll: {
          // In place, peers still read our buffer: results wait in a scratch buffer
          // until everyone is done.
          stagedResult_ = send < recv + S * uint64_t(n) && recv < send + S * uint64_t(n);
          char* out = recv;
          if (stagedResult_) {
            if (staged_.size() < S * uint64_t(n)) staged_.resize(S * uint64_t(n));
            out = staged_.data();
          }
          for (int p = 0; p < n; ++p) {
            char* dst = out + uint64_t(p) * S;
            if (p == me) {
              if (dst != send + uint64_t(me) * S) std::memcpy(dst, send + uint64_t(me) * S, S);
            } else if (!readFrom(p, dst, peerSend(p) + uint64_t(me) * S, S)) {
              return;
            }
          }
          break;
        }
        default: return fail("internal error: no board path for this collective");
      }
      return publishAndWait();
    case 2:
      if (op_->coll == Coll::kAllReduce) {
        // Every chunk is final at its owner: copy the others' chunks.
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          const uint64_t lo = op_->count * uint64_t(p) / uint64_t(n);
          const uint64_t hi = op_->count * uint64_t(p + 1) / uint64_t(n);
          if (!readFrom(p, recv + lo * ts, b_->slot(p).recvAddr + lo * ts, (hi - lo) * ts)) return;
        }
        return publishAndWait();
      }
      if (stagedResult_) {
        for (int p = 0; p < n; ++p)
          if (p != me) std::memcpy(recv + uint64_t(p) * S, staged_.data() + uint64_t(p) * S, S);
        std::vector<char>().swap(staged_);  // rare (in-place all-to-all): do not keep it
      }
      state_ = RunState::kDone;
      return;
    default:  // after the all-reduce's last phase
      state_ = RunState::kDone;
      return;
  }
}

}  // namespace braid
