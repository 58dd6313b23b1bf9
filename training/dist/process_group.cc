#include "training/dist/process_group.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

namespace braid {
namespace train {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace detail {

/// Shared by a Work and the host functions queued around its op.
struct WorkState {
  std::string op;
  int rank = 0;
  braidHostStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  double queued = 0, started = 0, finished = 0;
  bool done = false;
  int hostFns = 0;    ///< host functions queued with this state as argument, not yet run
  ncclResult_t result = ncclSuccess;
  std::string error;  ///< ncclGetLastError text captured at completion

  static void onStart(void* p) {
    auto* s = static_cast<WorkState*>(p);
    std::lock_guard<std::mutex> lock(s->mu);
    s->started = now();
    --s->hostFns;
  }
  /// Runs on the stream's thread after the op: the stream's error state tells whether
  /// the op (or earlier work of the stream) failed.
  static void onFinish(void* p) {
    auto* s = static_cast<WorkState*>(p);
    const ncclResult_t q = braidHostStreamQuery(s->stream);
    std::string text;
    if (q != ncclSuccess && q != ncclInProgress) {
      const char* e = ncclGetLastError(s->comm);
      text = e ? e : "";
    }
    // Notify under the lock: once unlocked, the owner may free the state.
    std::lock_guard<std::mutex> lock(s->mu);
    s->finished = now();
    if (s->started == 0) s->started = s->finished;
    if (q != ncclSuccess && q != ncclInProgress) {
      s->result = q;
      s->error = std::move(text);
    }
    s->done = true;
    --s->hostFns;
    s->cv.notify_all();
  }
  /// Queues fn(this) on the stream; false on failure.
  bool launch(void (*fn)(void*)) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++hostFns;
    }
    if (braidHostStreamLaunchHostFunc(stream, fn, this) == ncclSuccess) return true;
    std::lock_guard<std::mutex> lock(mu);
    --hostFns;
    return false;
  }
  void markFailed(ncclResult_t r) {
    std::lock_guard<std::mutex> lock(mu);
    result = r;
    done = true;
    if (finished == 0) finished = now();
    cv.notify_all();
  }
};

}  // namespace detail

namespace {

template <class T>
ncclDataType_t dtypeOf();
template <>
ncclDataType_t dtypeOf<float>() { return ncclFloat32; }
template <>
ncclDataType_t dtypeOf<double>() { return ncclFloat64; }
template <>
ncclDataType_t dtypeOf<int32_t>() { return ncclInt32; }
template <>
ncclDataType_t dtypeOf<int64_t>() { return ncclInt64; }
template <>
ncclDataType_t dtypeOf<uint8_t>() { return ncclUint8; }

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kAvg: return ncclAvg;
  }
  return ncclSum;
}

std::string describe(ncclResult_t r, const char* lastError) {
  std::string s = ncclGetErrorString(r);
  if (lastError && *lastError) s += std::string(": ") + lastError;
  return s;
}

}  // namespace

// ---------------------------------------------------------------- Work

void Work::wait() const {
  if (!s_) return;
  detail::WorkState& s = *s_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait(lock, [&] { return s.done; });
  if (s.result != ncclSuccess) {
    throw DistError("braid::train: " + s.op + " failed on rank " + std::to_string(s.rank) + ": " +
                        describe(s.result, s.error.c_str()),
                    s.result);
  }
}

bool Work::done() const {
  if (!s_) return true;
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->done;
}

double Work::queuedAt() const {
  if (!s_) return 0;
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->queued;
}

double Work::startedAt() const {
  if (!s_) return 0;
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->started;
}

double Work::finishedAt() const {
  if (!s_) return 0;
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->finished;
}

std::string Work::name() const { return s_ ? s_->op : std::string("(none)"); }

// ---------------------------------------------------------------- ProcessGroup

ProcessGroup::ProcessGroup(const ncclUniqueId& id, int rank, int size) : own_(true) {
  const ncclResult_t r = ncclCommInitRank(&comm_, size, id, rank);
  if (r != ncclSuccess) {
    const char* e = ncclGetLastError(nullptr);
    comm_ = nullptr;
    throw DistError("braid::train: ncclCommInitRank(rank " + std::to_string(rank) + " of " +
                        std::to_string(size) + ") failed: " + describe(r, e),
                    r);
  }
  rank_ = rank;
  size_ = size;
  if (braidHostStreamCreate(&stream_) != ncclSuccess) {
    ncclCommDestroy(comm_);
    throw DistError("braid::train: braidHostStreamCreate failed", ncclSystemError);
  }
}

