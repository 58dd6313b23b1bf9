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
#include "src/exec/dev_conn.h"

namespace braid {

constexpr uint16_t kDevNoConn = 0xFFFF;

/// One Step, in bytes. kind is a StepKind, flags StepFlags, buffers Buf values.
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

  /// Compiles `plan` for elements of typeSize bytes. Fails (returns false, *why set)
  /// if the plan has more programs or connections than a launch supports.
  static bool compile(const Plan& plan, size_t typeSize, DevPlan* out, std::string* why);
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

  /// Bytes an image of this plan takes.
  static size_t bytesFor(const DevPlan& p);
  /// Writes the image of `p` with connections `conns` (one per p.conns entry) at
  /// `hostMem` (bytesFor(p) bytes, 16-byte aligned); the pointers inside are set for
  /// the same memory seen at device address `devMem` (== hostMem for the emulation).
  static const DevPlanImage* write(const DevPlan& p, const DevConn* conns, void* hostMem,
                                   void* devMem);
};

}  // namespace braid
