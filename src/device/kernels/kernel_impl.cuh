// The CUDA executor's kernel (included by the kernel .cu files only): the GPU block
// policy of the interpreter (src/device/interp.h) and the __global__ template.
//
// Memory ordering on the GPU:
//  * FIFO counters of the other end are polled by thread 0 with ld.acquire.sys; the
//    block learns the outcome through shared memory after __syncthreads, so every
//    thread's later loads are ordered after the acquire.
//  * Data is read with ld.volatile (never a stale L1 line: FIFO slots are rewritten by
//    a peer every lap) and written with plain stores; after __syncthreads thread 0
//    fences with __threadfence_system() and stores tail/head with st.release.sys. The
//    system scope covers every FIFO kind: host memory (shm, the net proxy) and peer
//    GPU memory (p2p) alike.
//  * The grid barrier (DevLaunch::barrier, device memory) uses gpu-scope atomics.
//  * Direct-access signals (DevPeerSlot counts) are release-stored after a fence and
//    acquire-loaded, at GPU scope when every rank of the plan is on this GPU, at system
//    scope otherwise; peers' buffers are then read with ld.volatile like FIFO slots.
#pragma once
#include <cuda_runtime.h>

#include "src/config/error.h"
#include "src/device/dev_kernel.h"
#include "src/device/interp.h"

namespace braid {
namespace devkern {

using devinterp::PeerBufs;
using devinterp::PieceShared;
using devinterp::Vec16;

template <class T, class U>
__device__ __forceinline__ T bitCast(U u) {
  static_assert(sizeof(T) == sizeof(U), "same size");
  union {
    U u;
    T t;
  } x;
  x.u = u;
  return x.t;
}

/// A CUDA block of kDevThreads threads. Every member is __host__ __device__ so that
/// the interpreter's host/device templates may call it; only the device pass has
/// bodies (the host never runs this policy).
class GpuBlock {
 public:
  static constexpr int kUnroll = 4;
  static constexpr uint32_t kCheckEvery = 4096;

  BRAID_HD_INLINE GpuBlock(PieceShared* sh, void* cache, PeerBufs* peers)
      : sh_(sh), cache_(cache), peers_(peers) {}

#if BRAID_DEVICE_PASS
  __device__ __forceinline__ int tid() const { return int(threadIdx.x); }
  __device__ __forceinline__ int nthreads() const { return int(blockDim.x); }
  __device__ __forceinline__ void sync() { __syncthreads(); }
  __device__ __forceinline__ PieceShared& sh() { return *sh_; }
  __device__ __forceinline__ void* cacheMem() { return cache_; }
  __device__ __forceinline__ PeerBufs& peerBufs() { return *peers_; }

