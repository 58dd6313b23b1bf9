/* Braid's nccl_device/gin.h: GPU-initiated networking (NCCL 2.30's ncclGin API).
 *
 * Braid's device communicator has no GIN connections yet: ncclCommQueryProperties
 * says ginType NCCL_GIN_TYPE_NONE, and ncclDevCommCreate refuses requirements that
 * need GIN (signals, counters, GIN barriers, ginForceEnable, a world barrier across
 * LSA teams) with a message. The class below has NCCL's members so that programs that
 * use it compile; constructing one is harmless, and every operation stops the kernel
 * with a message naming it (a defined failure, never a silent wrong answer or a hang).
 */
#ifndef BRAID_NCCL_DEVICE_GIN_H_
#define BRAID_NCCL_DEVICE_GIN_H_

#include "coop.h"
#include "core.h"
#include "ptr.h"

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
  NCCL_NET_DEVICE_GIN_GPI = 4,
} ncclNetDeviceType;

typedef enum ncclGinSignalOp_t {
  ncclGinSignalInc = 0,
  ncclGinSignalAdd,
} ncclGinSignalOp_t;

#ifdef __cplusplus
enum ncclGinOptFlags {
  ncclGinOptFlagsDefault = 0,
  ncclGinOptFlagsMaySkipCreditCheck = (1 << 0),
  ncclGinOptFlagsAggregateRequests = (1 << 1),
};

enum ncclGinResourceSharingMode : uint8_t {
  NCCL_GIN_RESOURCE_SHARING_GPU = 0,
  NCCL_GIN_RESOURCE_SHARING_CTA = 1,
  NCCL_GIN_RESOURCE_SHARING_THREAD = 2,
};

#define NCCL_GIN_BACKEND_MASK_ALL                                             \
  ((1u << (unsigned)NCCL_NET_DEVICE_GIN_PROXY) |                              \
   (1u << (unsigned)NCCL_NET_DEVICE_GIN_GDAKI) | (1u << (unsigned)NCCL_NET_DEVICE_GIN_GPI))
#endif

#if NCCL_CHECK_CUDACC
struct ncclGinDescriptorSmem; /* a type programs place in __shared__ memory */

/* Actions a put or signal carries out at the target (remote) or here (local). */
struct ncclGin_None {};
struct ncclGin_StrongVASignalInc { ncclWindow_t signalWindow; size_t signalOffset; };
struct ncclGin_WeakVASignalInc { ncclWindow_t signalWindow; size_t signalOffset; };
struct ncclGin_VASignalInc { ncclWindow_t signalWindow; size_t signalOffset; };
struct ncclGin_StrongVASignalAdd { ncclWindow_t signalWindow; size_t signalOffset; uint64_t value; };
struct ncclGin_WeakVASignalAdd { ncclWindow_t signalWindow; size_t signalOffset; uint64_t value; };
struct ncclGin_VASignalAdd { ncclWindow_t signalWindow; size_t signalOffset; uint64_t value; };
struct ncclGin_StrongSignalAdd { ncclGinSignal_t signal; uint64_t value; };
struct ncclGin_WeakSignalAdd { ncclGinSignal_t signal; uint64_t value; };
struct ncclGin_SignalAdd { ncclGinSignal_t signal; uint64_t value; };
struct ncclGin_StrongSignalInc { ncclGinSignal_t signal; };
struct ncclGin_WeakSignalInc { ncclGinSignal_t signal; };
struct ncclGin_SignalInc { ncclGinSignal_t signal; };
struct ncclGin_CounterInc { ncclGinCounter_t counter; };
struct ncclGin_WeakCounterInc { ncclGinCounter_t counter; };
struct ncclGin_DescriptorSmem { ncclGinDescriptorSmem* descriptor; };
struct ncclGin_SegmentDevice {};
struct ncclGin_SegmentMixed {};
struct ncclGin_SegmentHostNuma {};

