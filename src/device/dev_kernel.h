// The CUDA executor's kernel entry points (src/device/kernels/*.cu). The tests run the
// same kernel code on the host without a GPU: tests/device_emu/emulate.h.
#pragma once
#include "nccl.h"
#include "src/device/dev_launch.h"

namespace braid {

/// Threads per block of the executor kernel.
constexpr int kDevThreads = 512;

/// The reduction family for an op of `type` (Avg and PreMulSum run as kSum).
DevRed devRedFor(ncclRedOp_t op, bool reduces);

/// Loads every executor kernel on the current device now, once per device and process
/// (later calls return at once). Called before a communicator's first launch: with
/// CUDA's lazy module loading a kernel loaded at its first launch may wait for the
/// running kernels, which can wait for that launch (thread ranks of one process), and a
/// first launch inside a stream capture would load there. Without CUDA: ncclSuccess.
ncclResult_t preloadDevKernels();

/// Enqueues one launch (l.nBlocks blocks of kDevThreads threads) of the kernel for
/// `type` and `red` on stream s. Asynchronous. Without CUDA: ncclInternalError.
ncclResult_t launchDevKernel(const DevLaunch& l, ncclDataType_t type, DevRed red,
                             cudaStream_t s);

}  // namespace braid
