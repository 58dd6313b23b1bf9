// Host/device portability macros for the code the CUDA executor's kernels share with
// host code (the plan interpreter, the FIFO protocol, the reduction functors): compiled
// by nvcc for the GPU, and by the host compiler for the host emulation that unit-tests
// the same logic on machines without a GPU.
#pragma once

#if defined(__CUDACC__)
#define BRAID_HD __host__ __device__
#define BRAID_HD_INLINE __host__ __device__ __forceinline__
#else
#define BRAID_HD
#define BRAID_HD_INLINE inline __attribute__((always_inline))
#endif

/// True while compiling device code (nvcc's device pass).
#if defined(__CUDA_ARCH__)
#define BRAID_DEVICE_PASS 1
#else
#define BRAID_DEVICE_PASS 0
#endif
