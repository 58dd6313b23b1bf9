// UcxApi: the few UCP/UCS entry points Braid's UCX net uses, resolved at run time with
// dlopen("libucp.so.0") / dlopen("libucs.so.0"), so that libbraid needs UCX neither at
// link time nor on machines that lack it (as NCCL loads its own optional dependencies).
//
// Only the headers are needed to build: without <ucp/api/ucp.h> BRAID_HAVE_UCX is 0 and
// the UCX net compiles to a stub whose ucxNet() returns nullptr.
#pragma once

#if __has_include(<ucp/api/ucp.h>)
#define BRAID_HAVE_UCX 1
#include <ucp/api/ucp.h>
#else
#define BRAID_HAVE_UCX 0
#endif

#if BRAID_HAVE_UCX
namespace braid {

/// Function table over libucp/libucs. Members are named after the UCX functions they
/// hold. ucp_init() is a static inline wrapper in ucp.h, so the table holds what it
/// calls, ucp_init_version(); init() supplies the API version this file was built with.
struct UcxApi {
  ucs_status_t (*config_read)(const char* env_prefix, const char* filename,
                              ucp_config_t** config);
  ucs_status_t (*config_modify)(ucp_config_t* config, const char* name, const char* value);
  void (*config_release)(ucp_config_t* config);
  ucs_status_t (*init_version)(unsigned api_major, unsigned api_minor, const ucp_params_t* params,
                               const ucp_config_t* config, ucp_context_h* context);
  void (*cleanup)(ucp_context_h context);
  void (*get_version)(unsigned* major, unsigned* minor, unsigned* release);
  ucs_status_t (*worker_create)(ucp_context_h context, const ucp_worker_params_t* params,
                                ucp_worker_h* worker);
  void (*worker_destroy)(ucp_worker_h worker);
  ucs_status_t (*worker_get_address)(ucp_worker_h worker, ucp_address_t** address,
                                     size_t* length);
  void (*worker_release_address)(ucp_worker_h worker, ucp_address_t* address);
  unsigned (*worker_progress)(ucp_worker_h worker);
  ucs_status_t (*ep_create)(ucp_worker_h worker, const ucp_ep_params_t* params, ucp_ep_h* ep);
  ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h ep, const ucp_request_param_t* param);
  ucs_status_ptr_t (*ep_flush_nbx)(ucp_ep_h ep, const ucp_request_param_t* param);
  ucs_status_ptr_t (*tag_send_nbx)(ucp_ep_h ep, const void* buffer, size_t count, ucp_tag_t tag,
                                   const ucp_request_param_t* param);
  ucs_status_ptr_t (*tag_recv_nbx)(ucp_worker_h worker, void* buffer, size_t count,
                                   ucp_tag_t tag, ucp_tag_t tag_mask,
                                   const ucp_request_param_t* param);
  ucs_status_t (*request_check_status)(void* request);
  void (*request_cancel)(ucp_worker_h worker, void* request);
  void (*request_free)(void* request);
  const char* (*status_string)(ucs_status_t status);  // from libucs

  /// ucp_init() as ucp.h defines it, through the table.
  ucs_status_t init(const ucp_params_t* params, const ucp_config_t* config,
                    ucp_context_h* context) const {
    return init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, context);
  }
};

/// The table, loaded on first call (thread-safe); nullptr when the libraries or one of
/// the symbols are missing (the reason is logged once at INFO, subsystem NET).
const UcxApi* ucxApi();

}  // namespace braid
#endif  // BRAID_HAVE_UCX