  template <class T>
  __device__ __forceinline__ static T ld(const T* p) {
    if constexpr (sizeof(T) == 1) {
      uint32_t r;
      asm volatile("ld.volatile.global.u8 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
      return bitCast<T>(uint8_t(r));
    } else if constexpr (sizeof(T) == 2) {
      uint16_t r;
      asm volatile("ld.volatile.global.u16 %0, [%1];" : "=h"(r) : "l"(p) : "memory");
      return bitCast<T>(r);
    } else if constexpr (sizeof(T) == 4) {
      uint32_t r;
      asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
      return bitCast<T>(r);
    } else {
      uint64_t r;
      asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(r) : "l"(p) : "memory");
      return bitCast<T>(r);
    }
  }
  template <class T>
  __device__ __forceinline__ static void st(T* p, T v) {
    *p = v;
  }
  __device__ __forceinline__ static Vec16 ld16(const void* p) {
    Vec16 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])
                 : "l"(p)
                 : "memory");
    return v;
  }
  __device__ __forceinline__ static void st16(void* p, const Vec16& v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
                 "r"(v.w[2]), "r"(v.w[3])
                 : "memory");
  }

  __device__ __forceinline__ static uint64_t ldAcquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ static uint64_t ldVolatile(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ static uint32_t ldFlag(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ static void stPlain(uint64_t* p, uint64_t v) {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ __forceinline__ static void stRelease(uint64_t* p, uint64_t v) {
    __threadfence_system();
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ __forceinline__ static void stFlag(uint32_t* p, uint32_t v) {
    __threadfence_system();
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  /// DevControl counters live in mapped host memory, where atomics may not be
  /// supported: a fenced load + store (one writer each for started/finished; progress
  /// is only a sign of life, a lost increment does not matter).
  __device__ __forceinline__ static void bump(uint64_t* p) {
    __threadfence_system();
    const uint64_t v = ldVolatile(p);
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v + 1) : "memory");
  }
  __device__ __forceinline__ static void fenceGpu() { __threadfence(); }
  __device__ __forceinline__ static uint32_t ldAcquireGpu(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ static void stReleaseGpu(uint32_t* p, uint32_t v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  /// Direct-access signals between ranks of one GPU: GPU scope (no system fence).
  __device__ __forceinline__ static uint64_t ldAcquireGpu64(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ static void stReleaseGpu64(uint64_t* p, uint64_t v) {
    __threadfence();
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ __forceinline__ static uint32_t arrive(uint32_t* p, uint32_t n) {
    uint32_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(n) : "memory");
    return old;
  }
  __device__ __forceinline__ static void reset(uint32_t* p) {
    asm volatile("st.release.gpu.global.u32 [%0], 0;" ::"l"(p) : "memory");
  }
  /// Long waits back off a little (fewer polls of host memory over PCIe).
  __device__ __forceinline__ static void pause(uint32_t polls) {
    if (polls > 1024) __nanosleep(128);
  }
#else
  // Host pass: declarations only, never called.
  int tid() const;
  int nthreads() const;
  void sync();
  PieceShared& sh();
  void* cacheMem();
  PeerBufs& peerBufs();
  template <class T>
  static T ld(const T* p);
  template <class T>
  static void st(T* p, T v);
  static Vec16 ld16(const void* p);
  static void st16(void* p, const Vec16& v);
  static uint64_t ldAcquire(const uint64_t* p);
  static uint64_t ldVolatile(const uint64_t* p);
  static uint32_t ldFlag(const uint32_t* p);
  static void stPlain(uint64_t* p, uint64_t v);
  static void stRelease(uint64_t* p, uint64_t v);
  static void stFlag(uint32_t* p, uint32_t v);
  static void bump(uint64_t* p);
  static void fenceGpu();
  static uint32_t ldAcquireGpu(const uint32_t* p);
  static void stReleaseGpu(uint32_t* p, uint32_t v);
  static uint64_t ldAcquireGpu64(const uint64_t* p);
  static void stReleaseGpu64(uint64_t* p, uint64_t v);
  static uint32_t arrive(uint32_t* p, uint32_t n);
  static void reset(uint32_t* p);
  static void pause(uint32_t polls);
#endif

 private:
  PieceShared* sh_;
  void* cache_;
  PeerBufs* peers_;
};

/// Block b runs program b of every work of the launch (see DevLaunch).
template <class Tr, DevRed R>
__global__ void __launch_bounds__(kDevThreads) devKernel(DevLaunch l) {
  __shared__ PieceShared sh;
  __shared__ alignas(16) unsigned char cache[devinterp::kConnCacheBytes];
  __shared__ PeerBufs peers;
  GpuBlock b(&sh, cache, &peers);
  devinterp::runDevBlock<Tr, R>(b, l, blockIdx.x);
}

/// Enqueues devKernel<Tr, R> for l on s.
template <class Tr, DevRed R>
ncclResult_t launch(const DevLaunch& l, cudaStream_t s) {
  if (l.nBlocks == 0) return ncclSuccess;
  // cudaLaunchKernel's own result: cudaGetLastError() would also report (and clear)
  // an earlier error the application left on this thread.
  DevLaunch arg = l;
  void* args[] = {&arg};
  const cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(&devKernel<Tr, R>),
                                         dim3(l.nBlocks), dim3(kDevThreads), args, 0, s);
  if (e != cudaSuccess)
    return setError(ncclUnhandledCudaError, nullptr,
                    "launching the CUDA executor's kernel (%u blocks) failed: %s (%s)",
                    l.nBlocks, cudaGetErrorString(e), cudaGetErrorName(e));
  return ncclSuccess;
}

/// Makes CUDA load devKernel<Tr, R> now (cudaFuncGetAttributes). With lazy module
/// loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) a kernel is
/// otherwise loaded at its first launch, and loading may wait for the context's
/// running kernels: a running executor kernel that waits for a peer rank's kernel in
/// the same process (thread ranks) then never sees it start, a deadlock. Loading during
/// a stream capture is also best avoided. See preloadDevKernels.
template <class Tr, DevRed R>
cudaError_t preload() {
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(&devKernel<Tr, R>));
}

/// preload() for the four reductions of one datatype.
template <int T>
cudaError_t preloadReducing() {
  using Tr = devred::DevTraits<T>;
  cudaError_t e = preload<Tr, DevRed::kSum>();
  if (e == cudaSuccess) e = preload<Tr, DevRed::kProd>();
  if (e == cudaSuccess) e = preload<Tr, DevRed::kMax>();
  if (e == cudaSuccess) e = preload<Tr, DevRed::kMin>();
  return e;
}

/// The four reductions of one datatype.
template <int T>
ncclResult_t launchReducing(const DevLaunch& l, DevRed red, cudaStream_t s) {
  using Tr = devred::DevTraits<T>;
  switch (red) {
    case DevRed::kSum: return launch<Tr, DevRed::kSum>(l, s);
    case DevRed::kProd: return launch<Tr, DevRed::kProd>(l, s);
    case DevRed::kMax: return launch<Tr, DevRed::kMax>(l, s);
    case DevRed::kMin: return launch<Tr, DevRed::kMin>(l, s);
    default: break;
  }
  return setError(ncclInternalError, nullptr, "CUDA executor: no kernel for reduction %d",
                  int(red));
}

}  // namespace devkern
}  // namespace braid
