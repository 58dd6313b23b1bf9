// LsaWindow: a window as NCCL's device API sees it (include/nccl_device/core.h).
//
// A device window's handle (ncclWindow_t) is the device address of an
// ncclWindow_vidmem, allocated when the window is registered (so the handle exists
// before a grouped registration's exchange runs) and filled once every rank's part is
// known: every member of the load/store (LSA) team -- the ranks of this process,
// contiguous in the communicator -- has its part mapped into one new address range at
// a fixed stride (vmm::mapFlat), so device code reaches member r's part at
// lsaFlatBase + r * stride + offset. Parts that cannot be mapped so (memory not from
// ncclMemAlloc/cuMem) leave lsaFlatBase NULL: the window still serves the host API, and
// device code that uses it stops with a message (nccl_device/core.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nccl.h"
#include "src/device/vmm.h"

namespace braid {

struct Comm;
struct Registration;

/// The LSA team of a communicator: `size` ranks from world rank `first`, the caller at
/// index `rank`. The ranks of the caller's process when they are contiguous and every
/// process has as many (NCCL's rail arithmetic needs equal teams); else the caller alone.
struct LsaTeam {
  int first = 0;
  int size = 1;
  int rank = 0;
};
LsaTeam lsaTeamOf(const Comm* c);

/// Whether every member of c's LSA team sits on a CUDA device this rank's device can
/// address (the same device, or a peer-capable one); *why says which member is not.
bool lsaDevicesReachable(const Comm* c, std::string* why);

class LsaWindow {
 public:
  ~LsaWindow();
  LsaWindow(const LsaWindow&) = delete;
  LsaWindow& operator=(const LsaWindow&) = delete;

  /// A zeroed ncclWindow_vidmem in device memory on `device`, with winHost = owner.
  static ncclResult_t create(int device, const void* owner, std::unique_ptr<LsaWindow>* out);

  /// After the exchange (r.peers filled): maps the LSA members' parts and fills the
  /// device struct. A part that cannot be mapped is logged (INFO) and leaves the window
  /// without a mapping; only CUDA failures on the way are errors.
  ncclResult_t map(const Comm* c, const Registration& r);

  /// The handle programs pass to kernels: the device struct's address.
  ncclWindow_t handle() const { return static_cast<ncclWindow_t>(dev_); }
  /// The mapping (base NULL when there is none).
  const vmm::FlatMap& flat() const { return flat_; }
  int lsaRank() const { return lsaRank_; }

 private:
  LsaWindow() = default;
  int device_ = -1;
  const void* owner_ = nullptr;
  struct ncclWindow_vidmem* dev_ = nullptr;
  vmm::FlatMap flat_;
  bool mapped_ = false;
  int lsaRank_ = 0;
};

}  // namespace braid