namespace braid_dev {
__device__ __noinline__ inline void noGin(const char* op) {
  printf("Braid device API: ncclGin::%s: this device communicator has no GIN connections "
         "(Braid does not offer GPU-initiated networking yet; ncclCommQueryProperties "
         "reports ginType NCCL_GIN_TYPE_NONE)\n", op);
  __trap();
}
}  // namespace braid_dev

template <unsigned backendMask>
struct ncclGin_BackendMask {
  ncclDevComm const& comm;
  uint32_t nConnections : 8, connectionId : 8, _ginBackend : 8;
  uint32_t contextId;
  ncclGinResourceSharingMode resourceSharingMode;
  void* _ginHandle;
  uint64_t* _signalShadows;

  NCCL_DEVICE_INLINE ncclGin_BackendMask(
      ncclDevComm const& c, int contextIndex,
      ncclGinResourceSharingMode mode = NCCL_GIN_RESOURCE_SHARING_GPU)
      : comm(c), nConnections(c.ginConnectionCount), connectionId(0), _ginBackend(0),
        contextId(uint32_t(contextIndex)), resourceSharingMode(mode), _ginHandle(nullptr),
        _signalShadows(c.ginSignalShadows) {}

  template <typename Coop = ncclCoopThread, typename Desc = ncclGin_None>
  NCCL_DEVICE_INLINE void flushAsync(ncclTeam, uint32_t, ncclGinRequest_t*, Coop = ncclCoopThread{},
                                     uint32_t = ncclGinOptFlagsDefault, Desc = ncclGin_None{}) const {
    braid_dev::noGin("flushAsync");
  }
  template <typename Coop = ncclCoopThread, typename Desc = ncclGin_None>
  NCCL_DEVICE_INLINE void wait(ncclGinRequest_t&, Coop = ncclCoopThread{}, Desc = ncclGin_None{},
                               cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("wait");
  }
  template <typename Coop = ncclCoopThread, typename Desc = ncclGin_None,
            typename Segment = ncclGin_SegmentDevice>
  NCCL_DEVICE_INLINE void get(ncclTeam, int, ncclWindow_t, size_t, ncclWindow_t, size_t, size_t,
                              Coop = ncclCoopThread{}, Desc = ncclGin_None{},
                              uint32_t = ncclGinOptFlagsDefault, Segment = ncclGin_SegmentDevice{}) const {
    braid_dev::noGin("get");
  }
  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread, typename Desc = ncclGin_None,
            typename Segment = ncclGin_SegmentDevice>
  NCCL_DEVICE_INLINE void put(ncclTeam, int, ncclWindow_t, size_t, ncclWindow_t, size_t, size_t,
                              RemoteAction = ncclGin_None{}, LocalAction = ncclGin_None{},
                              Coop = ncclCoopThread{}, Desc = ncclGin_None{},
                              cuda::thread_scope = cuda::thread_scope_thread,
                              cuda::thread_scope = cuda::thread_scope_device,
                              uint32_t = ncclGinOptFlagsDefault, Segment = ncclGin_SegmentDevice{}) const {
    braid_dev::noGin("put");
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread, typename Desc = ncclGin_None,
            typename Segment = ncclGin_SegmentDevice>
  NCCL_DEVICE_INLINE void put(ncclTeam, int, ncclSymPtr<T>, ncclSymPtr<T>, size_t,
                              RemoteAction = ncclGin_None{}, LocalAction = ncclGin_None{},
                              Coop = ncclCoopThread{}, Desc = ncclGin_None{},
                              cuda::thread_scope = cuda::thread_scope_thread,
                              cuda::thread_scope = cuda::thread_scope_device,
                              uint32_t = ncclGinOptFlagsDefault, Segment = ncclGin_SegmentDevice{}) const {
    braid_dev::noGin("put");
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename Desc = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam, int, ncclWindow_t, size_t, T,
                                   RemoteAction = ncclGin_None{}, Coop = ncclCoopThread{},
                                   Desc = ncclGin_None{},
                                   cuda::thread_scope = cuda::thread_scope_thread,
                                   cuda::thread_scope = cuda::thread_scope_device,
                                   uint32_t = ncclGinOptFlagsDefault) const {
    braid_dev::noGin("putValue");
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename Desc = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam, int, ncclSymPtr<T>, T, RemoteAction = ncclGin_None{},
                                   Coop = ncclCoopThread{}, Desc = ncclGin_None{},
                                   cuda::thread_scope = cuda::thread_scope_thread,
                                   cuda::thread_scope = cuda::thread_scope_device,
                                   uint32_t = ncclGinOptFlagsDefault) const {
    braid_dev::noGin("putValue");
  }
  template <typename RemoteAction, typename Coop = ncclCoopThread, typename Desc = ncclGin_None>
  NCCL_DEVICE_INLINE void signal(ncclTeam, int, RemoteAction, Coop = ncclCoopThread{},
                                 Desc = ncclGin_None{},
                                 cuda::thread_scope = cuda::thread_scope_thread,
                                 cuda::thread_scope = cuda::thread_scope_device,
                                 uint32_t = ncclGinOptFlagsDefault) const {
    braid_dev::noGin("signal");
  }
  template <typename Coop, typename Desc = ncclGin_None>
  NCCL_DEVICE_INLINE void flush(Coop, cuda::memory_order = cuda::memory_order_acquire,
                                Desc = ncclGin_None{}) const {
    braid_dev::noGin("flush");
  }
  NCCL_DEVICE_INLINE uint64_t readCounter(ncclGinCounter_t, int = 56,
                                          cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("readCounter");
    return 0;
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitCounter(Coop, ncclGinCounter_t, uint64_t, int = 56,
                                      cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("waitCounter");
  }
  NCCL_DEVICE_INLINE uint64_t* getSignalShadowPtr(ncclGinSignal_t) const {
    braid_dev::noGin("getSignalShadowPtr");
    return nullptr;
  }
  NCCL_DEVICE_INLINE void increaseSignalShadow(ncclGinSignal_t, uint64_t) const {
    braid_dev::noGin("increaseSignalShadow");
  }
  NCCL_DEVICE_INLINE uint64_t readSignal(ncclGinSignal_t, int = 64,
                                         cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("readSignal");
    return 0;
  }
  NCCL_DEVICE_INLINE uint64_t readSignal(ncclWindow_t, size_t, int = 64,
                                         cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("readSignal");
    return 0;
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop, ncclGinSignal_t, uint64_t, int = 64,
                                     cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("waitSignal");
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop, ncclWindow_t, size_t, uint64_t, int = 64,
                                     cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("waitSignal");
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignalMeetShadow(Coop, ncclGinSignal_t, int = 64,
                                               cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("waitSignalMeetShadow");
  }
  template <typename Coop, typename Uint>
  NCCL_DEVICE_INLINE void waitSignalFollowShadow(Coop, ncclGinSignal_t, Uint, Uint*, Uint*, int = 64,
                                                 cuda::memory_order = cuda::memory_order_acquire) const {
    braid_dev::noGin("waitSignalFollowShadow");
  }
  NCCL_DEVICE_INLINE void resetCounter(ncclGinCounter_t) const { braid_dev::noGin("resetCounter"); }
  NCCL_DEVICE_INLINE void resetSignal(ncclGinSignal_t) const { braid_dev::noGin("resetSignal"); }
  NCCL_DEVICE_INLINE void resetSignal(ncclWindow_t, size_t) const { braid_dev::noGin("resetSignal"); }
};

template <ncclNetDeviceType backend>
using ncclGin_BackendOne = ncclGin_BackendMask<(1u << (int)backend)>;
using ncclGin = ncclGin_BackendMask<NCCL_GIN_BACKEND_MASK_ALL>;
#endif /* NCCL_CHECK_CUDACC */

#endif /* BRAID_NCCL_DEVICE_GIN_H_ */
