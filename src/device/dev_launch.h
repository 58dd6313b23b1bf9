// DevLaunch: the arguments of one CUDA executor kernel launch (passed by value, so a
// launch is captured whole by CUDA Graphs).
//
// A launch runs the works (ops) of one communicator's group, in order. Block b runs
// program b of each work (idle for works with fewer programs); a grid-wide barrier
// separates consecutive works, so two works never use one connection at once.
#pragma once
#include <cstdint>

#include "src/device/dev_plan.h"

namespace braid {

/// How a PreMulSum scalar reaches the kernel.
enum DevScalarMode : uint8_t {
  kDevScalarNone = 0,
  kDevScalarImmediate = 1,  ///< DevWork::scalarBits holds the value (one element)
  kDevScalarPointer = 2,    ///< DevWork::scalarPtr points at it (device memory)
};

/// The reduction family a kernel is instantiated for (Avg = Sum with a post divide,
/// PreMulSum = Sum with a pre multiply: both are flags of the work, not kernels).
enum class DevRed : uint8_t { kSum, kProd, kMax, kMin, kNone /* copies only */ };

/// One op of a launch.
struct DevWork {
  const DevPlanImage* plan = nullptr;  ///< device-accessible image
  const char* send = nullptr;
  char* recv = nullptr;
  char* scratch = nullptr;   ///< Plan::scratchElems elements of device memory
  /// The PreMulSum scalar, as scalarMode says: its bits (one element) or its address.
  union {
    uint64_t scalarBits = 0;
    const void* scalarPtr;
  };
  uint32_t nranks = 1;       ///< Avg divides by this (with kPostOp)
  uint8_t scalarMode = kDevScalarNone;
  uint8_t avg = 0;           ///< the op is ncclAvg
  /// The works of a launch form stages: works of one stage run side by side (the
  /// send/recv lanes of a group), each on its own blocks [firstBlock, firstBlock +
  /// plan->nPrograms); a grid-wide barrier precedes each work with newStage set
  /// (every work of the previous stages is then finished).
  uint16_t firstBlock = 0;
  uint8_t newStage = 1;
};

/// Words the host and the kernels share (mapped pinned host memory, one per comm).
struct DevControl {
  uint32_t abort;       ///< set by the host (ncclCommAbort, watchdog): kernels return
  uint32_t error;       ///< set by a kernel that gave up (a closed FIFO): nonzero
  uint64_t started;     ///< launches begun (block 0 adds 1)
  uint64_t finished;    ///< launches finished (the last block adds 1)
  uint64_t progress;    ///< bumped as slices move: the watchdog's sign of life
};

static_assert(sizeof(DevWork) == 56, "DevWork: 56 bytes (see DevLaunch::kMaxWorks)");

struct DevLaunch {
  /// Works per launch. DevLaunch is the kernel's parameter block, kept within 4 KiB:
  /// the parameters travel with every launch (72 works of 56 bytes and the header). A
  /// stage is at most kMaxBlocks wide, one block per work at least, so 72 works hold
  /// any stage; a longer group takes several launches.
  static constexpr int kMaxWorks = 72;
  static constexpr int kMaxBlocks = 64;
  DevWork works[kMaxWorks];
  uint32_t nWorks = 0;
  uint32_t nBlocks = 0;           ///< max over the works of firstBlock + nPrograms
  DevControl* control = nullptr;  ///< device-accessible address of the comm's words
  /// Device memory, 4 words, zero before the communicator's first launch: the grid
  /// barrier's arrival count and generation, and the count of blocks finished.
  uint32_t* barrier = nullptr;
};
static_assert(sizeof(DevLaunch) <= 4096, "the kernel's parameters: at most 4 KiB");

}  // namespace braid
