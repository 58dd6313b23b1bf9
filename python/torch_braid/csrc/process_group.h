// torch_braid: ProcessGroupBraid, the c10d backend "braid".
//
// Host tensors run on Braid's host path, one op after another on the backend's worker
// thread (as Gloo does), so the caller never blocks unless it waits. CUDA tensors run on
// torch's current CUDA stream, stream-ordered, on a communicator per device made at the
// first CUDA op. A watchdog thread fails any op that outlives its timeout (the op's own,
// else the group's) by aborting the communicator it runs on.
#pragma once

#include "batch.h"
#include "comm.h"
#include "work.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace torch_braid {

class ProcessGroupBraid : public c10d::Backend {
 public:
  ProcessGroupBraid(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout, std::string groupName,
                    std::shared_ptr<Comm> hostComm = nullptr);
  ~ProcessGroupBraid() override;

  const std::string getBackendName() const override { return "braid"; }
  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  /// For torch's new_group with a bound device: a rank outside the new group takes part
  /// in nothing (members build their communicator from the store), so this does nothing.
  void performNocolorSplit(at::Device) {}

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  void eagerConnectSingleDevice(at::Device device) override;
  void abort() override;
  void shutdown() override;
  // Virtual in c10d::Backend of newer torch releases only (not 2.11): declared without
  // `override` so that the backend builds against both; they override where they can.
  void suspend();
  void resume();
  std::unordered_map<std::string, uint64_t> getMemoryStats();

 private:
  struct Item {
    Batch batch;
    c10::intrusive_ptr<WorkBraid> work;
  };

  /// Queues (CPU) or runs on the current stream (CUDA), or adds to the open coalescing
  /// group; returns the Work.
  c10::intrusive_ptr<c10d::Work> submit(Batch&& batch);
  /// Runs a communicator-level step (split, suspend) on the worker and waits for it.
  void submitAlone(Batch&& batch);
  std::chrono::milliseconds timeoutOf(std::chrono::milliseconds opTimeout);
  /// The batch's kind of device for the given tensors (all on one device).
  at::Device deviceOf(const std::vector<at::Tensor>& tensors, const char* call) const;
  Batch newBatch(const char* name, c10d::OpType type, at::Device device,
                 std::chrono::milliseconds opTimeout);
  std::shared_ptr<Comm> commFor(const at::Device& device);
  /// Runs a batch on `comm` with `stream` (null: host path, blocking); throws on failure.
  void execute(Batch& batch, Comm& comm, cudaStream_t stream);
  void runCuda(Batch& batch, const c10::intrusive_ptr<WorkBraid>& work);

  void workerLoop();
  void watchdogLoop();

  // The building blocks of the collectives (collectives.cc).
  void addAllreduce(Batch& b, const at::Tensor& t, const c10d::ReduceOp& op);
  void addFoldAllreduce(Batch& b, const at::Tensor& t, const c10d::ReduceOp& op, int root);
  void addAllgather(Batch& b, const at::Tensor& out, const at::Tensor& in);
  void addReduceScatter(Batch& b, const at::Tensor& out, const at::Tensor& in,
                        const c10d::ReduceOp& op);

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<Options> options_;
  std::chrono::milliseconds timeout_;
  std::atomic<uint64_t> seq_{0};
  uint64_t commCounter_ = 0;

  std::shared_ptr<Comm> hostComm_;
  std::map<int, std::shared_ptr<Comm>> cudaComms_;

  std::string lastNonMemberSplit_;  // see split()

  bool coalescing_ = false;
  std::optional<Batch> coalesced_;

  // The CPU worker: batches in order, one at a time.
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  // What the worker executes now (the watchdog reads it under mutex_).
  bool running_ = false;
  std::string runningName_;
  uint64_t runningSeq_ = 0;
  std::chrono::steady_clock::time_point runningSince_;
  std::chrono::milliseconds runningTimeout_{0};
  bool stop_ = false;          // the worker drains and leaves
  bool watchdogStop_ = false;  // then the watchdog leaves
  std::thread worker_;

  // CUDA works in flight (the watchdog polls them).
  std::vector<c10::intrusive_ptr<WorkBraid>> cudaInFlight_;
  std::condition_variable watchdogCv_;
  std::thread watchdog_;
};

/// The creator registered with torch.distributed (see torch_braid/__init__.py).
c10::intrusive_ptr<ProcessGroupBraid> createProcessGroupBraid(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeoutSeconds,
    const std::string& groupName, const std::vector<uint64_t>& globalRanks);

}  // namespace torch_braid
