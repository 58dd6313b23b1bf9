// launchDevKernel: picks the kernel for (type, reduction). The typed kernels are
// instantiated in dev_kernel_{int,wide,narrow}.cu (compiled in parallel); the
// copy-only kernel of the non-reducing collectives is here.
#include <mutex>
#include <set>

#include "src/device/kernels/kernel_impl.cuh"

namespace braid {
namespace devkern {

// Defined in the other kernel files: ncclInternalError for a type they do not hold.
ncclResult_t launchInt(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s);
ncclResult_t launchWide(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s);
ncclResult_t launchNarrow(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s);
cudaError_t preloadInt();
cudaError_t preloadWide();
cudaError_t preloadNarrow();

}  // namespace devkern

ncclResult_t preloadDevKernels() {
  // One process-wide lock, held while loading: a thread that finds the device done
  // knows every kernel is loaded, and no executor kernel of this process can be
  // running on a device that is still loading (every launch comes after this).
  static std::mutex mu;
  static std::set<int>* done = new std::set<int>();  // leaked: used until exit
  int dev = -1;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return setError(ncclUnhandledCudaError, nullptr, "loading the CUDA executor's kernels: "
                    "cudaGetDevice failed: %s", cudaGetErrorString(e));
  }
  std::lock_guard<std::mutex> lock(mu);
  if (done->count(dev)) return ncclSuccess;
  e = devkern::preload<devred::ByteTraits, DevRed::kNone>();
  if (e == cudaSuccess) e = devkern::preloadInt();
  if (e == cudaSuccess) e = devkern::preloadWide();
  if (e == cudaSuccess) e = devkern::preloadNarrow();
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return setError(ncclUnhandledCudaError, nullptr, "loading the CUDA executor's kernels on "
                    "device %d failed: %s (%s); was Braid built for this GPU's architecture "
                    "(BRAID_CUDA_ARCHS)?", dev, cudaGetErrorString(e), cudaGetErrorName(e));
  }
  done->insert(dev);
  return ncclSuccess;
}

ncclResult_t launchDevKernel(const DevLaunch& l, ncclDataType_t type, DevRed red,
                             cudaStream_t s) {
  if (red == DevRed::kNone) return devkern::launch<devred::ByteTraits, DevRed::kNone>(l, s);
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclInt32:
    case ncclUint32:
    case ncclInt64:
    case ncclUint64: return devkern::launchInt(l, type, red, s);
    case ncclFloat32:
    case ncclFloat64:
    case ncclFloat16: return devkern::launchWide(l, type, red, s);
    case ncclBfloat16:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return devkern::launchNarrow(l, type, red, s);
    default: break;
  }
  return setError(ncclInvalidArgument, nullptr, "CUDA executor: invalid datatype %d", int(type));
}

}  // namespace braid
