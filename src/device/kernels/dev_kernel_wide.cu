// The CUDA executor's kernels for the fp32, fp64 and fp16 datatypes (sum, prod, max, min).
#include "src/device/kernels/kernel_impl.cuh"

namespace braid {
namespace devkern {

ncclResult_t launchWide(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s) {
  switch (type) {
    case ncclFloat32: return launchReducing<ncclFloat32>(l, red, s);
    case ncclFloat64: return launchReducing<ncclFloat64>(l, red, s);
    case ncclFloat16: return launchReducing<ncclFloat16>(l, red, s);
    default: break;
  }
  return setError(ncclInternalError, nullptr, "CUDA executor: datatype %d is not in launchWide", int(type));
}

/// Loads every kernel of this file (see preload in kernel_impl.cuh).
cudaError_t preloadWide() {
  cudaError_t e = cudaSuccess;
  if (e == cudaSuccess) e = preloadReducing<ncclFloat32>();
  if (e == cudaSuccess) e = preloadReducing<ncclFloat64>();
  if (e == cudaSuccess) e = preloadReducing<ncclFloat16>();
  return e;
}

}  // namespace devkern
}  // namespace braid
