// DevPlan: a Plan compiled for the CUDA executor.
//
// The kernel walks the same Steps as the host executor (algorithms/plan.h), in a flat,
// pointer-free form: byte offsets instead of element offsets, and connections named by
// an index into the plan's connection list (filled per communicator with DevConns at
// launch time). Compiled once per cached Plan; the image (programs, steps, connections)
// is copied into memory the GPU reads (see DevPlanImage).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "src/device/dev_peers.h"
#include "src/exec/dev_conn.h"

namespace braid {

constexpr uint16_t kDevNoConn = 0xFFFF;
/// A direct-access step's peer field naming every rank (algorithms/plan.h: kAllPeers).
constexpr uint16_t kDevAllPeers = 0xFFFE;

/// One Step, in bytes. kind is a StepKind, flags StepFlags, buffers Buf values. For a
/// direct-access step (kSignal .. kPeerPut) the two connection fields are ranks instead:
/// recvConn the rank waited for or read from (kWait, kPeerCopy), sendConn the rank whose
/// dst is written besides this one's (kPeerReduce, kPeerPut); kDevAllPeers for every
/// rank, kDevNoConn for none.
struct DevStep {
  uint64_t srcOff = 0;  ///< byte offset of the src region in its buffer
  uint64_t dstOff = 0;  ///< byte offset of the dst region in its buffer
  uint64_t bytes = 0;   ///< bytes the step moves (count * typeSize)
  uint16_t sendConn = kDevNoConn;  ///< index into DevPlan::conns (a send end), or kDevNoConn
  uint16_t recvConn = kDevNoConn;  ///< index into DevPlan::conns (a receive end)
  uint8_t kind = 0;
  uint8_t flags = 0;
  uint8_t srcBuf = uint8_t(Buf::kNone);
  uint8_t dstBuf = uint8_t(Buf::kNone);
};

/// Steps [firstStep, firstStep + nSteps) of DevPlan::steps, run by one CUDA block.
struct DevProgram {
  uint32_t firstStep = 0;
  uint32_t nSteps = 0;
};

/// A connection end a plan uses: which (peer, channel, direction).
struct DevConnRef {
  int32_t peer = -1;
  uint16_t channel = 0;
  uint8_t isSend = 0;
  uint8_t pad = 0;  ///< explicit, so the bytes of a DevConnRef are all defined (cache keys)
};

/// The compiled plan (host-side form).
struct DevPlan {
  std::vector<DevProgram> programs;
  std::vector<DevStep> steps;
  std::vector<DevConnRef> conns;  ///< each (peer, channel, direction) once
  uint64_t sliceBytes = 0;        ///< Plan::sliceBytes (0: whole slots)
  uint32_t typeSize = 1;
  bool direct = false;            ///< some step is a direct-access one (needs DevPeerAreas)

  /// Compiles `plan` for elements of typeSize bytes. Fails (returns false, *why set)
  /// if the plan has more programs or connections than a launch supports, or a
  /// direct-access step names a rank beyond kDevMaxDirectRanks.
  static bool compile(const Plan& plan, size_t typeSize, DevPlan* out, std::string* why);
};

/// The ranks' direct-access areas as one communicator's plans see them (images of
/// plans with direct-access steps carry it).
struct DevPeerTable {
  DevPeerArea* const* areas = nullptr;  ///< nranks device addresses (index: rank)
  uint32_t rank = 0;
  uint32_t nranks = 1;
  /// 1: some area is on another device (system-scope ordering of signals); 0: every
  /// rank is on this GPU (GPU scope suffices).
  uint32_t sysScope = 1;
  uint32_t pad = 0;
};

/// The plan as the kernel reads it: one contiguous block of GPU-readable memory.
/// Layout: DevPlanImage, then programs[nPrograms], steps[nSteps], conns[nConns]
/// (DevConn, resolved for one communicator). Pointers are device-accessible.
struct DevPlanImage {
  uint32_t nPrograms = 0;
  uint32_t nSteps = 0;
  uint32_t nConns = 0;
  uint32_t typeSize = 1;
  uint64_t sliceBytes = 0;
  const DevProgram* programs = nullptr;
  const DevStep* steps = nullptr;
  const DevConn* conns = nullptr;
  DevPeerTable peers;  ///< areas null unless the plan has direct-access steps

  /// Bytes an image of this plan takes.
  static size_t bytesFor(const DevPlan& p);
  /// Writes the image of `p` with connections `conns` (one per p.conns entry) and, for a
  /// direct-access plan, the communicator's peer table, at `hostMem` (bytesFor(p)
  /// bytes, 16-byte aligned); the pointers inside are set for the same memory seen at
  /// device address `devMem` (== hostMem for the emulation).
  static const DevPlanImage* write(const DevPlan& p, const DevConn* conns,
                                   const DevPeerTable& peers, void* hostMem, void* devMem);
};

}  // namespace braid
