#include "src/exec/batch.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/tuner.h"
#include "src/device/cuda_executor.h"
#include "src/diag/fingerprint.h"
#include "src/diag/flight_recorder.h"
#include "src/exec/board.h"
#include "src/exec/board_run.h"
#include "src/exec/call_tag.h"
#include "src/exec/connect.h"
#include "src/exec/engine.h"
#include "src/exec/progress_assist.h"
#include "src/exec/stall.h"
#include "src/reduce/reducer.h"
#include "src/rma/rma.h"

namespace braid {
namespace {

struct Task {
  OpRecord op;
  uint64_t opIndex = 0;
  std::shared_ptr<const Plan> plan;
  Reducer red;
  PlanRun run;
  /// Collectives on the flag board (plan is null then) run here instead, and so do the
  /// check phases of plan collectives on board comms (kCheck: a stage before the
  /// collective's, see buildWorks).
  BoardRun board;
  BoardPath boardPath = BoardPath::kNone;
  bool onBoard() const { return boardPath != BoardPath::kNone; }
  bool progress() { return onBoard() ? board.progress() : run.progress(); }
  RunState state() const { return onBoard() ? board.state() : run.state(); }
  const std::string& error() const { return onBoard() ? board.error() : run.error(); }
  /// What the error is: a mismatch found alike on every rank of a board (the comm stays
  /// usable), one found on data from a peer or reported by it (the comm failed), or
  /// another failure.
  ncclResult_t errorCode() const { return onBoard() ? board.errorCode() : run.errorCode(); }
  bool boardMismatch() const { return onBoard() && board.mismatch(); }
  bool foundMismatch() const { return !onBoard() && run.foundMismatch(); }
  int waitingOn() const { return onBoard() ? board.waitingOn() : run.waitingOn(); }
  std::string describeWait() const { return onBoard() ? board.describeWait() : run.describeWait(); }
  const char* algorithm() const {
    return onBoard() ? boardPathName(boardPath) : plan->algorithm.c_str();
  }
  /// The plan's Buf::kScratch working memory (kept across reuses of this Task).
  std::vector<uint64_t> scratch;
  Task* nextInLane = nullptr;
};

/// Tasks that run one after another (a collective, or one peer+direction of p2p), as
/// a list through Task::nextInLane.
struct Lane {
  Task* cur = nullptr;
  Task* tail = nullptr;
  bool isSend = false;
  int peer = -1;
};

/// Lanes [firstLane, firstLane + nLanes) of the scratch, run concurrently.
struct Stage {
  size_t firstLane = 0, nLanes = 0;
  bool p2p = false;
  bool board = false;  ///< a collective on the flag board or a check phase (no connections)
};

/// One communicator's part of a batch: stages [firstStage, endStage) of the scratch.
struct CommWork {
  Comm* comm = nullptr;
  size_t firstStage = 0, endStage = 0, stage = 0;
  /// Stages run up to here for now: the board stages before the first that needs a
  /// connection, until the connections are made (runFirstChecks), then to endStage.
  size_t stop = 0;
  bool done = false;
  bool failed = false;
  ncclResult_t code = ncclSuccess;  ///< why it failed
};

/// The executing thread's reusable storage for a batch: flat arrays whose capacity
/// survives from one batch to the next, so the steady state allocates nothing.
struct Scratch {
  std::vector<CommWork> works;
  std::vector<Stage> stages;
  std::vector<Lane> lanes;
  std::deque<Task> tasks;  ///< stable addresses; the first nTasks are in use
  size_t nTasks = 0;
  Connector connector{false};
  std::vector<Comm*> comms;      ///< in first-op order
  std::vector<Comm*> lockOrder;  ///< the batch's comms in address order
  bool busy = false;
  void reset() {
    works.clear();
    stages.clear();
    lanes.clear();
    for (size_t i = 0; i < nTasks; ++i) tasks[i].plan.reset();
    nTasks = 0;
    connector.clear();
    comms.clear();
  }
  Task* newTask() {
    if (nTasks == tasks.size()) tasks.emplace_back();
    Task* t = &tasks[nTasks++];
    t->nextInLane = nullptr;
    return t;
  }
};

/// One per thread; executeBatch does not nest, but a nested use gets its own.
Scratch& threadScratch() {
  thread_local Scratch s;
  return s;
}

size_t bytesOf(size_t count, ncclDataType_t t) { return count * dataTypeSize(t); }

/// Send and receive extents (bytes) of an op, for overlap checks.
void extents(const OpRecord& op, int nranks, size_t* sendBytes, size_t* recvBytes) {
  size_t b = bytesOf(op.count, op.type), n = size_t(nranks);
  switch (op.coll) {
    case Coll::kAllGather: case Coll::kGather: *sendBytes = b; *recvBytes = b * n; break;
    case Coll::kReduceScatter: case Coll::kScatter: *sendBytes = b * n; *recvBytes = b; break;
    case Coll::kAllToAll: *sendBytes = b * n; *recvBytes = b * n; break;
    default: *sendBytes = b; *recvBytes = b; break;
  }
}

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return an && bn && pa < pb + bn && pb < pa + an;
}

Reducer makeReducer(Comm* comm, const OpRecord& op) {
  if (int(op.op) >= int(ncclNumOps)) {
    const UserRedOp& u = op.userOp;  // captured when the call was made
    const void* scalar = u.residence == ncclScalarHostImmediate ? u.immediate : u.ptr;
    return Reducer::preMulSum(op.type, scalar, comm->nranks);
  }
  return Reducer(op.type, op.op, comm->nranks);
}

/// allowBoard: the op may run on the flag board (not for cost estimates: they need a plan).
ncclResult_t makeTask(Comm* comm, const OpRecord& op, Task* t, bool allowBoard = true) {
  t->boardPath = allowBoard ? chooseBoardPath(comm, op) : BoardPath::kNone;
  const CallTag tag = comm->settings.tagCalls ? makeCallTag(op) : CallTag();
  if (t->boardPath != BoardPath::kNone) {
    if (logEnabled(LogLevel::kInfo, kLogTuning))
      logBoardChoice(planArgsFor(comm, op), t->boardPath == BoardPath::kInline ? "inline" : "copy");
    t->op = op;
    t->plan.reset();
    t->board.start(comm, t->op, t->boardPath, tag);
    return ncclSuccess;
  }
  const PlanArgs args = planArgsFor(comm, op);
  BRAID_CHECK(makePlan(comm, args, &t->plan));
  t->op = op;
  t->red = makeReducer(comm, op);
  bool direct = op.coll == Coll::kSendRecv ? op.isSend : !args.inPlace;
  void* scratch = nullptr;
  if (t->plan->scratchElems) {
    const uint64_t bytes = t->plan->scratchElems * args.typeSize;
    if (t->scratch.size() * 8 < bytes) t->scratch.resize(size_t((bytes + 7) / 8));
    scratch = t->scratch.data();
  }
  t->run.start(t->plan.get(), PlanBuffers{op.sendbuff, op.recvbuff, scratch}, t->red, comm,
               direct, tag);
  return ncclSuccess;
}

std::string describeOp(const Task& t) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s (%s, op #%llu, count %zu %s)", t.op.call,
           t.op.comm->who().c_str(), static_cast<unsigned long long>(t.opIndex), t.op.count,
           dataTypeName(t.op.type));
  return buf;
}

