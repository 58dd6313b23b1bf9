// Vmm: device memory through CUDA's virtual memory management (cuMemCreate/cuMemMap), and
// the flat map of a team's windows that NCCL's device API reads (peer p's window at
// lsaFlatBase + p * (stride4G << 32)), laid out by planFlat, plain arithmetic. The driver
// is reached through the runtime's entry points (cuda_rt.h); built without CUDA every call
// fails with ncclInvalidUsage and supported() is false.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nccl.h"

namespace braid {
namespace vmm {

/// Whether device `dev` supports the VMM API and the driver's entry points were found.
bool supported(int dev);
/// `size` bytes (rounded up to the recommended granularity) on device `dev`, readable and
/// writable from `dev` and every device that can access it as a peer; exportable as a
/// POSIX file descriptor where the device offers that.
ncclResult_t memAlloc(void** ptr, size_t size, int dev);
/// Unmaps and frees a memAlloc allocation (null: nothing to do).
ncclResult_t memFree(void* ptr);
/// Whether ptr is the start of a live memAlloc allocation.
bool owns(const void* ptr);
/// Whether ptr lies in a VMM (cuMem) mapping -- memAlloc's or the user's -- which mapFlat
/// can map. Records no error (a plain "no").
bool isVmm(const void* ptr);

/// A reserved address range and the allocations mapped into it (vmm.cc's bookkeeping).
struct Reservation {
  uintptr_t start = 0;
  size_t size = 0;
  int dev = -1;                                      ///< the device that made it
  std::vector<std::pair<uintptr_t, size_t>> pieces;  ///< mapped (address, bytes)
};

/// A team's windows mapped into one reserved range (mapFlat); give it back with unmapFlat.
struct FlatMap {
  FlatMap() = default;
  FlatMap(const FlatMap&) = delete;  // one owner: unmapped once
  FlatMap& operator=(const FlatMap&) = delete;
  FlatMap(FlatMap&&) = default;
  FlatMap& operator=(FlatMap&&) = default;
  char* base = nullptr;   ///< lsaFlatBase: peer p's window starts at base + p * stride
  uint32_t stride4G = 0;  ///< the stride in units of 4 GiB

 private:
  friend ncclResult_t mapFlat(const std::vector<const void*>& peers, int dev, FlatMap* out);
  friend ncclResult_t unmapFlat(FlatMap* m);
  Reservation range_;
};

/// Maps the buffers `peers[p]` (device pointers valid in this process, each in a VMM
/// allocation: memAlloc's or the user's own cuMemCreate/cuMemMap, else ncclInvalidArgument)
/// into one new range, peer p's buffer at base + p * stride, readable/writable from `dev`.
/// The whole mapping holding peers[p] is mapped again: a window must not run past it.
ncclResult_t mapFlat(const std::vector<const void*>& peers, int dev, FlatMap* out);
/// Unmaps every piece and frees the range; *m is left empty (unmapping it again is a no-op).
ncclResult_t unmapFlat(FlatMap* m);

/// Where mapFlat puts things, as offsets from the start of the reservation.
struct FlatLayout {
  size_t reserve = 0;         ///< bytes to reserve (a multiple of g)
  size_t baseOffset = 0;      ///< where lsaFlatBase lies in the reservation
  uint64_t stride = 0;        ///< between peers' windows: a multiple of 4 GiB
  std::vector<size_t> mapAt;  ///< where peer p's allocation is mapped (multiples of g)
};

/// The layout for allocations of allocSize[p] bytes whose windows start offsetInAlloc[p]
/// bytes into them, mapped at multiples of g (a power of two <= 4 GiB): mapAt[p] +
/// offsetInAlloc[p] == baseOffset + p * stride. False (*why names the peer) when a window
/// is outside its allocation, offsets differ modulo g (no base aligns every allocation
/// then), or sizes overflow.
bool planFlat(const std::vector<size_t>& allocSize, const std::vector<size_t>& offsetInAlloc,
              size_t g, FlatLayout* out, std::string* why);

}  // namespace vmm
}  // namespace braid
