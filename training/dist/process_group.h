// ProcessGroup: one communicator (ncclComm_t) and one Braid host stream, with typed,
// exception-throwing collectives for the training layer. Built only on the public API
// (include/nccl.h, include/braid/braid.h).
//
// Every op is queued on the group's host stream, so ops of one group run in the order
// they were called (on every rank, the same order: that is the caller's contract, as
// with NCCL). Async ops return a Work handle; the blocking forms are "async + wait".
// Buffers must stay valid and unchanged until the op's Work completed.
//
//   ProcessGroup pg(id, rank, size);              // collective: ncclCommInitRank
//   Work w = pg.allReduceAsync(g, g, n, ReduceOp::kSum);
//   ... compute ...
//   w.wait();                                     // throws DistError on failure
//
// Timestamps: each Work records when it was queued (the caller's clock), when the
// stream started it and when it finished (host functions queued around the op with
// braidHostStreamLaunchHostFunc), in seconds of std::chrono::steady_clock (see now()).
// DDP uses them to measure how much communication overlapped backward.
//
// Errors: a failing NCCL call throws DistError naming the op, the rank and
// ncclGetLastError's text. A group in error aborts its communicator on destruction
// (ncclCommAbort) instead of destroying it, so peers fail fast instead of hanging.
//
// Devices: CPU (host buffers) only for now; on CUDA the same class would hold a
// cudaStream_t and cudaLaunchHostFunc would replace braidHostStreamLaunchHostFunc.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "nccl.h"

namespace braid {
namespace train {

enum class ReduceOp { kSum, kProd, kMax, kMin, kAvg };

/// A failed collective: what() names the op, the rank and NCCL's last error text.
class DistError : public std::runtime_error {
 public:
  DistError(const std::string& what, ncclResult_t code)
      : std::runtime_error(what), code_(code) {}
  ncclResult_t code() const { return code_; }

 private:
  ncclResult_t code_;
};

/// Seconds on std::chrono::steady_clock (the clock of every Work timestamp).
double now();

namespace detail {
struct WorkState;
}

/// Completion handle of one async op (or one group of ops). Copyable; an empty Work
/// (default-constructed) is complete.
class Work {
 public:
  Work() = default;
  /// Blocks until the op completed; throws DistError if it (or earlier work of its
  /// stream) failed. Calling it again is cheap.
  void wait() const;
  /// True once the op completed (successfully or not); never blocks.
  bool done() const;
  /// steady_clock seconds (see now()): when the op was queued by the caller, when the
  /// stream started it, and when it finished; 0 for events that did not happen yet.
  double queuedAt() const;
  double startedAt() const;
  double finishedAt() const;
  /// The op's name ("allReduce", ...) for messages.
  std::string name() const;

 private:
  friend class ProcessGroup;
  explicit Work(std::shared_ptr<detail::WorkState> s) : s_(std::move(s)) {}
  std::shared_ptr<detail::WorkState> s_;
};

/// Element types the collectives accept: float, double, int32_t, int64_t, uint8_t.
class ProcessGroup {
 public:
  /// Collective over `size` ranks: ncclCommInitRank(rank of size) with `id` (every rank
  /// passes the same id, e.g. one ncclGetUniqueId shared by threads, or the same
  /// NCCL_COMM_ID in every process). Throws DistError on failure.
  ProcessGroup(const ncclUniqueId& id, int rank, int size);
  /// Wraps an existing communicator; with `own`, destroys (or aborts) it at the end.
  explicit ProcessGroup(ncclComm_t comm, bool own = false);
  /// Waits for queued work, then destroys (or, after an error, aborts) the owned comm.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  ncclComm_t comm() const { return comm_; }
  braidHostStream_t stream() const { return stream_; }
  /// True after an op failed (the destructor then aborts the communicator).
  bool failed() const { return failed_; }