/// Fails w's remaining work with `code`. fatal: the communicator fails too (its peers
/// stop waiting); not for a mismatch every rank found alike on the board (nothing
/// moved: the comm stays usable, as after BRAID_CHECK's).
void failWork(CommWork& w, Task* t, ncclResult_t code, const std::string& why,
              const char* reason, bool fatal = true) {
  if (w.failed) return;
  w.failed = true;
  w.done = true;
  w.code = code;
  if (t) setError(code, w.comm, "%s failed: %s", describeOp(*t).c_str(), why.c_str());
  else setError(code, w.comm, "%s: %s", w.comm->who().c_str(), why.c_str());
  if (t && w.comm->recorder) w.comm->recorder->finished(t->op.frSeq, false, why.c_str());
  if (fatal) w.comm->fatal(code, reason);
  else if (w.comm->recorder) w.comm->recorder->dump(reason);
}

/// Fails w for the error of task t: the ops of w that had not finished will not run
/// (their flight-record entries end as failed, with t's error).
void failTask(Scratch& sc, CommWork& w, Task* t) {
  if (w.comm->recorder)
    for (size_t st = w.stage; st < w.endStage; ++st)
      for (size_t l = sc.stages[st].firstLane; l < sc.stages[st].firstLane + sc.stages[st].nLanes; ++l)
        for (Task* o = sc.lanes[l].cur; o; o = o->nextInLane)
          if (o != t) w.comm->recorder->finished(o->op.frSeq, false, t->error().c_str());
  if (t->boardMismatch())
    return failWork(w, t, ncclInvalidUsage, t->error(), "mismatch", /*fatal=*/false);
  failWork(w, t, t->errorCode(), t->error(), t->foundMismatch() ? "mismatch" : "peer");
}

