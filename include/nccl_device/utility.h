/* Braid's nccl_device/utility.h: the macros the device API's headers share, and the
 * few device helpers behind them (namespace braid_dev: internal, not NCCL API).
 *
 * Written for Braid; the names that programs may see (NCCL_DEVICE_INLINE,
 * NCCL_HOST_DEVICE_INLINE, NCCL_CHECK_CUDACC, NCCL_EXTERN_C, NCCL_IR_EXTERN_C) are
 * NCCL 2.30's. Host-only code (no nvcc) sees the types and host functions; the
 * device functions exist only under nvcc (NCCL_CHECK_CUDACC 1).
 */
#ifndef BRAID_NCCL_DEVICE_UTILITY_H_
#define BRAID_NCCL_DEVICE_UTILITY_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define NCCL_CHECK_CUDACC 1
#else
#define NCCL_CHECK_CUDACC 0
#endif

#if NCCL_CHECK_CUDACC
#define NCCL_DEVICE_INLINE __device__ __forceinline__
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#ifndef __host__
#define __host__
#endif
#define NCCL_DEVICE_INLINE
#define NCCL_HOST_DEVICE_INLINE inline __attribute__((always_inline))
#endif

#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#define NCCL_IF_CONSTEXPR constexpr
#else
#define NCCL_EXTERN_C
#define NCCL_IF_CONSTEXPR
#endif
#define NCCL_IR_EXTERN_C

#if NCCL_CHECK_CUDACC
#include <cuda/atomic>
#include <new>
#include <stdio.h>

namespace braid_dev {

/// Spins between two looks at the abort word (a host-mapped word: each look is a trip
/// over the bus, so not every spin).
constexpr uint32_t kAbortCheckSpins = 10000;

/// Whether the communicator was aborted, looked at once every kAbortCheckSpins calls.
__device__ __forceinline__ bool aborted(uint32_t* abortFlag, uint32_t& spins) {
  if (++spins < kAbortCheckSpins) return false;
  spins = 0;
  return abortFlag != nullptr &&
         cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*abortFlag).load(
             cuda::memory_order_relaxed) != 0;
}

/// A device-API call that cannot be carried out: prints what and stops the kernel (the
/// launch then fails with cudaErrorLaunchFailure), rather than computing on a bad
/// address or waiting for ever.
__device__ __noinline__ inline void fail(const char* what) {
  printf("Braid device API: %s (block %d, thread %d)\n", what, int(blockIdx.x),
         int(threadIdx.x));
  __trap();
}

/// base + n * 4 GiB: the stride of a flat window mapping is kept in units of 4 GiB.
__device__ __forceinline__ char* add4G(char* base, uint32_t n) {
  return base + (uint64_t(n) << 32);
}

/// The release part of an order (for the arriving side of a barrier).
__device__ __forceinline__ cuda::memory_order releasePart(cuda::memory_order o) {
  return (o == cuda::memory_order_release || o == cuda::memory_order_acq_rel ||
          o == cuda::memory_order_seq_cst) ? cuda::memory_order_release
                                           : cuda::memory_order_relaxed;
}

/// The acquire part of an order (for the waiting side of a barrier).
__device__ __forceinline__ cuda::memory_order acquirePart(cuda::memory_order o) {
  return (o == cuda::memory_order_acquire || o == cuda::memory_order_acq_rel ||
          o == cuda::memory_order_seq_cst || o == cuda::memory_order_consume)
             ? cuda::memory_order_acquire : cuda::memory_order_relaxed;
}

/// Whether a wrapping counter `got` has reached `goal` (within half the range).
__device__ __forceinline__ bool reached(uint32_t got, uint32_t goal) {
  return got - goal <= (uint32_t(-1) >> 1);
}

/// Storage for an object built later or not at all (the barrier sessions' parts).
template <typename T>
struct Maybe {
  alignas(T) unsigned char bytes[sizeof(T)];
  bool present = false;
  __device__ T& get() { return *reinterpret_cast<T*>(bytes); }
  template <typename... A>
  __device__ void emplace(A&&... a) {
    ::new (static_cast<void*>(bytes)) T(static_cast<A&&>(a)...);
    present = true;
  }
  __device__ ~Maybe() {
    if (present) get().~T();
  }
};

}  // namespace braid_dev
#endif  // NCCL_CHECK_CUDACC

#endif  // BRAID_NCCL_DEVICE_UTILITY_H_
