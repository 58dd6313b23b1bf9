#include "process_group.h"

#include "api.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#ifdef BRAID_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace torch_braid {

namespace {
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(100);

std::string msText(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }
}  // namespace

void Batch::append(Batch&& o) {
  auto move = [](auto& to, auto& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  move(outputs, o.outputs);
  move(keep, o.keep);
  move(pre, o.pre);
  move(launches, o.launches);
  move(post, o.post);
  timeout = std::max(timeout, o.timeout);
}

ProcessGroupBraid::ProcessGroupBraid(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout,
                                     std::string groupName, std::shared_ptr<Comm> hostComm)
    : Backend(rank, size),
      store_(store),
      options_(c10::make_intrusive<Options>("braid", timeout)),
      timeout_(timeout),
      hostComm_(std::move(hostComm)) {
  options_->group_name = std::move(groupName);
  if (hostComm_ == nullptr) {
    hostComm_ = Comm::create(store_, "braid/host/" + std::to_string(commCounter_++), rank, size,
                             -1);
  }
  worker_ = std::thread([this] { workerLoop(); });
  watchdog_ = std::thread([this] { watchdogLoop(); });
}

ProcessGroupBraid::~ProcessGroupBraid() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    TORCH_WARN("braid: shutting the process group down: ", e.what());
  }
}

void ProcessGroupBraid::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    stop_ = true;  // the worker drains what is queued, then leaves
  }
  cv_.notify_all();
  // The watchdog keeps watching while the worker drains: queued work whose peers never
  // come fails at its timeout instead of hanging the shutdown.
  if (worker_.joinable()) {
    if (worker_.get_id() == std::this_thread::get_id()) {
      worker_.detach();  // the last reference dropped by a callback on the worker itself
    } else {
      worker_.join();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watchdogStop_ = true;
  }
  watchdogCv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  std::map<int, std::shared_ptr<Comm>> cuda;
  std::shared_ptr<Comm> host;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cuda.swap(cudaComms_);
    host.swap(hostComm_);
  }
  // Destroying a communicator waits for its issued device work (bounded by Braid's own
  // timeout), as ncclCommDestroy does.
}

void ProcessGroupBraid::abort() {
  std::vector<std::shared_ptr<Comm>> comms;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (hostComm_) comms.push_back(hostComm_);
    for (auto& [dev, comm] : cudaComms_) comms.push_back(comm);
  }
  for (auto& c : comms) c->abort("ProcessGroup.abort() was called");
}

void ProcessGroupBraid::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
  options_->timeout = timeout;
}

std::chrono::milliseconds ProcessGroupBraid::timeoutOf(std::chrono::milliseconds op) {
  if (op != c10d::kUnsetTimeout) return op;
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_;
}

at::Device ProcessGroupBraid::deviceOf(const std::vector<at::Tensor>& tensors,
                                       const char* call) const {
  TORCH_CHECK(!tensors.empty(), "braid: ", call, " was given no tensors");
  at::Device d = tensors[0].device();
  for (const auto& t : tensors) {
    TORCH_CHECK(t.device() == d, "braid: ", call, ": every tensor must be on one device (",
                d, " and ", t.device(), ")");
    TORCH_CHECK(!t.is_sparse(), "braid: ", call, " does not take sparse tensors");
  }
  TORCH_CHECK(d.is_cpu() || d.is_cuda(), "braid: ", call, ": tensors on ", d,
              " (only cpu and cuda are supported)");
  return d;
}

Batch ProcessGroupBraid::newBatch(const char* name, c10d::OpType type, at::Device device,
                                  std::chrono::milliseconds opTimeout) {
  Batch b;
  b.name = name;
  b.type = type;
  b.device = device;
  b.timeout = timeoutOf(opTimeout);
  return b;
}

std::shared_ptr<Comm> ProcessGroupBraid::commFor(const at::Device& device) {
  if (device.is_cpu()) return hostComm_;
  int dev = device.index();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cudaComms_.find(dev);
    if (it != cudaComms_.end()) return it->second;
  }
  // The key counts communicators in group order, not by device: ranks usually sit on
  // different GPUs (cuda:0 on rank 0, cuda:1 on rank 1) and must meet on one key.
  auto comm = Comm::create(store_, "braid/cuda/" + std::to_string(commCounter_++), getRank(),
                           getSize(), dev);
  std::lock_guard<std::mutex> lock(mutex_);
  cudaComms_[dev] = comm;
  return comm;
}

