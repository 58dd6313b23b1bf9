#include "comm.h"

#include "api.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>

#include <cstring>

#ifdef BRAID_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#endif

namespace torch_braid {

std::shared_ptr<Comm> Comm::create(const c10::intrusive_ptr<c10d::Store>& store,
                                   const std::string& key, int rank, int size,
                                   int cudaDevice) {
  const braidNcclApi_t& api = nccl();
  ncclUniqueId id;
  if (rank == 0) {
    check(api.getUniqueId(&id), "ncclGetUniqueId", nullptr, rank);
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(p, p + sizeof(id)));
  } else {
    std::vector<uint8_t> v = store->get(key);
    TORCH_CHECK(v.size() == sizeof(id), "braid: the store key ", key, " holds ", v.size(),
                " bytes, not a unique id of ", sizeof(id));
    std::memcpy(&id, v.data(), sizeof(id));
  }
  ncclComm_t comm = nullptr;
  {
#ifdef BRAID_TORCH_CUDA
    std::optional<c10::cuda::CUDAGuard> guard;
    if (cudaDevice >= 0) guard.emplace(static_cast<c10::DeviceIndex>(cudaDevice));
#else
    TORCH_CHECK(cudaDevice < 0, "torch_braid was built without CUDA");
#endif
    check(api.commInitRank(&comm, size, id, rank), "ncclCommInitRank", nullptr, rank);
  }
  return std::make_shared<Comm>(comm, rank, size, cudaDevice);
}

Comm::Comm(ncclComm_t comm, int rank, int size, int cudaDevice)
    : comm_(comm), rank_(rank), size_(size), cudaDevice_(cudaDevice) {}

Comm::~Comm() {
  // An aborted communicator is already released (ncclCommAbort frees it).
  if (!aborted_.load() && comm_ != nullptr) nccl().commDestroy(comm_);
}

ncclComm_t Comm::get() const {
  if (aborted_.load()) C10_THROW_ERROR(DistBackendError, abortReason());
  return comm_;
}

void Comm::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.load()) return;
    reason_ = reason;
    aborted_.store(true);
  }
  nccl().commAbort(comm_);
}

std::string Comm::abortReason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return "braid: the communicator was aborted: " + reason_;
}

}  // namespace torch_braid
