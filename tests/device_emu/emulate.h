// The host emulation of the CUDA executor's kernel (tests/device_emu/emulate.cc): the
// interpreter of src/device/interp.h run by host threads, for the tests without a GPU.
#pragma once
#include <cstdint>

#include "nccl.h"
#include "src/device/dev_launch.h"

namespace braid {

/// Host emulation: runs block `block` of launch l to its end with the same interpreter
/// the kernel uses, as `threads` threads of one block (the calling thread is thread 0,
/// the others are started and joined here). All blocks of a launch must run
/// concurrently, as on the GPU. Returns false if the launch gave up (abort flag or a
/// closed FIFO) or the block's threads disagreed.
bool emulateDevBlock(const DevLaunch& l, uint32_t block, ncclDataType_t type, DevRed red,
                     int threads = 1);

}  // namespace braid
