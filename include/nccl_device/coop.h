/* Braid's nccl_device/coop.h: cooperative groups of threads for the device API (NCCL
 * 2.30's names). A "coop" says which threads call a device-API function together:
 * each has thread_rank(), size() / num_threads() and sync().
 *   ncclCoopTile<N>  an aligned power-of-two group of lanes of one warp
 *   ncclCoopThread   one thread (ncclCoopTile<1>);  ncclCoopWarp  a warp (<32>)
 *   ncclCoopLanes    the lanes of a mask in one warp
 *   ncclCoopWarpSpan nWarps warps from warp0, synchronised on named barrier 1 + id
 *   ncclCoopCta      the whole block
 *   ncclCoopAny      any of these, chosen at run time
 */
#ifndef BRAID_NCCL_DEVICE_COOP_H_
#define BRAID_NCCL_DEVICE_COOP_H_

#include "utility.h"

#if NCCL_CHECK_CUDACC
namespace braid_dev {
__device__ __forceinline__ int lane() { return int(threadIdx.x % 32); }
__device__ __forceinline__ uint32_t lanesBelow() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}
constexpr bool isPow2(int n) { return n > 0 && (n & (n - 1)) == 0; }
}  // namespace braid_dev

template <int nThreadsPow2>
struct ncclCoopTile {
  static_assert(braid_dev::isPow2(nThreadsPow2) && nThreadsPow2 <= 32,
                "ncclCoopTile: a power of two of at most 32 threads");
  NCCL_DEVICE_INLINE int thread_rank() const { return braid_dev::lane() % nThreadsPow2; }
  NCCL_DEVICE_INLINE constexpr int size() const { return nThreadsPow2; }
  NCCL_DEVICE_INLINE constexpr int num_threads() const { return nThreadsPow2; }
  NCCL_DEVICE_INLINE uint32_t laneMask() const {
    const uint32_t first = uint32_t(braid_dev::lane()) & ~uint32_t(nThreadsPow2 - 1);
    return (nThreadsPow2 == 32 ? ~0u : ((1u << nThreadsPow2) - 1)) << first;
  }
  NCCL_DEVICE_INLINE void sync() {
    if (nThreadsPow2 > 1) __syncwarp(laneMask());
  }
};

typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

struct ncclCoopLanes {
  uint32_t lmask;
  NCCL_DEVICE_INLINE constexpr ncclCoopLanes(uint32_t m = ~0u) : lmask(m) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return __popc(lmask & braid_dev::lanesBelow()); }
  NCCL_DEVICE_INLINE int size() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE int num_threads() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE void sync() { __syncwarp(lmask); }
};

struct ncclCoopWarpSpan {
  uint32_t warp0 : 8, nWarps : 8, id : 8;
  NCCL_DEVICE_INLINE constexpr ncclCoopWarpSpan(int w0, int n, int i)
      : warp0(uint32_t(w0)), nWarps(uint32_t(n)), id(uint32_t(i)) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return int(threadIdx.x) - 32 * int(warp0); }
  NCCL_DEVICE_INLINE int size() const { return 32 * int(nWarps); }
  NCCL_DEVICE_INLINE int num_threads() const { return 32 * int(nWarps); }
  NCCL_DEVICE_INLINE void sync() { __barrier_sync_count(1 + id, 32 * nWarps); }
};

struct ncclCoopCta {
  NCCL_DEVICE_INLINE int thread_rank() const { return int(threadIdx.x); }
  NCCL_DEVICE_INLINE int size() const { return int(blockDim.x); }
  NCCL_DEVICE_INLINE int num_threads() const { return int(blockDim.x); }
  NCCL_DEVICE_INLINE void sync() { __syncthreads(); }
};

/* The lanes of the caller's warp that take part in coop. */
template <int N>
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopTile<N> coop) {
  return coop.laneMask();
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopLanes coop) { return coop.lmask; }
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopWarpSpan) { return ~0u; }
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopCta) { return ~0u; }

/* Whether every thread of coop lies in one warp (known at compile time). */
template <int N>
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopTile<N>) { return N == 1; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopLanes) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopWarpSpan) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopCta) { return false; }
template <int N>
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopTile<N>) { return true; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopLanes) { return true; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopWarpSpan) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopCta) { return false; }

/* The lanes of the caller's warp that can act together: all active ones, or -- for a
 * collective call on coop -- the coop itself where it lies in one warp, else the warp. */
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced() { return ncclCoopLanes{__activemask()}; }
template <typename Coop>
NCCL_DEVICE_INLINE ncclCoopTile<32> ncclCoopCoalesced(Coop) { return ncclCoopTile<32>(); }
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced(ncclCoopLanes coop) { return coop; }
template <int N>
NCCL_DEVICE_INLINE ncclCoopTile<N> ncclCoopCoalesced(ncclCoopTile<N> coop) { return coop; }

