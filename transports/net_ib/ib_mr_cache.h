// IbMrCache: memory registrations of one protection domain, shared by every comm on
// that HCA. With BRAID_IB_REG_CACHE on, registering a range that an existing region
// already covers reuses that region (reference counted), so the net transport and
// user-buffer registration may call regMr freely; regions always span whole pages.
#pragma once
#include "transports/net_ib/ibv_api.h"
#ifdef BRAID_HAVE_IBVERBS
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "nccl.h"

namespace braid {
namespace ib {

/// One registered region; an mhandle of the IB net points to one.
struct IbMr {
  ibv_mr* mr = nullptr;
  uintptr_t begin = 0;  ///< page-aligned start of the registered range
  uintptr_t end = 0;    ///< page-aligned end
  int refs = 0;
  bool shared = false;  ///< in the cache: other regMr calls may return it too
};

class IbMrCache {
 public:
  IbMrCache(const IbvApi* api, ibv_pd* pd, const char* devName)
      : api_(api), pd_(pd), devName_(devName) {}
  IbMrCache(const IbMrCache&) = delete;
  IbMrCache& operator=(const IbMrCache&) = delete;

  /// Host (or, through the provider, other virtual) memory. `useCache` false: a region
  /// of its own that nobody else gets.
  ncclResult_t reg(void* data, size_t size, bool useCache, IbMr** out);
  /// dma-buf memory (GPUDirect RDMA): never shared, the fd/offset pair is the identity.
  ncclResult_t regDmabuf(void* data, size_t size, uint64_t offset, int fd, IbMr** out);
  /// Drops one reference; the region is deregistered with its last one.
  ncclResult_t release(IbMr* mr);
  /// Regions currently registered (tests).
  size_t size();

 private:
  const IbvApi* api_;
  ibv_pd* pd_;
  const char* devName_;
  std::mutex mu_;
  std::vector<IbMr*> regions_;
};

/// Access rights of every region: the peer writes into receive buffers and FIFOs.
constexpr int kIbAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
