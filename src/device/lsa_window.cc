// LsaWindow and the LSA team (lsa_window.h).
#include "src/device/lsa_window.h"

#include <vector>

#include "nccl_device/core.h"
#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/registration.h"
#include "src/os/cuda_rt.h"

namespace braid {

LsaTeam lsaTeamOf(const Comm* c) {
  LsaTeam t;
  t.first = c->rank;
  t.rank = 0;
  const int n = c->nranks;
  if (n <= 1) return t;
  // Blocks of consecutive ranks of one process; the team exists only when every
  // process forms exactly one block and all blocks have the same size.
  std::vector<int> starts;
  for (int r = 0; r < n; ++r)
    if (r == 0 || c->peers[size_t(r)].processHash != c->peers[size_t(r - 1)].processHash)
      starts.push_back(r);
  const int blocks = int(starts.size());
  if (n % blocks != 0) return t;
  const int size = n / blocks;
  for (int b = 0; b < blocks; ++b) {
    if (starts[size_t(b)] != b * size) return t;
    for (int b2 = 0; b2 < b; ++b2)  // a process in two blocks is not contiguous
      if (c->peers[size_t(starts[size_t(b2)])].processHash ==
          c->peers[size_t(starts[size_t(b)])].processHash)
        return t;
  }
  t.size = size;
  t.first = c->rank / size * size;
  t.rank = c->rank - t.first;
  return t;
}

bool lsaDevicesReachable(const Comm* c, std::string* why) {
  if (c->cudaDev < 0 || !cudart::available()) {
    *why = "rank " + std::to_string(c->rank) + " has no CUDA device" +
           (cudart::available() ? std::string() : " (" + cudart::unavailableReason() + ")");
    return false;
  }
  const LsaTeam t = lsaTeamOf(c);
  for (int i = 0; i < t.size; ++i) {
    const PeerInfo& p = c->peers[size_t(t.first + i)];
    if (p.cudaDev < 0) {
      *why = "LSA member rank " + std::to_string(p.rank) + " has no CUDA device";
      return false;
    }
    if (!cudart::canAccessPeer(c->cudaDev, p.cudaDev)) {
      *why = "device " + std::to_string(c->cudaDev) + " of rank " + std::to_string(c->rank) +
             " cannot address device " + std::to_string(p.cudaDev) + " of rank " +
             std::to_string(p.rank) + " (no peer access)";
      return false;
    }
  }
  return true;
}

LsaWindow::~LsaWindow() {
  if (mapped_) (void)vmm::unmapFlat(&flat_);
  if (dev_ != nullptr) {
    cudart::DeviceScope scope;
    (void)scope.enter(device_);
    (void)cudart::deviceFree(dev_);
  }
}

ncclResult_t LsaWindow::create(int device, const void* owner, std::unique_ptr<LsaWindow>* out) {
  std::unique_ptr<LsaWindow> w(new LsaWindow());
  w->device_ = device;
  w->owner_ = owner;
  cudart::DeviceScope scope;
  BRAID_CHECK(scope.enter(device));
  void* p = nullptr;
  BRAID_CHECK(cudart::deviceAlloc(&p, sizeof(ncclWindow_vidmem), "device window"));
  w->dev_ = static_cast<ncclWindow_vidmem*>(p);
  ncclWindow_vidmem host{};
  host.winHost = const_cast<void*>(owner);
  BRAID_CHECK(cudart::copyToDevice(w->dev_, &host, sizeof host));
  *out = std::move(w);
  return ncclSuccess;
}

ncclResult_t LsaWindow::map(const Comm* c, const Registration& r) {
  const LsaTeam t = lsaTeamOf(c);
  lsaRank_ = t.rank;
  std::vector<const void*> parts;
  std::string why;
  bool mappable = lsaDevicesReachable(c, &why);
  for (int i = 0; mappable && i < t.size; ++i) {
    const WindowPeer& p = r.peers[size_t(t.first + i)];
    if (p.kind != MemKind::kDevice) {
      why = "rank " + std::to_string(t.first + i) + "'s part is host memory";
      mappable = false;
    } else if (!vmm::isVmm(reinterpret_cast<const void*>(p.addr))) {
      why = "rank " + std::to_string(t.first + i) + "'s part is not cuMem memory (allocate "
            "windows with ncclMemAlloc)";
      mappable = false;
    }
    parts.push_back(reinterpret_cast<const void*>(p.addr));
  }
  cudart::DeviceScope scope;
  BRAID_CHECK(scope.enter(device_));
  if (mappable) {
    ncclResult_t res = vmm::mapFlat(parts, device_, &flat_);
    if (res == ncclSuccess) {
      mapped_ = true;
    } else {
      why = lastError(nullptr);
      mappable = false;
    }
  }
  ncclWindow_vidmem host{};
  host.winHost = const_cast<void*>(owner_);
  host.lsaRank = t.rank;
  host.worldRank = c->rank;
  if (mapped_) {
    host.lsaFlatBase = flat_.base;
    host.stride4G = flat_.stride4G;
  } else {
    BRAID_INFO(kLogReg, "window %p (%s): no load/store mapping for the device API: %s",
               r.buff, c->who().c_str(), why.c_str());
  }
  return cudart::copyToDevice(dev_, &host, sizeof host);
}

}  // namespace braid