/// Progress the current stage of w; advances stages up to w.stop. Returns whether
/// anything moved.
bool advance(Scratch& sc, CommWork& w) {
  bool moved = false;
  while (w.stage < w.stop) {
    const Stage& st = sc.stages[w.stage];
    bool stageDone = true;
    for (size_t l = st.firstLane; l < st.firstLane + st.nLanes; ++l) {
      Lane& lane = sc.lanes[l];
      while (Task* t = lane.cur) {
        moved |= t->progress();
        if (t->state() == RunState::kError) {
          failTask(sc, w, t);
          return true;
        }
        if (t->state() != RunState::kDone) break;
        if (w.comm->recorder) w.comm->recorder->finished(t->op.frSeq, true);
        lane.cur = t->nextInLane;
        moved = true;
      }
      if (lane.cur) stageDone = false;
    }
    if (!stageDone) return moved;
    ++w.stage;
  }
  if (w.stage == w.endStage) w.done = true;
  return true;
}

/// Whether the progress loop has nothing (more) to do for w now.
bool idleWork(const CommWork& w) { return w.done || w.stage >= w.stop; }

/// The unfinished tasks of w's current stage (for messages and peer checks).
std::vector<Task*> runningTasks(Scratch& sc, CommWork& w) {
  std::vector<Task*> out;
  if (w.stage >= w.endStage) return out;
  const Stage& st = sc.stages[w.stage];
  for (size_t l = st.firstLane; l < st.firstLane + st.nLanes; ++l)
    if (sc.lanes[l].cur) out.push_back(sc.lanes[l].cur);
  return out;
}

void checkStalled(Scratch& sc, CommWork& w, bool timedOut, int64_t stalledMs) {
  for (Task* t : runningTasks(sc, w)) {
    int peer = t->waitingOn();
    std::string why;
    const bool gone = t->onBoard()
                          ? peer >= 0 && !w.comm->board->peerAlive(peer, &why)
                          : (peer >= 0 || peer == kSwitchPeer) &&
                                w.comm->checkPeer(peer, &why) != ncclSuccess;
    if (gone) {
      failWork(w, t, ncclRemoteError, why, "peer");
      return;
    }
    if (w.comm->recorder && (peer >= 0 || peer == kSwitchPeer))
      w.comm->recorder->waiting(t->op.frSeq, peer, t->describeWait());
    if (timedOut) {
      failWork(w, t, ncclSystemError,
               "no progress for " + std::to_string(stalledMs) + " ms (BRAID_TIMEOUT_MS): " +
                   t->describeWait(),
               "timeout");
      return;
    }
  }
}

