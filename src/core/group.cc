#include "src/core/group.h"

#include <map>
#include <thread>
#include <vector>

#include "src/core/comm.h"
#include "src/core/error.h"
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

/// Hands ops to their streams: host streams queue, everything else runs now.
ncclResult_t dispatch(std::vector<OpRecord>& ops) {
  std::map<HostStream*, std::vector<OpRecord>> queued;
  std::vector<OpRecord> inline_;
  for (const OpRecord& op : ops) {
    if (HostStream* s = HostStream::lookup(op.stream)) queued[s].push_back(op);
    else inline_.push_back(op);
  }
  for (auto& kv : queued) kv.first->enqueue(std::move(kv.second));
  return executeBatch(inline_);
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
  std::vector<OpRecord> ops{op};
  return dispatch(ops);
}

}  // namespace braid
