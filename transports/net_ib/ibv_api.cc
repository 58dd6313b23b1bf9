// Run-time loading of libibverbs (see ibv_api.h).
#include "transports/net_ib/ibv_api.h"
#ifdef BRAID_HAVE_IBVERBS
#include <dlfcn.h>

#include <cstring>

#include "src/config/log.h"

namespace braid {
namespace ib {
namespace {

// rdma-core exports both IBVERBS_1.0 (legacy ABI) and IBVERBS_1.1 versions of several
// symbols; ask for the current one explicitly, falling back to the default binding.
void* lookup(void* lib, const char* name, const char* version) {
  void* sym = version ? dlvsym(lib, name, version) : nullptr;
  return sym ? sym : dlsym(lib, name);
}

template <typename Fn>
bool bind(void* lib, Fn* slot, const char* name, const char* version, bool required, bool* ok) {
  *slot = reinterpret_cast<Fn>(lookup(lib, name, version));
  if (!*slot && required) {
    BRAID_INFO(kLogNet, "IB: libibverbs.so.1 lacks %s; the IB network is unavailable", name);
    *ok = false;
  }
  return *slot != nullptr;
}

IbvApi* load() {
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    BRAID_INFO(kLogNet, "IB: cannot load libibverbs.so.1 (%s); the IB network is unavailable",
               dlerror());
    return nullptr;
  }
  static IbvApi api;
  bool ok = true;
  const char* v11 = "IBVERBS_1.1";
  bind(lib, &api.getDeviceList, "ibv_get_device_list", v11, true, &ok);
  bind(lib, &api.freeDeviceList, "ibv_free_device_list", v11, true, &ok);
  bind(lib, &api.getDeviceName, "ibv_get_device_name", v11, true, &ok);
  bind(lib, &api.openDevice, "ibv_open_device", v11, true, &ok);
  bind(lib, &api.closeDevice, "ibv_close_device", v11, true, &ok);
  bind(lib, &api.queryDevice, "ibv_query_device", v11, true, &ok);
  bind(lib, &api.queryPortCompat, "ibv_query_port", v11, true, &ok);
  bind(lib, &api.queryGid, "ibv_query_gid", v11, true, &ok);
  bind(lib, &api.allocPd, "ibv_alloc_pd", v11, true, &ok);
  bind(lib, &api.deallocPd, "ibv_dealloc_pd", v11, true, &ok);
  bind(lib, &api.regMr, "ibv_reg_mr", v11, true, &ok);
  bind(lib, &api.regDmabufMr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", false, &ok);
  bind(lib, &api.deregMr, "ibv_dereg_mr", v11, true, &ok);
  bind(lib, &api.createCq, "ibv_create_cq", v11, true, &ok);
  bind(lib, &api.destroyCq, "ibv_destroy_cq", v11, true, &ok);
  bind(lib, &api.createCompChannel, "ibv_create_comp_channel", "IBVERBS_1.0", true, &ok);
  bind(lib, &api.destroyCompChannel, "ibv_destroy_comp_channel", "IBVERBS_1.0", true, &ok);
  bind(lib, &api.getCqEvent, "ibv_get_cq_event", v11, true, &ok);
  bind(lib, &api.ackCqEvents, "ibv_ack_cq_events", v11, true, &ok);
  bind(lib, &api.createQp, "ibv_create_qp", v11, true, &ok);
  bind(lib, &api.modifyQp, "ibv_modify_qp", v11, true, &ok);
  bind(lib, &api.destroyQp, "ibv_destroy_qp", v11, true, &ok);
  bind(lib, &api.wcStatusStr, "ibv_wc_status_str", nullptr, true, &ok);
  if (!ok) {
    dlclose(lib);
    return nullptr;
  }
  // The library stays loaded for the life of the process: device contexts opened
  // through it are never closed (as in NCCL).
  return &api;
}

}  // namespace

int IbvApi::queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const {
  // Same logic as verbs.h's ___ibv_query_port, minus its link-time reference.
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  std::memset(attr, 0, sizeof(*attr));
  return queryPortCompat(ctx, port, attr);
}

const IbvApi* ibvApi() {
  static IbvApi* api = load();
  return api;
}

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
