// DevPeerArea: the words the CUDA executor's direct-access steps (algorithms/plan.h:
// kSignal .. kPeerPut) share between the ranks of one communicator, in device memory:
// per rank and program (a CUDA block), the count of signals it has posted and the
// buffers it announced with the current run's first signal.
//
// A count only grows, over the communicator's life: a program's run starts from the
// value its own slot holds (the same on every rank, since every rank runs the same
// direct-access ops, each with as many signals per program), so nothing is reset between
// calls and a CUDA Graph replays with no host involvement. A rank's slot is written by
// its own block only: the buffers with plain stores, then the count with a release
// store; peers read the count with acquire loads and then the buffers. The plan
// contract makes the buffers safe to overwrite at the next run's first signal: no peer
// reads them after posting its last signal of a run, which the owner waits for before
// it ends.
#pragma once
#include <cstdint>

namespace braid {

/// Ranks a direct-access plan on the GPU may have (block-shared peer tables).
constexpr int kDevMaxDirectRanks = 16;
/// Programs (CUDA blocks) of one plan: DevPlan's limit.
constexpr int kDevMaxPrograms = 64;

/// One rank's words for one program, alone on a 128-byte line.
struct alignas(128) DevPeerSlot {
  uint64_t signals;  ///< signals posted so far (release-stored by the owner's block)
  uint64_t send;     ///< the current run's send buffer (device address)
  uint64_t recv;     ///< its recv buffer
  uint64_t pad[13];
};
static_assert(sizeof(DevPeerSlot) == 128, "one line per slot");

/// One rank's area: a slot per program (8 KiB), zero when made.
struct DevPeerArea {
  DevPeerSlot slot[kDevMaxPrograms];
};

}  // namespace braid