ncclResult_t runAll(Scratch& sc) {
  std::vector<CommWork>& works = sc.works;
  Stall stall(works.front().comm->settings);
  for (const CommWork& w : works) stall.wakeOn(w.comm->planWakeWord());
  uint64_t loops = 0;
  const ProgressAssist::Scope assist;  // drive the net proxy's connections while waiting
  stall.setAssist(&assist);           // ...but not while asleep
  for (;;) {
    bool allDone = true, moved = false;
    for (CommWork& w : works) {
      if (idleWork(w)) continue;
      moved |= advance(sc, w);
      if (!idleWork(w)) allDone = false;
    }
    if (allDone) break;
    if ((++loops & 1023) == 0 || !moved) {
      for (CommWork& w : works)
        if (!idleWork(w) && (w.comm->abortFlag.load(std::memory_order_relaxed) ||
                        w.comm->revoked.load(std::memory_order_relaxed))) {
          auto running = runningTasks(sc, w);
          failWork(w, running.empty() ? nullptr : running.front(), ncclInvalidUsage,
                   w.comm->revoked.load() ? "the communicator was revoked"
                                          : "the communicator was aborted",
                   "abort");
        }
    }
    if (moved) {
      stall.moved();
      continue;
    }
    if (assist.help()) continue;  // the network moved: look at the FIFOs again
    bool timedOut = false;
    int64_t stalled = 0;
    if (stall.idle(&timedOut, &stalled))
      for (CommWork& w : works)
        if (!idleWork(w)) checkStalled(sc, w, timedOut, stalled);
  }
  ncclResult_t first = ncclSuccess;
  for (CommWork& w : works)
    if (w.failed && first == ncclSuccess) first = w.code;
  return first;
}

/// Groups ops by communicator (keeping each comm's call order) into stages; builds
/// the tasks into the scratch.
ncclResult_t buildWorks(const std::vector<OpRecord>& ops, Scratch& sc) {
  for (const OpRecord& op : ops)
    if (std::find(sc.comms.begin(), sc.comms.end(), op.comm) == sc.comms.end())
      sc.comms.push_back(op.comm);
  for (Comm* c : sc.comms) {
    CommWork w;
    w.comm = c;
    w.firstStage = w.stage = sc.stages.size();
    bool onlyP2p = true;  // every stage of w so far is sends and receives
    for (const OpRecord& op : ops) {
      if (op.comm != c) continue;
      // A collective that runs as a plan on a comm with a board shows its call there
      // first, in a check phase of its own (board_run.h), so that it is compared with
      // the others' calls like every board collective: a mismatch is found with
      // nothing moved (and, where it comes first, nothing connected: runFirstChecks).
      // One phase per collective, not per group: ranks may group the same calls
      // differently. A check after sends and receives only goes before them (it moves
      // nothing, and they do not use the board): ranks agree on a group's first check
      // whether or not p2p precedes it.
      if (c->board && c->settings.tagCalls && op.coll != Coll::kSendRecv && op.rma == 0 &&
          op.mem == MemKind::kHost && chooseBoardPath(c, op) == BoardPath::kNone) {
        Task* t = sc.newTask();
        t->op = op;
        t->op.frSeq = OpRecord::kNoFrSeq;  // not an op of its own
        t->plan.reset();
        t->boardPath = BoardPath::kCheck;
        t->opIndex = c->opCount;
        t->board.start(c, t->op, BoardPath::kCheck, makeCallTag(op));
        const Stage check{sc.lanes.size(), 1, false, true};
        if (onlyP2p) sc.stages.insert(sc.stages.begin() + std::ptrdiff_t(w.firstStage), check);
        else sc.stages.push_back(check);
        sc.lanes.push_back(Lane{t, t, false, -1});
      }
      Task* t = sc.newTask();
      BRAID_CHECK(makeTask(c, op, t));
      t->opIndex = c->opCount++;
      if (c->recorder) c->recorder->started(op.frSeq, t->algorithm());
      if (t->plan) sc.connector.note(c, *t->plan);
      const bool p2p = op.coll == Coll::kSendRecv;
      if (!p2p || sc.stages.size() == w.firstStage || !sc.stages.back().p2p) {
        sc.stages.push_back(Stage{sc.lanes.size(), 0, p2p, t->onBoard()});
      }
      onlyP2p &= p2p;
      Stage& st = sc.stages.back();
      Lane* lane = nullptr;
      for (size_t l = st.firstLane; p2p && l < st.firstLane + st.nLanes; ++l)
        if (sc.lanes[l].peer == op.root && sc.lanes[l].isSend == op.isSend) lane = &sc.lanes[l];
      if (!lane) {
        sc.lanes.push_back(Lane{nullptr, nullptr, op.isSend, p2p ? op.root : -1});
        ++st.nLanes;
        lane = &sc.lanes.back();
      }
      if (lane->tail) lane->tail->nextInLane = t;
      else lane->cur = t;
      lane->tail = t;
    }
    w.endStage = w.stop = sc.stages.size();
    sc.works.push_back(w);
  }
  return ncclSuccess;
}

