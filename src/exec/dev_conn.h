// DevConn: one end of a connection's FIFO as the CUDA executor's kernels see it.
//
// The FIFO is the same FifoLayout region the host executor uses (src/exec/fifo.h): a
// header with tail/head/closed counters, a SlotInfo per slot, then the slots. For the
// CUDA executor the region lives in memory the GPU can reach:
//   * p2p: device memory of the receiving rank (cudaMalloc), opened by the sender with
//     CUDA IPC (another process) or used as is (same process);
//   * shm: the host shared-memory segment, registered with CUDA (pinned, mapped);
//   * net: the proxy's host FIFO, registered likewise; the proxy thread moves the
//     bytes between it and the socket.
// All pointers below are device-accessible addresses of that region (for host memory,
// the mapped device pointer from cudaHostGetDevicePointer; on the host emulation, the
// plain address). Slots carry no direct entries on this path (SlotInfo::direct == 0).
// Part of the connection interface (src/exec/transport.h: a transport fills it in), so it
// lives with the executor core; the kernels (src/device) read it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "src/exec/fifo.h"

namespace braid {

struct DevConn {
  uint64_t* tail = nullptr;    ///< FifoHeader::tail (written by the sender only)
  uint64_t* head = nullptr;    ///< FifoHeader::head (written by the receiver only)
  uint32_t* closed = nullptr;  ///< FifoHeader::closed (nonzero: an end aborted)
  SlotInfo* slots = nullptr;   ///< nslots entries
  char* data = nullptr;        ///< nslots * slotBytes bytes
  uint32_t nslots = 0;
  uint32_t hostMem = 0;        ///< 1: the region is host memory (system-scope ordering)
  uint64_t slotBytes = 0;

  bool valid() const { return tail != nullptr; }
  /// The view of a FifoLayout region whose header starts at `region` (an address the
  /// executing side may dereference; nslots/slotBytes as the region was made with).
  static DevConn at(void* region, uint32_t nslots, uint64_t slotBytes, bool hostMem) {
    DevConn c;
    char* base = static_cast<char*>(region);
    c.tail = reinterpret_cast<uint64_t*>(base + offsetof(FifoHeader, tail));
    c.head = reinterpret_cast<uint64_t*>(base + offsetof(FifoHeader, head));
    c.closed = reinterpret_cast<uint32_t*>(base + offsetof(FifoHeader, closed));
    c.slots = reinterpret_cast<SlotInfo*>(base + sizeof(FifoHeader));
    c.data = base + FifoLayout::dataOffset(nslots);
    c.nslots = nslots;
    c.slotBytes = slotBytes;
    c.hostMem = hostMem ? 1u : 0u;
    return c;
  }
};

static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<uint32_t>) == 4,
              "FifoHeader counters must be plain words for the device view");

}  // namespace braid
