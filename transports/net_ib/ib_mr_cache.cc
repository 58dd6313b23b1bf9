// Registration cache of the IB net (see ib_mr_cache.h).
#include "transports/net_ib/ib_mr_cache.h"
#ifdef BRAID_HAVE_IBVERBS
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/config/error.h"

namespace braid {
namespace ib {
namespace {

uintptr_t pageSize() {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

ncclResult_t IbMrCache::reg(void* data, size_t size, bool useCache, IbMr** out) {
  // Whole pages: the region then covers every later request inside those pages, and
  // a zero-byte request still gets a valid key.
  const uintptr_t page = pageSize();
  const uintptr_t addr = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = addr & ~(page - 1);
  const uintptr_t end = std::max(begin + page, (addr + size + page - 1) & ~(page - 1));
  std::lock_guard<std::mutex> lock(mu_);
  if (useCache) {
    for (IbMr* r : regions_) {
      if (r->shared && r->begin <= begin && end <= r->end) {
        ++r->refs;
        *out = r;
        return ncclSuccess;
      }
    }
  }
  ibv_mr* mr = api_->regMr(pd_, reinterpret_cast<void*>(begin), end - begin, kIbAccess);
  if (!mr)
    return setError(ncclSystemError, nullptr, "IB %s: ibv_reg_mr of %zu bytes at %p failed: %s",
                    devName_, size_t(end - begin), reinterpret_cast<void*>(begin), strerror(errno));
  IbMr* r = new IbMr;
  r->mr = mr;
  r->begin = begin;
  r->end = end;
  r->refs = 1;
  r->shared = useCache;
  regions_.push_back(r);
  *out = r;
  return ncclSuccess;
}

ncclResult_t IbMrCache::regDmabuf(void* data, size_t size, uint64_t offset, int fd, IbMr** out) {
  if (!api_->regDmabufMr)
    return setError(ncclInvalidUsage, nullptr,
                    "IB %s: this libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)", devName_);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(data);
  ibv_mr* mr = api_->regDmabufMr(pd_, offset, size, addr, fd, kIbAccess);
  if (!mr)
    return setError(ncclSystemError, nullptr,
                    "IB %s: ibv_reg_dmabuf_mr of %zu bytes (fd %d, offset %llu) failed: %s",
                    devName_, size, fd, static_cast<unsigned long long>(offset), strerror(errno));
  IbMr* r = new IbMr;
  r->mr = mr;
  r->begin = addr;
  r->end = addr + size;
  r->refs = 1;
  std::lock_guard<std::mutex> lock(mu_);
  regions_.push_back(r);
  *out = r;
  return ncclSuccess;
}

ncclResult_t IbMrCache::release(IbMr* mr) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = std::find(regions_.begin(), regions_.end(), mr);
  if (it == regions_.end())
    return setError(ncclInvalidArgument, nullptr, "IB %s: deregMr of an unknown memory handle %p",
                    devName_, static_cast<void*>(mr));
  if (--mr->refs > 0) return ncclSuccess;
  regions_.erase(it);
  lock.unlock();
  int rc = api_->deregMr(mr->mr);
  delete mr;
  if (rc != 0)
    return setError(ncclSystemError, nullptr, "IB %s: ibv_dereg_mr failed: %s", devName_,
                    strerror(rc));
  return ncclSuccess;
}

size_t IbMrCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