ProcessGroup::ProcessGroup(ncclComm_t comm, bool own) : comm_(comm), own_(own) {
  if (!comm) throw std::invalid_argument("braid::train::ProcessGroup: null communicator");
  ncclResult_t r = ncclCommUserRank(comm, &rank_);
  if (r == ncclSuccess) r = ncclCommCount(comm, &size_);
  if (r != ncclSuccess) fail("ncclCommUserRank/ncclCommCount", r);
  if (braidHostStreamCreate(&stream_) != ncclSuccess)
    throw DistError("braid::train: braidHostStreamCreate failed", ncclSystemError);
}

ProcessGroup::~ProcessGroup() {
  if (!failed_ && stream_ && braidHostStreamSynchronize(stream_) != ncclSuccess) failed_ = true;
  if (!failed_ && comm_) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress)
      failed_ = true;
  }
  if (failed_) {
    // Abort first: queued batches see the flag and fail at once, peers see closed
    // connections; then the stream drains quickly.
    if (own_ && comm_) ncclCommAbort(comm_);
    if (stream_) braidHostStreamDestroy(stream_);
  } else {
    if (stream_) braidHostStreamDestroy(stream_);
    if (own_ && comm_) ncclCommDestroy(comm_);
  }
}

void ProcessGroup::fail(const std::string& op, ncclResult_t r, const std::string& extra) {
  failed_ = true;
  const char* e = comm_ ? ncclGetLastError(comm_) : ncclGetLastError(nullptr);
  throw DistError("braid::train: " + op + " failed on rank " + std::to_string(rank_) +
                      (extra.empty() ? "" : " (" + extra + ")") + ": " + describe(r, e),
                  r);
}

void ProcessGroup::prune() {
  size_t k = 0;
  for (auto& s : pending_) {
    bool idle;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      idle = s->done && s->hostFns == 0;
    }
    if (!idle) pending_[k++] = std::move(s);
  }
  pending_.resize(k);
}

std::shared_ptr<detail::WorkState> ProcessGroup::begin(const char* op) {
  prune();
  auto s = std::make_shared<detail::WorkState>();
  s->op = op;
  s->rank = rank_;
  s->stream = stream_;
  s->comm = comm_;
  s->queued = now();
  pending_.push_back(s);
  // Runs when the stream reaches the op (inside a group: just before the group's batch).
  if (!s->launch(&detail::WorkState::onStart)) {
    s->markFailed(ncclInternalError);
    fail(std::string(op) + " (braidHostStreamLaunchHostFunc)", ncclInternalError);
  }
  return s;
}

Work ProcessGroup::finish(std::shared_ptr<detail::WorkState> s, ncclResult_t r) {
  if (r != ncclSuccess) {
    s->markFailed(r);
    fail(s->op, r);
  }
  if (groupDepth_ > 0) {
    inGroup_.push_back(s);  // completes with the group (queued at ncclGroupEnd)
  } else if (!s->launch(&detail::WorkState::onFinish)) {
    s->markFailed(ncclInternalError);
    fail(s->op + " (braidHostStreamLaunchHostFunc)", ncclInternalError);
  }
  return Work(std::move(s));
}

template <class T>
Work ProcessGroup::allReduceAsync(const T* send, T* recv, size_t count, ReduceOp op) {
  auto s = begin("allReduce");
  return finish(s, ncclAllReduce(send, recv, count, dtypeOf<T>(), ncclOp(op), comm_,
                                 braidHostStreamAsCuda(stream_)));
}

template <class T>
Work ProcessGroup::allGatherAsync(const T* send, T* recv, size_t count) {
  auto s = begin("allGather");
  return finish(s, ncclAllGather(send, recv, count, dtypeOf<T>(), comm_,
                                 braidHostStreamAsCuda(stream_)));
}

template <class T>
Work ProcessGroup::reduceScatterAsync(const T* send, T* recv, size_t recvCount, ReduceOp op) {
  auto s = begin("reduceScatter");
  return finish(s, ncclReduceScatter(send, recv, recvCount, dtypeOf<T>(), ncclOp(op), comm_,
                                     braidHostStreamAsCuda(stream_)));
}

template <class T>
Work ProcessGroup::broadcastAsync(T* buf, size_t count, int root) {
  auto s = begin("broadcast");
  return finish(s, ncclBroadcast(buf, buf, count, dtypeOf<T>(), root, comm_,
                                 braidHostStreamAsCuda(stream_)));
}

template <class T>
Work ProcessGroup::reduceAsync(const T* send, T* recv, size_t count, int root, ReduceOp op) {
  auto s = begin("reduce");
  // NCCL ignores recvbuff off the root; pass a valid pointer anyway.
  T* out = recv ? recv : const_cast<T*>(send);
  return finish(s, ncclReduce(send, out, count, dtypeOf<T>(), ncclOp(op), root, comm_,
                              braidHostStreamAsCuda(stream_)));
}