/// Before connections are made: for every work with connections to make, runs its
/// stages up to the first that needs one (board collectives and check phases: in
/// particular the check of its first plan collective), so that a mismatched call is
/// found before ranks wait for each other's connections (a comm whose check failed is
/// done and its connections are not made; its peers do not make them either). Later
/// checks run in their turn (a rank waiting for one there would stop a peer that runs
/// the same calls ungrouped). Returns the first failure.
ncclResult_t runFirstChecks(Scratch& sc) {
  bool any = false;
  for (CommWork& w : sc.works) {
    w.stop = w.firstStage;
    if (!sc.connector.pending(w.comm)) continue;
    while (w.stop < w.endStage && sc.stages[w.stop].board) ++w.stop;
    any |= w.stop > w.firstStage;
  }
  if (!any) {
    for (CommWork& w : sc.works) w.stop = w.endStage;
    return ncclSuccess;
  }
  const ncclResult_t r = runAll(sc);
  for (CommWork& w : sc.works) {
    if (w.failed) sc.connector.forget(w.comm);
    w.stop = w.endStage;
  }
  return r;
}

/// BRAID_CHECK: every communicator of `ops` that checks and has collectives in them
/// all-gathers its ranks' fingerprints (on the host, whatever the ops' memory) and
/// compares. The comms whose ranks disagree get the error (the same on every rank) and
/// go into *mismatched; their ops must not run.
ncclResult_t checkCollectives(const std::vector<OpRecord>& ops, Scratch& sc,
                              std::vector<Comm*>* mismatched) {
  struct Check {
    Comm* comm;
    CollFingerprint mine;
    std::vector<CollFingerprint> all;
  };
  std::vector<Check> checks;
  std::vector<const OpRecord*> colls;
  for (const OpRecord& first : ops) {
    Comm* c = first.comm;
    if (!c->settings.check ||
        std::any_of(checks.begin(), checks.end(), [c](const Check& k) { return k.comm == c; }))
      continue;
    colls.clear();
    for (const OpRecord& op : ops)
      if (op.comm == c && op.coll != Coll::kSendRecv) colls.push_back(&op);
    if (colls.empty()) continue;  // sends and receives need not be matched by every rank
    checks.push_back(Check{c, makeFingerprint(colls), {}});
  }
  if (checks.empty()) return ncclSuccess;
  std::vector<OpRecord> exchange;
  for (Check& k : checks) {
    k.all.resize(size_t(k.comm->nranks));
    OpRecord op;
    op.coll = Coll::kAllGather;
    op.call = "the BRAID_CHECK fingerprint exchange";
    op.comm = k.comm;
    op.sendbuff = &k.mine;
    op.recvbuff = k.all.data();
    op.count = sizeof(CollFingerprint);
    op.type = ncclUint8;
    exchange.push_back(op);
  }
  ncclResult_t r = buildWorks(exchange, sc);
  if (r == ncclSuccess) r = runFirstChecks(sc);
  if (r == ncclSuccess) r = sc.connector.connect();
  if (r == ncclSuccess) r = runAll(sc);
  sc.reset();
  if (r != ncclSuccess) {
    // None of the batch's ops will run: every comm's peers must hear of it.
    for (const OpRecord& op : ops)
      if (op.comm->recorder) op.comm->recorder->finished(op.frSeq, false, lastError(op.comm));
    for (const Check& k : checks) k.comm->fatal(r);
    for (const OpRecord& op : ops) op.comm->fatal(r);
    return r;
  }
  for (const Check& k : checks) {
    const std::string why = compareFingerprints(k.all);
    if (why.empty()) continue;
    setError(ncclInvalidUsage, k.comm, "%s: %s", k.comm->who().c_str(), why.c_str());
    if (k.comm->recorder) {
      for (const OpRecord& op : ops)
        if (op.comm == k.comm) k.comm->recorder->finished(op.frSeq, false, why.c_str());
      k.comm->recorder->dump("mismatch");
    }
    mismatched->push_back(k.comm);
  }
  return ncclSuccess;
}

