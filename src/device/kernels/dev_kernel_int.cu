// The CUDA executor's kernels for the integer datatypes (sum, prod, max, min).
#include "src/device/kernels/kernel_impl.cuh"

namespace braid {
namespace devkern {

ncclResult_t launchInt(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s) {
  switch (type) {
    case ncclInt8: return launchReducing<ncclInt8>(l, red, s);
    case ncclUint8: return launchReducing<ncclUint8>(l, red, s);
    case ncclInt32: return launchReducing<ncclInt32>(l, red, s);
    case ncclUint32: return launchReducing<ncclUint32>(l, red, s);
    case ncclInt64: return launchReducing<ncclInt64>(l, red, s);
    case ncclUint64: return launchReducing<ncclUint64>(l, red, s);
    default: break;
  }
  return setError(ncclInternalError, nullptr, "CUDA executor: datatype %d is not in launchInt", int(type));
}

/// Loads every kernel of this file (see preload in kernel_impl.cuh).
cudaError_t preloadInt() {
  cudaError_t e = cudaSuccess;
  if (e == cudaSuccess) e = preloadReducing<ncclInt8>();
  if (e == cudaSuccess) e = preloadReducing<ncclUint8>();
  if (e == cudaSuccess) e = preloadReducing<ncclInt32>();
  if (e == cudaSuccess) e = preloadReducing<ncclUint32>();
  if (e == cudaSuccess) e = preloadReducing<ncclInt64>();
  if (e == cudaSuccess) e = preloadReducing<ncclUint64>();
  return e;
}

}  // namespace devkern
}  // namespace braid
