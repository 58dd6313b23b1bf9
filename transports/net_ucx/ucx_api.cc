// Loads libucp/libucs with dlopen and fills UcxApi. The libraries are never unloaded:
// UCX starts threads and installs memory hooks that must outlive any dlclose.
#include "transports/net_ucx/ucx_api.h"

#if BRAID_HAVE_UCX
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "src/config/log.h"

namespace braid {
namespace {

// Resolves one symbol into a typed member; false (with the reason in *why) if absent.
template <typename Fn>
bool bind(void* lib, const char* name, Fn* out, std::string* why) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (!sym) {
    if (why->empty()) *why = std::string("symbol ") + name + " missing";
    return false;
  }
  *out = reinterpret_cast<Fn>(sym);
  return true;
}

bool load(UcxApi* api, std::string* why) {
  // libucs first: libucp needs it, and status_string lives there.
  void* ucs = dlopen("libucs.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!ucs) {
    const char* e = dlerror();
    *why = e ? e : "dlopen(libucs.so.0) failed";
    return false;
  }
  void* ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!ucp) {
    const char* e = dlerror();
    *why = e ? e : "dlopen(libucp.so.0) failed";
    return false;
  }
  bool ok = true;
  ok &= bind(ucp, "ucp_config_read", &api->config_read, why);
  ok &= bind(ucp, "ucp_config_modify", &api->config_modify, why);
  ok &= bind(ucp, "ucp_config_release", &api->config_release, why);
  ok &= bind(ucp, "ucp_init_version", &api->init_version, why);
  ok &= bind(ucp, "ucp_cleanup", &api->cleanup, why);
  ok &= bind(ucp, "ucp_get_version", &api->get_version, why);
  ok &= bind(ucp, "ucp_worker_create", &api->worker_create, why);
  ok &= bind(ucp, "ucp_worker_destroy", &api->worker_destroy, why);
  ok &= bind(ucp, "ucp_worker_get_address", &api->worker_get_address, why);
  ok &= bind(ucp, "ucp_worker_release_address", &api->worker_release_address, why);
  ok &= bind(ucp, "ucp_worker_progress", &api->worker_progress, why);
  ok &= bind(ucp, "ucp_ep_create", &api->ep_create, why);
  ok &= bind(ucp, "ucp_ep_close_nbx", &api->ep_close_nbx, why);
  ok &= bind(ucp, "ucp_ep_flush_nbx", &api->ep_flush_nbx, why);
  ok &= bind(ucp, "ucp_tag_send_nbx", &api->tag_send_nbx, why);
  ok &= bind(ucp, "ucp_tag_recv_nbx", &api->tag_recv_nbx, why);
  ok &= bind(ucp, "ucp_request_check_status", &api->request_check_status, why);
  ok &= bind(ucp, "ucp_request_cancel", &api->request_cancel, why);
  ok &= bind(ucp, "ucp_request_free", &api->request_free, why);
  ok &= bind(ucs, "ucs_status_string", &api->status_string, why);
  return ok;
}

}  // namespace

const UcxApi* ucxApi() {
  static UcxApi api;
  static const UcxApi* loaded = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string why;
    if (!load(&api, &why)) {
      BRAID_INFO(kLogNet, "UCX net unavailable: %s", why.c_str());
      return;
    }
    unsigned major = 0, minor = 0, release = 0;
    api.get_version(&major, &minor, &release);
    BRAID_INFO(kLogNet, "UCX net: loaded UCX %u.%u.%u (built against API %d.%d)", major, minor,
               release, UCP_API_MAJOR, UCP_API_MINOR);
    loaded = &api;
  });
  return loaded;
}

}  // namespace braid
#endif  // BRAID_HAVE_UCX
