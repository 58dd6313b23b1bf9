/* Braid's nccl_device/ptr.h: ncclSymPtr<T>, an offset into a window that names the same
 * place in every member's part of it (NCCL 2.30's name and layout). */
#ifndef BRAID_NCCL_DEVICE_PTR_H_
#define BRAID_NCCL_DEVICE_PTR_H_

#include <stddef.h>
#include <stdint.h>

#include "core.h"

#ifdef __cplusplus
template <typename T>
struct ncclSymPtr {
  using ElementType = T;
  ncclWindow_t window;
  size_t offset; /* in bytes */

  NCCL_HOST_DEVICE_INLINE constexpr ncclSymPtr(ncclWindow_t w = nullptr, size_t off = 0)
      : window(w), offset(off) {}
  template <typename U>
  NCCL_HOST_DEVICE_INLINE operator ncclSymPtr<U>() const {
    return ncclSymPtr<U>(window, offset);
  }
  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr<T>& operator+=(Int d) {
    offset += ptrdiff_t(d) * ptrdiff_t(sizeof(T));
    return *this;
  }
  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr<T>& operator-=(Int d) {
    offset -= ptrdiff_t(d) * ptrdiff_t(sizeof(T));
    return *this;
  }
#if NCCL_CHECK_CUDACC
  NCCL_DEVICE_INLINE T* localPtr() const {
    return static_cast<T*>(ncclGetLocalPointer(window, offset));
  }
  NCCL_DEVICE_INLINE T* lsaPtr(int peer) const {
    return static_cast<T*>(ncclGetLsaPointer(window, offset, peer));
  }
  NCCL_DEVICE_INLINE T* peerPtr(int peer) const {
    return static_cast<T*>(ncclGetPeerPointer(window, offset, peer));
  }
  NCCL_DEVICE_INLINE T* peerPtr(ncclTeam team, int peer) const {
    return static_cast<T*>(ncclGetPeerPointer(window, offset, team, peer));
  }
  NCCL_DEVICE_INLINE T* multimemPtr(ncclMultimemHandle mm) const {
    return static_cast<T*>(ncclGetMultimemPointer(window, offset, mm));
  }
  NCCL_DEVICE_INLINE T* lsaMultimemPtr(ncclDevComm const& c) const {
    return static_cast<T*>(ncclGetLsaMultimemPointer(window, offset, c));
  }
#endif
};

template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator+(ncclSymPtr<T> p, Int d) {
  return p += d;
}
template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator-(ncclSymPtr<T> p, Int d) {
  return p -= d;
}
template <typename T>
NCCL_HOST_DEVICE_INLINE ptrdiff_t operator-(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return (ptrdiff_t(a.offset) - ptrdiff_t(b.offset)) / ptrdiff_t(sizeof(T));
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator==(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return a.window == b.window && a.offset == b.offset;
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator!=(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return !(a == b);
}

#if NCCL_CHECK_CUDACC
NCCL_DEVICE_INLINE ncclSymPtr<char> ncclGetResourceBuffer(ncclDevComm const& c,
                                                          ncclDevResourceHandle h) {
  return ncclSymPtr<char>(c.resourceWindow, ncclGetResourceBufferOffset(h));
}
#endif
#endif /* __cplusplus */

#endif /* BRAID_NCCL_DEVICE_PTR_H_ */