/// The two-sided part of a batch (execution locks held): the BRAID_CHECK comparison,
/// then device ops to the CUDA executor, the rest through the host progress loop.
ncclResult_t runOps(const std::vector<OpRecord>& batchOps, Scratch& sc,
                    std::vector<Comm*>& comms) {
  const std::vector<OpRecord>* checked = &batchOps;
  std::vector<OpRecord> kept;
  ncclResult_t mismatch = ncclSuccess;
  if (std::any_of(comms.begin(), comms.end(), [](const Comm* c) { return c->settings.check; })) {
    std::vector<Comm*> bad;
    BRAID_CHECK(checkCollectives(batchOps, sc, &bad));
    if (!bad.empty()) {
      // Every rank of a mismatched comm drops all of the group's ops on it, alike.
      mismatch = ncclInvalidUsage;
      for (const OpRecord& op : batchOps)
        if (std::find(bad.begin(), bad.end(), op.comm) == bad.end()) kept.push_back(op);
      if (kept.empty()) return mismatch;
      checked = &kept;
    }
  }
  const std::vector<OpRecord>& ops = *checked;
  // Ops on device buffers go to the CUDA executor (enqueued on their streams); the
  // rest run here, to completion.
  const std::vector<OpRecord>* hostOps = &ops;
  std::vector<OpRecord> hostOnly;
  ncclResult_t r = ncclSuccess;
  if (std::any_of(ops.begin(), ops.end(),
                  [](const OpRecord& op) { return op.mem == MemKind::kDevice; })) {
    std::vector<const OpRecord*> devOps;
    for (const OpRecord& op : ops) {
      if (op.mem == MemKind::kDevice) devOps.push_back(&op);
      else hostOnly.push_back(op);
    }
    r = executeDeviceOps(devOps);
    for (const OpRecord* op : devOps)
      if (op->comm->recorder) {
        if (r == ncclSuccess) op->comm->recorder->started(op->frSeq, "", /*launched=*/true);
        else op->comm->recorder->finished(op->frSeq, false, lastError(op->comm));
      }
    if (r != ncclSuccess && !hostOnly.empty())
      for (Comm* c : comms) c->fatal(r);  // the host ops are dropped: tell their peers
    if (r != ncclSuccess || hostOnly.empty()) return r != ncclSuccess ? r : mismatch;
    hostOps = &hostOnly;
  }
  r = buildWorks(*hostOps, sc);
  // First checks fail only their comm's work (the others go on).
  const ncclResult_t firstCheck = r == ncclSuccess ? runFirstChecks(sc) : ncclSuccess;
  if (r == ncclSuccess) r = sc.connector.connect();
  if (r != ncclSuccess) {
    for (const OpRecord& op : *hostOps)
      if (op.comm->recorder) op.comm->recorder->finished(op.frSeq, false, lastError(op.comm));
    for (Comm* c : comms) c->fatal(r);
    return r;
  }
  r = runAll(sc);
  if (firstCheck != ncclSuccess) return firstCheck;
  return r != ncclSuccess ? r : mismatch;
}

}  // namespace