void ProcessGroupBraid::eagerConnectSingleDevice(at::Device device) {
  if (device.is_cuda()) commFor(device);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::submit(Batch&& batch) {
  if (coalescing_) {
    TORCH_CHECK(!coalesced_ || coalesced_->device == batch.device,
                "braid: ops coalesced together must use one device (", coalesced_->device,
                " and ", batch.device, ")");
    if (!coalesced_) {
      coalesced_ = std::move(batch);
    } else {
      coalesced_->append(std::move(batch));
    }
    // The ops inside a coalescing block complete with the block (endCoalescing's Work).
    return nullptr;
  }
  auto work = c10::make_intrusive<WorkBraid>(getRank(), batch.type, batch.name, batch.device,
                                             batch.outputs, ++seq_, batch.timeout);
  if (batch.device.is_cuda()) {
    runCuda(batch, work);
    return work;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!stop_, "braid: ", batch.name, " after the process group was shut down");
    queue_.push_back(Item{std::move(batch), work});
  }
  cv_.notify_one();
  return work;
}

void ProcessGroupBraid::submitAlone(Batch&& batch) {
  TORCH_CHECK(!coalescing_, "braid: ", batch.name, " inside a coalescing block");
  batch.control = true;
  submit(std::move(batch))->wait();
}

void ProcessGroupBraid::startCoalescing() {
  if (coalescing_) {  // a block left by an exception (torch's manager has no finally)
    TORCH_WARN("braid: a coalescing block was never ended; its ",
               coalesced_ ? coalesced_->launches.size() : 0, " queued calls are dropped");
  }
  coalescing_ = true;
  coalesced_.reset();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::endCoalescing() {
  TORCH_CHECK(coalescing_, "braid: endCoalescing without startCoalescing");
  coalescing_ = false;
  if (!coalesced_) {  // nothing was issued: an already completed Work
    auto work = c10::make_intrusive<WorkBraid>(getRank(), c10d::OpType::COALESCED, "coalesced",
                                               at::Device(at::kCPU), std::vector<at::Tensor>{},
                                               ++seq_, timeoutOf(c10d::kUnsetTimeout));
    work->finishHost(nullptr);
    work->completeFuture(nullptr);
    return work;
  }
  Batch b = std::move(*coalesced_);
  coalesced_.reset();
  b.name = "coalesced(" + b.name + ",...)";
  b.type = c10d::OpType::COALESCED;
  return submit(std::move(b));
}

void ProcessGroupBraid::execute(Batch& batch, Comm& comm, cudaStream_t stream) {
  const braidNcclApi_t& api = nccl();
  LaunchContext ctx;
  ctx.comm = comm.get();
  ctx.stream = stream;
  ctx.rank = getRank();
  struct Cleanup {
    LaunchContext& c;
    ~Cleanup() {
      for (auto& f : c.cleanup) f();
    }
  } cleanup{ctx};
  for (auto& f : batch.pre) f();
  if (batch.control) return;  // a communicator-level call, made by `pre`: no NCCL group
  ncclResult_t first = ncclSuccess;
  const char* failed = nullptr;
  check(api.groupStart(), "ncclGroupStart", ctx.comm, ctx.rank);
  ncclResult_t end = ncclSuccess;
  {
    struct GroupEnd {  // the group is closed even when a launch throws
      const braidNcclApi_t& api;
      ncclResult_t& result;
      ~GroupEnd() { result = api.groupEnd(); }
    } closer{api, end};
    for (auto& l : batch.launches) {
      ncclResult_t r = l.fn(ctx);
      if (r != ncclSuccess && first == ncclSuccess) first = r, failed = l.call;
    }
  }
  if (comm.aborted()) C10_THROW_ERROR(DistBackendError, comm.abortReason() + " (in " + batch.name + ")");
  if (first != ncclSuccess) check(first, failed, ctx.comm, ctx.rank);
  check(end, (batch.name + " (ncclGroupEnd)").c_str(), ctx.comm, ctx.rank);
  for (auto& f : batch.post) f();
}

void ProcessGroupBraid::runCuda(Batch& batch, const c10::intrusive_ptr<WorkBraid>& work) {
#ifdef BRAID_TORCH_CUDA
  auto comm = commFor(batch.device);
  c10::cuda::CUDAGuard guard(batch.device);
  auto stream = at::cuda::getCurrentCUDAStream(batch.device.index());
  execute(batch, *comm, stream.stream());
  work->enqueuedOnCuda(stream.stream());
  std::lock_guard<std::mutex> lock(mutex_);
  cudaInFlight_.push_back(work);
#else
  (void)batch, (void)work;
  TORCH_CHECK(false, "torch_braid was built without CUDA: rebuild it where torch has CUDA");
#endif
}

void ProcessGroupBraid::workerLoop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped and drained
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      runningName_ = item.batch.name;
      runningSeq_ = item.work->getSequencenumber();
      runningSince_ = std::chrono::steady_clock::now();
      runningTimeout_ = item.batch.timeout;
    }
    std::exception_ptr error;
    try {
      execute(item.batch, *hostComm_, nullptr);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
    }
    item.batch = Batch();  // staging released before the future's callbacks run
    item.work->finishHost(error);
    // A future someone holds completes on torch's inter-op pool, not here: its callbacks
    // may issue another op on this group and wait for it, which needs this worker free.
    // (Unheld futures complete here: a thread hop per op costs tens of microseconds.)
    auto work = item.work;
    if (!work->completeFutureIfUnused(error)) {
      at::launch([work, error] { work->completeFuture(error); });
    }
  }
}

