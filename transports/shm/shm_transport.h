// Shm transport internals shared with its tests: the descriptor layout, the segment
// trailer and the peer-liveness check. The transport itself is shmTransport().
//
// A segment holds one FIFO followed by a ShmTrailer; the receiver creates it, the sender
// maps it and unlinks its name at once, so nothing stays in /dev/shm once both sides
// have mapped it (or when the receiver gives up on the sender).
//
// Device connections (ConnectContext::device, the CUDA executor's "pinned host staging"
// for GPU pairs without peer access): each end also registers its mapping with CUDA
// (pinned, mapped) and fills its side's DevConn (hostMem); the registration is undone
// before the segment is unmapped. No single-copy (process_vm_readv) entries then.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "src/exec/transport.h"

namespace braid {

/// What the receiver puts in ConnDescriptor::data.
struct ShmDescriptor {
  static constexpr uint64_t kMagic = 0x4252414944534d48ull;  // "BRAIDSMH"
  uint64_t magic;
  uint64_t size;            ///< bytes of the segment
  uint64_t creatorStart;    ///< creator's process start time (0: unknown)
  uint64_t creatorPidNs;    ///< creator's pid namespace (0: unknown)
  int32_t creatorPid;
  int32_t creatorRank;
  uint32_t nslots;
  uint32_t pad;
  uint64_t slotBytes;
  char name[128];           ///< shm_open name, "/braid-..."
};

/// Lives after the FIFO in the segment: written by the sender when it has mapped it.
struct ShmTrailer {
  /// 1 once the sender mapped the segment, 2 if it gave up (device mode: registering
  /// the segment with CUDA failed)
  alignas(64) std::atomic<uint32_t> attached;
  int32_t senderPid;
  uint64_t senderStart;
  uint64_t senderPidNs;
  uint64_t senderAddr;  ///< where this trailer is mapped in the sender's process
  /// Single-copy reads from the sender (process_vm_readv): 0 untested, 1 the receiver
  /// read the sender's trailer successfully, 2 not possible (or disabled).
  std::atomic<uint32_t> cma;
};

}  // namespace braid
