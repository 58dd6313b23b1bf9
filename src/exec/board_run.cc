#include "src/exec/board_run.h"

#include <cstring>
#include <vector>

#include "algorithms/registry.h"
#include "src/core/comm.h"
#include "src/exec/batch.h"
#include "src/exec/board.h"

namespace braid {
namespace {

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
  comm_ = comm;
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
  // Measured when the run begins (progress), not here: a group starts every op's run
  // before the first has published anything.
  safeWaitPending_ = runAhead_;
  target_ = 0;
  waiting_ = false;
  waitRank_ = -1;
  lagging_ = -1;
  planStarted_ = false;
  mismatch_ = false;
  failedCode_ = ncclRemoteError;
  state_ = RunState::kRunning;
  error_.clear();
}

bool BoardRun::tagsAgree() {
  const std::string why = boardTagsDiffer(*b_, target_, tag_);
  if (why.empty()) return true;
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
    if (safeWaitPending_) {
      safeWaitPending_ = false;
      target_ = b_->safePhase();
      waiting_ = target_ > 0;
    }
    if (planStarted_) return progressPlan() || moved;
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
  if (planStarted_)
    return std::string("flag board ") + boardPathName(path_) + " " + collName(op_->coll) + ": " +
           run_.describeWait();
  return "wait for rank " + std::to_string(lagging_) + " on the flag board (" +
         boardPathName(path_) + " " + collName(op_->coll) + ", phase " + std::to_string(target_) +
         ")";
}

void BoardRun::startPlan() {
  // PreMulSum scales each rank's input by its own scalar: never on the board
  // (chooseBoardPath), and a direct-access reduction could not apply it.
  if (reduces(op_->coll) && int(op_->op) >= int(ncclNumOps))
    return fail("internal error: PreMulSum on the flag board's single copy");
  PlanArgs args = planArgsFor(comm_, *op_);
  args.peerAccess = true;
  const bool same = plan_ && args.coll == planKey_.coll && args.nranks == planKey_.nranks &&
                    args.rank == planKey_.rank && args.count == planKey_.count &&
                    args.typeSize == planKey_.typeSize && args.root == planKey_.root &&
                    args.inPlace == planKey_.inPlace;
  if (!same) {
    const Algorithm* algo = peerAccessAlgorithm(args.coll);
    auto plan = std::make_unique<Plan>();
    if (!algo || !algo->build(args, PlanParams(), plan.get())) {
      plan_.reset();
      return fail(std::string("internal error: no direct-access plan for ") + collName(args.coll));
    }
    plan->algorithm = algo->name;
    plan_ = std::move(plan);
    planKey_ = args;
  }
  PlanBuffers bufs;
  bufs.send = op_->sendbuff;
  bufs.recv = op_->recvbuff;
  if (plan_->scratchElems) {
    scratch_.resize(size_t(plan_->scratchElems * args.typeSize));
    bufs.scratch = scratch_.data();
  }
  if (!peers_) peers_ = std::make_unique<BoardPeers>();
  peers_->start(b_, tag_);
  run_.start(plan_.get(), bufs, red_, peers_.get(), /*allowDirect=*/false);
  planStarted_ = true;
}

bool BoardRun::progressPlan() {
  const bool moved = run_.progress();
  if (run_.state() == RunState::kDone) {
    state_ = RunState::kDone;
    // Rare (in-place all-to-all) and as large as the message: not kept.
    if (!scratch_.empty()) std::vector<char>().swap(scratch_);
  } else if (run_.state() == RunState::kError) {
    fail(run_.error());
    mismatch_ = peers_->mismatchFound();
    failedCode_ = run_.errorCode();
  }
  return moved;
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
  // Single copy: a plan, which compares the tags at its first barrier itself.
  if (path_ == BoardPath::kCopy) return startPlan();
  // Every path's first phase is published with the call's tag: compare before using
  // anything another rank wrote (the check on; then every phase is a barrier).
  if (stage_ == 1 && !runAhead_ && !tagsAgree()) return;
  if (path_ == BoardPath::kCheck) {
    if (stage_ == 0) return publishAndWait();
    state_ = RunState::kDone;
    return;
  }
  if (path_ == BoardPath::kInline && runAhead_) return runAheadInline();
  if (stage_ == 1) return inlineResult();
  writeInlinePart();
  publishAndWait();
}

}  // namespace braid
