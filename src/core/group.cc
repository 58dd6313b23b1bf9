#include "src/core/group.h"

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/host_stream.h"
#include "src/exec/batch.h"

namespace braid {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<OpRecord> ops;
  std::vector<std::function<ncclResult_t()>> inits;
  ncclResult_t error = ncclSuccess;
};
thread_local GroupState tls;

void resetGroup() {
  tls.ops.clear();
  tls.inits.clear();
  tls.error = ncclSuccess;
}

/// Runs the deferred communicator creations concurrently; returns the first error.
ncclResult_t runInits(std::vector<std::function<ncclResult_t()>>& inits) {
  if (inits.empty()) return ncclSuccess;
  if (inits.size() == 1) return inits[0]();
  std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i)
    threads.emplace_back([&, i] { results[i] = inits[i](); });
  for (auto& t : threads) t.join();
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

/// A rank's send to itself and its receive from itself must be in one group (as NCCL):
/// either alone could only wait for the other until the timeout, so an unpaired one is
/// refused before anything runs.
ncclResult_t checkSelfPairs(const std::vector<OpRecord>& ops) {
  for (const OpRecord& op : ops) {
    if (op.coll != Coll::kSendRecv || op.rma != 0 || op.root != op.comm->rank) continue;
    int sends = 0, recvs = 0;
    for (const OpRecord& o : ops)
      if (o.comm == op.comm && o.coll == Coll::kSendRecv && o.rma == 0 && o.root == o.comm->rank)
        ++(o.isSend ? sends : recvs);
    if (sends == recvs) continue;
    return setError(ncclInvalidUsage, op.comm,
                    "%s (%s): %d send(s) to this rank itself but %d receive(s) from itself "
                    "in the group: a rank's send to itself and its receive from itself must "
                    "be in the same group (ncclGroupStart/End), or it would wait forever",
                    sends > recvs ? "ncclSend" : "ncclRecv", op.comm->who().c_str(), sends,
                    recvs);
  }
  return ncclSuccess;
}

/// Hands a group's ops to the executor as ONE batch (NCCL runs a group as one unit,
/// whatever streams its ops name). Without a host stream the batch runs now, in this
/// thread. With host streams it runs on the first one; every other host stream of the
/// group waits for it (later work there is ordered after the group), and if some op
/// named no host stream (null-stream semantics: done on return) we wait for it too.
ncclResult_t dispatch(std::vector<OpRecord>& ops) {
  if (ops.empty()) return ncclSuccess;
  BRAID_CHECK(checkSelfPairs(ops));
  std::vector<HostStream*> streams;
  bool hasInline = false;
  for (const OpRecord& op : ops) {
    HostStream* s = HostStream::lookup(op.stream);
    if (!s) hasInline = true;
    else if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
  }
  Batch batch;
  batch.ops = std::move(ops);
  issueBatch(&batch);
  if (streams.empty()) return executeBatch(batch);
  auto done = std::make_shared<Completion>();
  streams.front()->enqueue(std::move(batch), done);
  for (size_t i = 1; i < streams.size(); ++i) streams[i]->enqueueWait(done);
  return hasInline ? done->wait() : ncclSuccess;
}

}  // namespace

bool inGroup() { return tls.depth > 0; }

ncclResult_t groupStart() {
  ++tls.depth;
  return ncclSuccess;
}

void groupNoteError(ncclResult_t code) {
  if (tls.error == ncclSuccess) tls.error = code;
}

void groupDeferInit(std::function<ncclResult_t()> job) { tls.inits.push_back(std::move(job)); }

ncclResult_t groupEnd() {
  if (tls.depth == 0)
    return setError(ncclInvalidUsage, nullptr,
                    "ncclGroupEnd: not in a group (no matching ncclGroupStart)");
  if (--tls.depth > 0) return ncclSuccess;
  std::vector<OpRecord> ops = std::move(tls.ops);
  std::vector<std::function<ncclResult_t()>> inits = std::move(tls.inits);
  ncclResult_t error = tls.error;
  resetGroup();
  ncclResult_t r = runInits(inits);
  if (error != ncclSuccess) return error;  // an op of the group was invalid: drop all
  if (r != ncclSuccess) return r;
  return dispatch(ops);
}

ncclResult_t groupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (simInfo == nullptr)
    return setError(ncclInvalidArgument, nullptr, "ncclGroupSimulateEnd: simInfo is NULL");
  if (tls.depth == 0)
    return setError(ncclInvalidUsage, nullptr, "ncclGroupSimulateEnd: not in a group");
  if (--tls.depth > 0) return ncclSuccess;
  std::vector<OpRecord> ops = std::move(tls.ops);
  ncclResult_t error = tls.error;
  bool hadInits = !tls.inits.empty();
  resetGroup();
  if (hadInits)
    return setError(ncclInvalidUsage, nullptr,
                    "ncclGroupSimulateEnd: a group creating communicators cannot be simulated");
  if (error != ncclSuccess) return error;
  simInfo->estimatedTime = estimateBatchUs(ops);
  return ncclSuccess;
}

ncclResult_t enqueueOp(const OpRecord& op) {
  if (tls.depth > 0) {
    tls.ops.push_back(op);
    return ncclSuccess;
  }
  if (op.coll == Coll::kSendRecv && op.rma == 0 && op.root == op.comm->rank)
    return checkSelfPairs({op});  // alone it can never be matched: refused
  if (HostStream::lookup(op.stream) == nullptr) {
    // Small and medium collectives of one-host comms: the flag board, without a batch.
    ncclResult_t boardResult = ncclSuccess;
    if (runOnBoardDirectly(op, &boardResult)) return boardResult;
    // The common case, one blocking op: this thread's batch, reused (no allocation).
    thread_local Batch batch;
    struct Clear {
      Batch& b;
      ~Clear() {
        b.ops.clear();
        b.tickets.clear();
      }
    } clear{batch};
    batch.ops.push_back(op);
    issueBatch(&batch);
    return executeBatch(batch);
  }
  std::vector<OpRecord> ops{op};
  return dispatch(ops);
}

}  // namespace braid