template <class T>
Work ProcessGroup::sendAsync(const T* buf, size_t count, int peer) {
  auto s = begin("send");
  return finish(s, ncclSend(buf, count, dtypeOf<T>(), peer, comm_, braidHostStreamAsCuda(stream_)));
}

template <class T>
Work ProcessGroup::recvAsync(T* buf, size_t count, int peer) {
  auto s = begin("recv");
  return finish(s, ncclRecv(buf, count, dtypeOf<T>(), peer, comm_, braidHostStreamAsCuda(stream_)));
}

double ProcessGroup::allReduceScalar(double v, ReduceOp op) {
  double x = v;
  allReduce(&x, 1, op);
  return x;
}

Work ProcessGroup::group(const std::function<void()>& body) {
  auto g = begin("group");
  if (groupDepth_ == 0) inGroup_.clear();
  ++groupDepth_;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) {
    --groupDepth_;
    g->markFailed(r);
    fail("ncclGroupStart", r);
  }
  try {
    body();
  } catch (...) {
    --groupDepth_;
    ncclGroupEnd();
    for (auto& s : inGroup_) s->markFailed(ncclInvalidUsage);
    inGroup_.clear();
    g->markFailed(ncclInvalidUsage);
    throw;
  }
  --groupDepth_;
  r = ncclGroupEnd();
  if (groupDepth_ > 0) {  // nested: the outer group completes everything
    inGroup_.push_back(g);
    if (r != ncclSuccess) fail("ncclGroupEnd", r);
    return Work(g);
  }
  std::vector<std::shared_ptr<detail::WorkState>> members;
  members.swap(inGroup_);
  if (r != ncclSuccess) {
    for (auto& s : members) s->markFailed(r);
    g->markFailed(r);
    fail("ncclGroupEnd", r);
  }
  for (auto& s : members) {
    if (!s->launch(&detail::WorkState::onFinish)) s->markFailed(ncclInternalError);
  }
  return finish(g, ncclSuccess);
}

void ProcessGroup::synchronize() {
  const ncclResult_t r = braidHostStreamSynchronize(stream_);
  prune();
  if (r != ncclSuccess) fail("synchronize", r);
}

std::unique_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  synchronize();
  ncclComm_t child = nullptr;
  const ncclResult_t r =
      ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, nullptr);
  if (r != ncclSuccess)
    fail("ncclCommSplit", r, "color " + std::to_string(color) + ", key " + std::to_string(key));
  if (!child) return nullptr;
  return std::make_unique<ProcessGroup>(child, true);
}

void ProcessGroup::abandon() {
  if (comm_ && !failed_) ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
  failed_ = true;
}

std::unique_ptr<ProcessGroup> ProcessGroup::shrink(const std::vector<int>& exclude) {
  std::vector<int> list(exclude);
  ncclComm_t child = nullptr;
  const ncclResult_t r = ncclCommShrink(comm_, list.empty() ? nullptr : list.data(), int(list.size()),
                                        &child, nullptr, NCCL_SHRINK_ABORT);
  failed_ = true;  // the parent's pending work was aborted: destroy means abort now
  std::string which;
  for (int x : exclude) which += (which.empty() ? "" : ",") + std::to_string(x);
  if (r != ncclSuccess) fail("ncclCommShrink", r, "excluding ranks {" + which + "}");
  if (!child) fail("ncclCommShrink", ncclInternalError, "no communicator returned");
  return std::make_unique<ProcessGroup>(child, true);
}

#define BRAID_PG_INSTANTIATE(T)                                                          \
  template Work ProcessGroup::allReduceAsync<T>(const T*, T*, size_t, ReduceOp);         \
  template Work ProcessGroup::allGatherAsync<T>(const T*, T*, size_t);                   \
  template Work ProcessGroup::reduceScatterAsync<T>(const T*, T*, size_t, ReduceOp);     \
  template Work ProcessGroup::broadcastAsync<T>(T*, size_t, int);                        \
  template Work ProcessGroup::reduceAsync<T>(const T*, T*, size_t, int, ReduceOp);       \
  template Work ProcessGroup::sendAsync<T>(const T*, size_t, int);                       \
  template Work ProcessGroup::recvAsync<T>(T*, size_t, int);

BRAID_PG_INSTANTIATE(float)
BRAID_PG_INSTANTIATE(double)
BRAID_PG_INSTANTIATE(int32_t)
BRAID_PG_INSTANTIATE(int64_t)
BRAID_PG_INSTANTIATE(uint8_t)
#undef BRAID_PG_INSTANTIATE

}  // namespace train
}  // namespace braid
