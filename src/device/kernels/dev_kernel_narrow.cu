// The CUDA executor's kernels for the bf16 and fp8 datatypes (sum, prod, max, min).
#include "src/device/kernels/kernel_impl.cuh"

namespace braid {
namespace devkern {

ncclResult_t launchNarrow(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s) {
  switch (type) {
    case ncclBfloat16: return launchReducing<ncclBfloat16>(l, red, s);
    case ncclFloat8e4m3: return launchReducing<ncclFloat8e4m3>(l, red, s);
    case ncclFloat8e5m2: return launchReducing<ncclFloat8e5m2>(l, red, s);
    default: break;
  }
  return setError(ncclInternalError, nullptr, "CUDA executor: datatype %d is not in launchNarrow", int(type));
}

/// Loads every kernel of this file (see preload in kernel_impl.cuh).
cudaError_t preloadNarrow() {
  cudaError_t e = cudaSuccess;
  if (e == cudaSuccess) e = preloadReducing<ncclBfloat16>();
  if (e == cudaSuccess) e = preloadReducing<ncclFloat8e4m3>();
  if (e == cudaSuccess) e = preloadReducing<ncclFloat8e5m2>();
  return e;
}

}  // namespace devkern
}  // namespace braid
