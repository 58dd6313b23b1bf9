#include "api.h"

#include <torch/csrc/distributed/c10d/exception.h>

namespace torch_braid {

const braidNcclApi_t& nccl() {
  static const braidNcclApi_t* api = [] {
    const braidNcclApi_t* a = braidGetNcclApi();
    TORCH_CHECK(a != nullptr && a->size >= sizeof(braidNcclApi_t),
                "torch_braid: libbraid.so is older than the header this extension was built "
                "with (API table of ", a ? a->size : 0, " bytes, need ",
                sizeof(braidNcclApi_t), "); rebuild torch_braid against the installed Braid");
    return a;
  }();
  return *api;
}

std::string describe(ncclResult_t r, const char* call, ncclComm_t comm, int rank) {
  const braidNcclApi_t& api = nccl();
  const char* last = api.getLastError(comm);
  std::string msg = std::string("braid: ") + call + " failed on rank " + std::to_string(rank) +
                    ": " + api.getErrorString(r);
  if (last != nullptr && *last != '\0') msg += std::string(": ") + last;
  return msg;
}

void check(ncclResult_t r, const char* call, ncclComm_t comm, int rank) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  C10_THROW_ERROR(DistBackendError, describe(r, call, comm, rank));
}

ncclDataType_t reductionType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kUInt32: return ncclUint32;
    case at::kUInt64: return ncclUint64;
    case at::kFloat8_e4m3fn: return ncclFloat8e4m3;
    case at::kFloat8_e5m2: return ncclFloat8e5m2;
    default: return ncclNumTypes;
  }
}

}  // namespace torch_braid