PlanArgs planArgsFor(const Comm* comm, const OpRecord& op) {
  PlanArgs args;
  args.coll = op.coll;
  args.nranks = comm->nranks;
  args.rank = comm->rank;
  args.count = op.count;
  args.typeSize = dataTypeSize(op.type);
  args.root = op.root;
  size_t sb = 0, rb = 0;
  extents(op, comm->nranks, &sb, &rb);
  args.inPlace = overlaps(op.sendbuff, sb, op.recvbuff, rb);
  // All-gather reduces nothing: the switch's presence is enough.
  args.collnet = op.coll == Coll::kAllGather
                     ? comm->collnet != nullptr
                     : (op.coll == Coll::kAllReduce || op.coll == Coll::kReduceScatter) &&
                           comm->collnetSupports(op.type, op.op);
  if (op.coll == Coll::kSendRecv) {
    P2pOp p;
    p.isSend = op.isSend;
    p.peer = op.root;
    p.buf = op.isSend ? Buf::kSend : Buf::kRecv;
    p.count = op.count;
    args.p2p.push_back(p);
  }
  return args;
}

void issueBatch(Batch* batch) {
  // Several comms: one global order (see Comm::takeTicket); each comm's numbering under
  // its own lock (the flag board's fast path takes only that one).
  std::unique_lock<std::mutex> global(issueOrderMutex(), std::defer_lock);
  if (std::any_of(batch->ops.begin(), batch->ops.end(),
                  [&](const OpRecord& o) { return o.comm != batch->ops.front().comm; }))
    global.lock();
  for (OpRecord& op : batch->ops) {
    std::lock_guard<std::mutex> commLock(op.comm->issueMu);
    // Collectives are numbered in issue order (the same on every rank that makes the
    // same calls): BRAID_CHECK compares the numbers, the flight recorder shows them.
    if (op.coll != Coll::kSendRecv && op.rma == 0) op.collSeq = op.comm->collSeqNext++;
    if (op.comm->recorder) op.comm->recorder->queued(&op);
    bool seen = false;
    for (const auto& t : batch->tickets) seen |= t.first == op.comm;
    if (!seen) batch->tickets.emplace_back(op.comm, op.comm->takeTicket());
  }
}

