// torch_braid: what one c10d call (or one coalesced group of calls) asks Braid to do.
//
// A Batch is built on the calling thread and executed either by the CPU worker (host
// tensors, Braid's host path, blocking calls) or at once on torch's current CUDA stream.
// Execution: `pre` steps (stage inputs), every launch inside one ncclGroupStart/End,
// `post` steps (copy results out, fold), then `cleanup` (always).
#pragma once

#include <ATen/core/Tensor.h>  // not ATen/ATen.h (every op's declaration): faster to build
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace torch_braid {

/// What a launch gets: the communicator and stream to use, and a place for steps that
/// must run after the group ends (destroying a PreMulSum op, say).
struct LaunchContext {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0;
  std::vector<std::function<void()>> cleanup;
};

/// One NCCL call of a batch; returns its result (the executor names `call` on failure).
struct Launch {
  const char* call;
  std::function<ncclResult_t(LaunchContext&)> fn;
};

struct Batch {
  std::string name;                 ///< the c10d call, for errors ("allreduce")
  c10d::OpType type = c10d::OpType::UNKNOWN;
  at::Device device{at::kCPU};
  std::vector<at::Tensor> outputs;  ///< the Work's result / future value
  std::vector<at::Tensor> keep;     ///< alive until the batch is done (inputs, staging)
  std::vector<std::function<void()>> pre;
  std::vector<Launch> launches;
  std::vector<std::function<void()>> post;
  std::chrono::milliseconds timeout{0};
  bool control = false;  ///< only `pre` runs (a communicator call such as ncclCommSplit)

  /// Appends another batch (coalescing): its steps run in the same group.
  void append(Batch&& other);
};

}  // namespace torch_braid