  // ---- async collectives: queued on the host stream, in call order ----
  /// recv[i] = op over ranks of send[i]; send == recv is in place.
  template <class T>
  Work allReduceAsync(const T* send, T* recv, size_t count, ReduceOp op = ReduceOp::kSum);
  /// recv[r*count + i] = rank r's send[i] (recv holds size()*count).
  template <class T>
  Work allGatherAsync(const T* send, T* recv, size_t count);
  /// recv[i] = op over ranks of send[rank()*recvCount + i] (send holds size()*recvCount).
  template <class T>
  Work reduceScatterAsync(const T* send, T* recv, size_t recvCount, ReduceOp op = ReduceOp::kSum);
  /// buf = root's buf.
  template <class T>
  Work broadcastAsync(T* buf, size_t count, int root);
  /// root's recv = op over ranks of send (recv is ignored on other ranks; may equal send).
  template <class T>
  Work reduceAsync(const T* send, T* recv, size_t count, int root, ReduceOp op = ReduceOp::kSum);
  /// Point-to-point; pair them across ranks (or put both in one group()).
  template <class T>
  Work sendAsync(const T* buf, size_t count, int peer);
  template <class T>
  Work recvAsync(T* buf, size_t count, int peer);

  // ---- blocking forms (async + wait) ----
  template <class T>
  void allReduce(T* buf, size_t count, ReduceOp op = ReduceOp::kSum) {
    allReduceAsync(buf, buf, count, op).wait();
  }
  template <class T>
  void allGather(const T* send, T* recv, size_t count) {
    allGatherAsync(send, recv, count).wait();
  }
  template <class T>
  void reduceScatter(const T* send, T* recv, size_t recvCount, ReduceOp op = ReduceOp::kSum) {
    reduceScatterAsync(send, recv, recvCount, op).wait();
  }
  template <class T>
  void broadcast(T* buf, size_t count, int root) {
    broadcastAsync(buf, count, root).wait();
  }
  template <class T>
  void send(const T* buf, size_t count, int peer) {
    sendAsync(buf, count, peer).wait();
  }
  template <class T>
  void recv(T* buf, size_t count, int peer) {
    recvAsync(buf, count, peer).wait();
  }
  /// Sum of one double over the group (e.g. partial squared norms).
  double allReduceScalar(double v, ReduceOp op = ReduceOp::kSum);

  /// Runs body() inside ncclGroupStart/ncclGroupEnd: the async ops it issues become one
  /// batch (e.g. a send and a recv with the same peer, or several broadcasts). Returns
  /// one Work for the whole group; the Works the ops inside returned complete with it.
  Work group(const std::function<void()>& body);

  /// Waits for everything queued so far; throws DistError on an error.
  void synchronize();

  /// ncclCommSplit (collective over this group): ranks with the same color form a new
  /// group, ordered by key. Returns nullptr for color < 0 (NCCL_SPLIT_NOCOLOR).
  std::unique_ptr<ProcessGroup> split(int color, int key);

  // ---- fault tolerance (elastic training, training/dist/elastic.h) ----
  /// Gives the group up after a peer failed: revokes the communicator (ncclCommRevoke,
  /// so work still queued fails at once) and marks the group failed, so the destructor
  /// aborts it (no waiting on dead peers). Local; idempotent.
  void abandon();
  /// ncclCommShrink(NCCL_SHRINK_ABORT): a new group of this group's ranks except
  /// `exclude` (ranks of this group; every survivor must pass the same list), ranked in
  /// the old order. Aborts this group's pending work; this group is abandoned (keep it
  /// alive until the call returns, then destroy it). Collective over the survivors.
  /// Throws DistError on failure (e.g. another rank died meanwhile).
  std::unique_ptr<ProcessGroup> shrink(const std::vector<int>& exclude);

 private:
  std::shared_ptr<detail::WorkState> begin(const char* op);
  Work finish(std::shared_ptr<detail::WorkState> s, ncclResult_t r);
  [[noreturn]] void fail(const std::string& op, ncclResult_t r, const std::string& extra = "");
  void prune();

  ncclComm_t comm_ = nullptr;
  bool own_ = false;
  int rank_ = 0, size_ = 1;
  braidHostStream_t stream_ = nullptr;
  bool failed_ = false;
  int groupDepth_ = 0;
  std::vector<std::shared_ptr<detail::WorkState>> inGroup_;  ///< ops of the open group
  std::vector<std::shared_ptr<detail::WorkState>> pending_;  ///< alive until finished
};

}  // namespace train
}  // namespace braid
