// LaunchPlanner: how the CUDA executor packs one communicator's ops into kernel
// launches (pure host logic, unit-tested without a GPU).
//
// Ops arrive in issue order. A collective is a stage of its own; a run of consecutive
// send/recv ops is one stage whose ops run side by side, one block range per (peer,
// direction) lane, as wide as the lane's widest op (so a lane's ops keep their order on
// the same blocks, hence the same connections). A launch holds whole stages of one
// kernel (datatype and reduction family) up to DevLaunch::kMaxWorks works and
// kMaxBlocks blocks; each work's scratch gets a 256-byte aligned piece of one buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"
#include "src/device/dev_launch.h"

namespace braid {

/// What the planner needs to know of one op.
struct LaunchItem {
  Coll coll = Coll::kAllReduce;
  int peer = -1;        ///< send/recv: the peer
  bool isSend = false;  ///< send/recv: direction
  uint32_t nPrograms = 1;
  ncclDataType_t type = ncclFloat32;
  DevRed red = DevRed::kNone;  ///< kNone: copy-only (any datatype shares the kernel)
  cudaStream_t stream = nullptr;
  size_t scratchBytes = 0;
};

/// One launch: items [first, first + count) of the input, with their places.
struct LaunchSpec {
  ncclDataType_t type = ncclUint8;  ///< the kernel's datatype (ncclUint8 for copies)
  DevRed red = DevRed::kNone;
  size_t first = 0, count = 0;
  std::vector<uint16_t> firstBlock;      ///< per item
  std::vector<uint8_t> newStage;         ///< per item
  std::vector<size_t> scratchOffset;     ///< per item, bytes into the scratch buffer
  size_t scratchBytes = 0;               ///< the launch's total
  uint32_t nBlocks = 0;
  std::vector<cudaStream_t> streams;     ///< distinct, the first op's first
};

/// The order in which to launch one group's ops, so that a group takes one launch per
/// kernel and every rank's launches line up: all send/recv ops first (one stage: they
/// differ per rank, and matching ones must run side by side), then the copy-only
/// collectives, then the other collectives by kernel in order of first appearance.
/// The ops of a group have no order among them (NCCL runs them concurrently), and no
/// position depends on a rank's own send/recv ops, so the ranks' launches and the
/// connections' use line up. Returns indices into `items`.
std::vector<size_t> kernelOrder(const std::vector<LaunchItem>& items);

/// Packs `items` (one communicator's ops in issue order) into launches. Fails with
/// *why set if a stage alone does not fit a launch (too many send/recv lanes).
bool planLaunches(const std::vector<LaunchItem>& items, std::vector<LaunchSpec>* out,
                  std::string* why);

}  // namespace braid