/* value as member `root` of coop holds it, returned to every member. entrySync: sync
 * coop first (the shared stash of a warp span or CTA may still be read). */
namespace braid_dev {
template <typename T>
struct Words {
  static constexpr int n = int((sizeof(T) + 3) / 4);
  union {
    uint32_t u[n];
    T v;
  };
  __device__ Words() {}
};
}  // namespace braid_dev
template <int N, typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopTile<N>, T value, int root, bool = true) {
  braid_dev::Words<T> w;
  w.v = value;
  for (int i = 0; i < braid_dev::Words<T>::n; i++) w.u[i] = __shfl_sync(~0u, w.u[i], root, N);
  return w.v;
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopLanes coop, T value, int root, bool = true) {
  const uint32_t m = coop.lmask;
  const int lane = root == 0 ? __ffs(m) - 1 : int(__fns(m, 0, 1 + root));
  braid_dev::Words<T> w;
  w.v = value;
  for (int i = 0; i < braid_dev::Words<T>::n; i++) w.u[i] = __shfl_sync(m, w.u[i], lane);
  return w.v;
}
NCCL_DEVICE_INLINE ulong2* ncclCoopBcast_WarpSpan_stash() {
  __shared__ ulong2 stash[15];
  return stash;
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopWarpSpan coop, T value, int root, bool entrySync = true) {
  static_assert(sizeof(T) <= sizeof(ulong2), "ncclCoopBcast: at most 16 bytes");
  if (entrySync) coop.sync();
  if (coop.thread_rank() == root) *reinterpret_cast<T*>(&ncclCoopBcast_WarpSpan_stash()[coop.id]) = value;
  coop.sync();
  return *reinterpret_cast<T*>(&ncclCoopBcast_WarpSpan_stash()[coop.id]);
}
NCCL_DEVICE_INLINE ulong2* ncclCoopBcast_Cta_stash() {
  __shared__ ulong2 stash;
  return &stash;
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopCta coop, T value, int root, bool entrySync = true) {
  static_assert(sizeof(T) <= sizeof(ulong2), "ncclCoopBcast: at most 16 bytes");
  if (entrySync) coop.sync();
  if (coop.thread_rank() == root) *reinterpret_cast<T*>(ncclCoopBcast_Cta_stash()) = value;
  coop.sync();
  return *reinterpret_cast<T*>(ncclCoopBcast_Cta_stash());
}

/* Any coop, behind a small table of its three operations. */
struct ncclCoopAny {
  struct Storage {
    alignas(alignof(void*)) char space[16];
  };
  struct VTable {
    int (*thread_rank)(void const*);
    int (*size)(void const*);
    void (*sync)(void*);
  };
  template <typename Impl>
  __device__ static int rankOf(void const* o) { return static_cast<Impl const*>(o)->thread_rank(); }
  template <typename Impl>
  __device__ static int sizeOf(void const* o) { return static_cast<Impl const*>(o)->size(); }
  template <typename Impl>
  __device__ static void syncOf(void* o) { static_cast<Impl*>(o)->sync(); }
  template <typename Impl>
  __device__ static VTable const* tableOf() {
    static_assert(sizeof(Impl) <= sizeof(Storage), "ncclCoopAny: coop too large");
    static_assert(alignof(Impl) <= alignof(Storage), "ncclCoopAny: coop over-aligned");
    static constexpr VTable t = {&rankOf<Impl>, &sizeOf<Impl>, &syncOf<Impl>};
    return &t;
  }

  Storage storage;
  VTable const* vtable;

  ncclCoopAny() = default;
  ncclCoopAny(ncclCoopAny const&) = default;
  ncclCoopAny(ncclCoopAny&&) = default;
  template <typename Impl>
  __device__ ncclCoopAny(Impl impl) {
    ::new (static_cast<void*>(&storage)) Impl(impl);
    vtable = tableOf<Impl>();
  }
  __device__ int thread_rank() const { return vtable->thread_rank(&storage); }
  __device__ int size() const { return vtable->size(&storage); }
  __device__ int num_threads() const { return vtable->size(&storage); }
  __device__ void sync() { vtable->sync(&storage); }
};
#endif /* NCCL_CHECK_CUDACC */

#endif /* BRAID_NCCL_DEVICE_COOP_H_ */
