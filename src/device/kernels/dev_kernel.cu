// launchDevKernel: picks the kernel for (type, reduction). The typed kernels are
// instantiated in dev_kernel_{int,wide,narrow}.cu (compiled in parallel); the
// copy-only kernel of the non-reducing collectives is here.
#include "src/device/kernels/kernel_impl.cuh"

namespace braid {
namespace devkern {

// Defined in the other kernel files: ncclInternalError for a type they do not hold.
ncclResult_t launchInt(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s);
ncclResult_t launchWide(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s);
ncclResult_t launchNarrow(const DevLaunch& l, ncclDataType_t type, DevRed red, cudaStream_t s);

}  // namespace devkern

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
