// launchDevKernel when the library is built without the CUDA toolkit: there is no
// kernel to launch (the tests run the kernel code on the host: tests/device_emu/).
#include "src/config/error.h"
#include "src/device/dev_kernel.h"

namespace braid {

ncclResult_t preloadDevKernels() { return ncclSuccess; }

ncclResult_t launchDevKernel(const DevLaunch& l, ncclDataType_t type, DevRed red,
                             cudaStream_t s) {
  (void)l;
  (void)type;
  (void)red;
  (void)s;
  return setError(ncclInternalError, nullptr,
                  "the CUDA executor is not available: this Braid was built without the "
                  "CUDA toolkit (BRAID_WITH_CUDA=OFF or no nvcc), so device buffers cannot "
                  "be used");
}

}  // namespace braid