ncclResult_t executeBatch(const Batch& batch) {
  if (batch.ops.empty()) return ncclSuccess;
  // Whatever happens, the work issued after us may run once we return.
  struct EndTurns {
    const Batch& b;
    ~EndTurns() {
      for (const auto& t : b.tickets) t.first->endTurn(t.second);
    }
  } endTurns{batch};
  for (const auto& t : batch.tickets)
    if (!t.first->waitTurn(t.second))
      return setError(ncclInvalidUsage, t.first, "%s: the communicator was %s before its "
                      "queued work could run", t.first->who().c_str(),
                      t.first->revoked.load() ? "revoked" : "aborted");
  Scratch& shared = threadScratch();
  std::unique_ptr<Scratch> nested;  // a nested executeBatch on this thread gets its own
  if (shared.busy) nested = std::make_unique<Scratch>();
  Scratch& sc = nested ? *nested : shared;
  struct Release {  // declared before the locks: runs after they are released
    Scratch& sc;
    ~Release() {
      sc.reset();
      sc.lockOrder.clear();
      sc.busy = false;
    }
  } release{sc};
  sc.reset();
  sc.busy = true;
  // Hold every comm's execution lock (in address order) so ncclCommAbort from another
  // thread waits for us to notice its flag before tearing the comm down.
  std::vector<Comm*>& comms = sc.lockOrder;
  for (const auto& t : batch.tickets) comms.push_back(t.first);
  std::sort(comms.begin(), comms.end());
  struct Unlock {
    std::vector<Comm*>& v;
    size_t n = 0;
    ~Unlock() {
      while (n > 0) v[--n]->execMutex.unlock();
    }
  } unlock{comms};
  for (Comm* c : comms) {
    c->execMutex.lock();
    ++unlock.n;
  }
  for (Comm* c : comms)  // ncclCommAbort may have won the lock between issue and now
    if (c->magic.load() != Comm::kMagic || c->abortFlag.load())
      return setError(ncclInvalidUsage, nullptr,
                      "comm %p was aborted or destroyed while its work was queued",
                      static_cast<void*>(c));

  // One-sided ops (src/rma): puts and signals first (they never wait for a peer), then
  // the two-sided ops, then the waits, so that a wait never holds back work its peers
  // need. Within each part the call order is kept.
  if (std::none_of(batch.ops.begin(), batch.ops.end(),
                   [](const OpRecord& op) { return op.rma != 0; }))
    return runOps(batch.ops, sc, comms);
  std::vector<OpRecord> twoSided;
  std::vector<const OpRecord*> waits;
  for (const OpRecord& op : batch.ops) {
    if (op.rma == 0) twoSided.push_back(op);
    else if (op.rma == uint8_t(RmaKind::kWaitSignal)) waits.push_back(&op);
  }
  ncclResult_t r = ncclSuccess;
  auto runRma = [](const OpRecord& op) {
    FlightRecorder* fr = op.comm->recorder.get();
    if (fr) fr->started(op.frSeq, "rma");
    const ncclResult_t res = rmaExecute(op);
    if (fr) fr->finished(op.frSeq, res == ncclSuccess, res == ncclSuccess ? nullptr : lastError(op.comm));
    return res;
  };
  for (const OpRecord& op : batch.ops)
    if (r == ncclSuccess && op.rma != 0 && op.rma != uint8_t(RmaKind::kWaitSignal))
      r = runRma(op);
  if (r == ncclSuccess && !twoSided.empty()) r = runOps(twoSided, sc, comms);
  else if (r != ncclSuccess && !twoSided.empty())
    for (Comm* c : comms) c->fatal(r);  // the two-sided ops are dropped: tell their peers
  for (const OpRecord* w : waits)
    if (r == ncclSuccess) r = runRma(*w);
  return r;
}

float estimateBatchUs(const std::vector<OpRecord>& ops) {
  // The tuner's prediction for each op's chosen plan (the cost model, algorithms/cost.h).
  // A communicator runs its ops one after another; communicators run side by side (the
  // ranks of one process driving several), so the group takes the slowest one's sum.
  std::vector<std::pair<Comm*, double>> perComm;
  for (const OpRecord& op : ops) {
    if (op.rma != 0) continue;  // one-sided ops have no plan (and no cost model yet)
    Task t;
    {
      // The plan cache is the executing thread's: take its lock.
      std::lock_guard<std::mutex> lock(op.comm->execMutex);
      if (makeTask(op.comm, op, &t, /*allowBoard=*/false) != ncclSuccess) continue;
    }
    auto it = std::find_if(perComm.begin(), perComm.end(),
                           [&](const std::pair<Comm*, double>& p) { return p.first == op.comm; });
    if (it == perComm.end()) it = perComm.insert(perComm.end(), {op.comm, 0.0});
    it->second += t.plan->predictedUs;
  }
  double worst = 0;
  for (const auto& p : perComm) worst = std::max(worst, p.second);
  return float(worst);
}

}  // namespace braid
