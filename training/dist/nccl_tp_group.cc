// TpGroup over an NCCL communicator (blocking collectives on the null stream).
#include "training/dist/nccl_tp_group.h"

#include <stdexcept>
#include <string>
#include <type_traits>

namespace braid {
namespace train {
namespace {

template <class T>
constexpr ncclDataType_t ncclTypeOf() {
  static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value,
                "NcclTpGroup supports float and double");
  return std::is_same<T, float>::value ? ncclFloat32 : ncclFloat64;
}

}  // namespace

template <class T>
NcclTpGroup<T>::NcclTpGroup(ncclComm_t comm) : comm_(comm) {
  if (!comm) throw std::runtime_error("NcclTpGroup: null communicator");
  check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
  check(ncclCommCount(comm_, &size_), "ncclCommCount");
}

template <class T>
void NcclTpGroup<T>::check(ncclResult_t r, const char* what) const {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(comm_);
  throw std::runtime_error(std::string("NcclTpGroup: ") + what + " failed: " +
                           ncclGetErrorString(r) + (last && *last ? std::string(" (") + last + ")"
                                                                  : std::string()));
}

template <class T>
void NcclTpGroup<T>::allReduceSum(T* buf, size_t n) {
  check(ncclAllReduce(buf, buf, n, ncclTypeOf<T>(), ncclSum, comm_, nullptr), "ncclAllReduce(sum)");
}

template <class T>
void NcclTpGroup<T>::allReduceMax(T* buf, size_t n) {
  check(ncclAllReduce(buf, buf, n, ncclTypeOf<T>(), ncclMax, comm_, nullptr), "ncclAllReduce(max)");
}

template <class T>
void NcclTpGroup<T>::allGather(const T* in, T* out, size_t n) {
  check(ncclAllGather(in, out, n, ncclTypeOf<T>(), comm_, nullptr), "ncclAllGather");
}

template class NcclTpGroup<float>;
template class NcclTpGroup<double>;

}  // namespace train
}  // namespace braid