void ProcessGroupBraid::watchdogLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!watchdogStop_) {
    watchdogCv_.wait_for(lock, kWatchdogPeriod);
    auto now = std::chrono::steady_clock::now();
    if (running_ && runningTimeout_.count() > 0 && now - runningSince_ > runningTimeout_ &&
        !hostComm_->aborted()) {
      std::string why = runningName_ + " (sequence number " + std::to_string(runningSeq_) +
                        ") on rank " + std::to_string(getRank()) + " did not complete within " +
                        msText(runningTimeout_);
      lock.unlock();
      TORCH_WARN("braid: ", why, "; aborting the host communicator");
      hostComm_->abort(why);
      lock.lock();
    }
    // CUDA works: drop the completed ones, fail and abort on the late ones.
    for (auto it = cudaInFlight_.begin(); it != cudaInFlight_.end();) {
      auto& w = *it;
      if (w->cudaDone()) {
        it = cudaInFlight_.erase(it);
      } else if (w->getTimeout().count() > 0 && now - w->start() > w->getTimeout()) {
        std::string why = w->name() + " on cuda:" + std::to_string(w->device().index()) +
                          " (sequence number " +
                          std::to_string(w->getSequencenumber()) + ") on rank " +
                          std::to_string(getRank()) + " did not complete within " +
                          msText(w->getTimeout());
        auto comm = cudaComms_.count(w->device().index()) ? cudaComms_[w->device().index()]
                                                           : nullptr;
        w->failCuda(std::make_exception_ptr(c10::DistBackendError(
            {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, "braid: " + why)));
        it = cudaInFlight_.erase(it);
        lock.unlock();
        if (comm) comm->abort(why);
        lock.lock();
      } else {
        ++it;
      }
    }
  }
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupBraid::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  // A rank outside the new group is asked once per device type this backend serves
  // (cpu, cuda: torch 2.15 keeps asking while the answer is null). Only the first call
  // of one split_group is collective; the group name (unique per call) tells them apart.
  const std::string name = opts ? opts->group_name : "";
  auto me = std::find(ranks.begin(), ranks.end(), getRank());
  if (me == ranks.end() && !name.empty() && lastNonMemberSplit_ == name) return nullptr;
  if (std::getenv("BRAID_TORCH_DEBUG") != nullptr) {
    std::string list;
    for (int r : ranks) list += std::to_string(r) + " ";
    fprintf(stderr, "torch_braid: rank %d split(ranks %s) of group %s\n", getRank(),
            list.c_str(), options_->group_name.c_str());
  }
  bool member = me != ranks.end();
  int color = member ? *std::min_element(ranks.begin(), ranks.end()) : NCCL_SPLIT_NOCOLOR;
  int key = member ? int(me - ranks.begin()) : 0;
  // ncclCommSplit is collective over this group's host communicator: it runs on the
  // worker, behind the host work already queued.
  Batch b = newBatch("split", c10d::OpType::UNKNOWN, at::Device(at::kCPU), c10d::kUnsetTimeout);
  auto child = std::make_shared<ncclComm_t>(nullptr);
  b.pre.push_back([this, color, key, child] {
    check(nccl().commSplit(hostComm_->get(), color, key, child.get(), nullptr), "ncclCommSplit",
          hostComm_->get(), getRank());
  });
  submitAlone(std::move(b));
  if (!member) {
    lastNonMemberSplit_ = name;
    return nullptr;
  }
  auto comm = std::make_shared<Comm>(*child, key, int(ranks.size()), -1);
  auto timeout = opts ? opts->timeout : timeoutOf(c10d::kUnsetTimeout);
  return c10::make_intrusive<ProcessGroupBraid>(store, key, int(ranks.size()), timeout, name,
                                                comm);
}

