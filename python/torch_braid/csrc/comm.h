// torch_braid: one Braid communicator of a process group (the CPU one, or one per CUDA
// device), made from a unique id exchanged through the c10d Store.
#pragma once

#include <nccl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace torch_braid {

class Comm {
 public:
  /// Collective over the group: rank 0 makes a unique id and publishes it under `key`;
  /// every rank joins. `cudaDevice` < 0 for the host communicator.
  static std::shared_ptr<Comm> create(const c10::intrusive_ptr<c10d::Store>& store,
                                      const std::string& key, int rank, int size,
                                      int cudaDevice);
  /// Wraps a communicator made elsewhere (ncclCommSplit).
  Comm(ncclComm_t comm, int rank, int size, int cudaDevice);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  /// The handle, or a DistBackendError when the communicator was aborted (with why).
  ncclComm_t get() const;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int cudaDevice() const { return cudaDevice_; }

  /// Aborts it (any thread; ops in flight fail promptly), remembering `reason`.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }
  std::string abortReason() const;

 private:
  ncclComm_t comm_;
  int rank_, size_, cudaDevice_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

}  // namespace torch_braid
