// IbvApi: the libibverbs entry points the IB net uses, resolved at run time with
// dlopen("libibverbs.so.1"), so that libbraid does not depend on rdma-core at link time
// (NCCL loads it the same way). Only real exported symbols are here: the data-path verbs
// ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are static inline in <infiniband/verbs.h>
// and call through the context's ops, so they need no symbol and are used directly.
#pragma once
#if __has_include(<infiniband/verbs.h>)
#define BRAID_HAVE_IBVERBS 1
#include <infiniband/verbs.h>

namespace braid {
namespace ib {

struct IbvApi {
  ibv_device** (*getDeviceList)(int* num);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* dev);
  ibv_context* (*openDevice)(ibv_device* dev);
  int (*closeDevice)(ibv_context* ctx);
  int (*queryDevice)(ibv_context* ctx, ibv_device_attr* attr);
  // The exported ibv_query_port fills the older, shorter attribute struct; use
  // queryPort() below, which prefers the provider's sized query like verbs.h does.
  int (*queryPortCompat)(ibv_context* ctx, uint8_t port, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*allocPd)(ibv_context* ctx);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  // Absent before rdma-core 34: then dma-buf registration is unsupported.
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_cq* (*createCq)(ibv_context* ctx, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int compVector);
  int (*destroyCq)(ibv_cq* cq);
  ibv_comp_channel* (*createCompChannel)(ibv_context* ctx);
  int (*destroyCompChannel)(ibv_comp_channel* channel);
  int (*getCqEvent)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext);
  void (*ackCqEvents)(ibv_cq* cq, unsigned int nevents);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  const char* (*wcStatusStr)(ibv_wc_status status);

  /// ibv_query_port with the full attribute struct (what the verbs.h macro does).
  int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const;
};

/// The loaded table, or nullptr when libibverbs.so.1 cannot be loaded or lacks a
/// required symbol (logged once at INFO). Loaded on first call, thread-safe.
const IbvApi* ibvApi();

}  // namespace ib
}  // namespace braid
#endif  // __has_include(<infiniband/verbs.h>)