void ProcessGroupBraid::suspend() {
  // Collective, behind the host work already queued (on the worker).
  Batch b = newBatch("suspend", c10d::OpType::UNKNOWN, at::Device(at::kCPU), c10d::kUnsetTimeout);
  b.pre.push_back([this] {
    for (auto& [dev, comm] : cudaComms_)
      check(nccl().commSuspend(comm->get(), NCCL_SUSPEND_MEM), "ncclCommSuspend", comm->get(),
            getRank());
    check(nccl().commSuspend(hostComm_->get(), NCCL_SUSPEND_MEM), "ncclCommSuspend",
          hostComm_->get(), getRank());
  });
  submitAlone(std::move(b));
}

void ProcessGroupBraid::resume() {
  Batch b = newBatch("resume", c10d::OpType::UNKNOWN, at::Device(at::kCPU), c10d::kUnsetTimeout);
  b.pre.push_back([this] {
    check(nccl().commResume(hostComm_->get()), "ncclCommResume", hostComm_->get(), getRank());
    for (auto& [dev, comm] : cudaComms_)
      check(nccl().commResume(comm->get()), "ncclCommResume", comm->get(), getRank());
  });
  submitAlone(std::move(b));
}

std::unordered_map<std::string, uint64_t> ProcessGroupBraid::getMemoryStats() {
  static const std::pair<const char*, ncclCommMemStat_t> kStats[] = {
      {"suspendable", ncclStatGpuMemSuspend},
      {"suspended", ncclStatGpuMemSuspended},
      {"persistent", ncclStatGpuMemPersist},
      {"total", ncclStatGpuMemTotal}};
  std::unordered_map<std::string, uint64_t> out;
  TORCH_CHECK(hostComm_ != nullptr, "braid: getMemoryStats after shutdown");
  auto add = [&](const std::string& prefix, Comm& comm) {
    for (const auto& [name, stat] : kStats) {
      uint64_t v = 0;
      check(nccl().commMemStats(comm.get(), stat, &v), "ncclCommMemStats", comm.get(),
            getRank());
      out[prefix + name] = v;
    }
  };
  add("host.", *hostComm_);
  for (auto& [dev, comm] : cudaComms_) add("cuda" + std::to_string(dev) + ".", *comm);
  return out;
}

c10::intrusive_ptr<ProcessGroupBraid> createProcessGroupBraid(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeoutSeconds,
    const std::string& groupName, const std::vector<uint64_t>& globalRanks) {
  auto ms = std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000.0));
  auto pg = c10::make_intrusive<ProcessGroupBraid>(store, rank, size, ms, groupName);
  pg->getBackendOptions()->global_ranks_in_group = globalRanks;
  return pg;
}

}  // namespace torch_braid
