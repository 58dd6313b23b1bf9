// UcxWorker and the process-wide UCP context it is built on.
#include "transports/net_ucx/ucx_worker.h"

#if BRAID_HAVE_UCX
#include <cstdlib>

#include "src/config/params.h"
#include "src/config/error.h"
#include "src/net/socket.h"
#include "transports/net_ucx/ucx_comm.h"

namespace braid {
namespace {

// Longest finalize() waits for the endpoints it closes.
constexpr int64_t kFinalizeMs = 2000;

bool envSet(const char* name) {
  const char* v = getenv(name);
  return v && *v;
}

// Sets one UCX option in `config` unless the user set its UCX_ variable (theirs wins).
void setDefault(const UcxApi* api, ucp_config_t* config, const char* name, const char* value,
                const char* why) {
  const std::string env = std::string("UCX_") + name;
  if (envSet(env.c_str())) return;
  ucs_status_t st = api->config_modify(config, name, value);
  if (st == UCS_OK)
    BRAID_INFO(kLogNet, "UCX net: %s=%s (%s)", env.c_str(), value, why);
  else
    BRAID_INFO(kLogNet, "UCX net: cannot set %s=%s: %s", env.c_str(), value,
               api->status_string(st));
}

// True unless `tls` (a UCX_TLS value) names transports and excludes posix and sysv.
bool mayUseSharedMemory(const std::string& tls) {
  if (tls.empty() || tls[0] == '^') return true;  // UCX's own choice, or an exclusion list
  for (const char* name : {"all", "sm", "shm", "mm", "posix", "sysv"}) {
    size_t pos = 0;
    const std::string n(name);
    while ((pos = tls.find(n, pos)) != std::string::npos) {
      const bool startOk = pos == 0 || tls[pos - 1] == ',';
      const bool endOk = pos + n.size() == tls.size() || tls[pos + n.size()] == ',';
      if (startOk && endOk) return true;
      pos += n.size();
    }
  }
  return false;
}

// The process's UCP context, shared by all workers, counted by them.
struct SharedContext {
  std::mutex mu;
  int refs = 0;
  ucp_context_h context = nullptr;
};
SharedContext& sharedContext() {
  static SharedContext* s = new SharedContext();  // never destroyed: used at exit
  return *s;
}

ncclResult_t createContext(const UcxApi* api, ucp_context_h* out) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = api->config_read(nullptr, nullptr, &config);
  if (st != UCS_OK)
    return setError(ncclSystemError, nullptr, "UCX net: ucp_config_read failed: %s",
                    api->status_string(st));
  const std::string tls = param::kUcxTls.get();
  if (!tls.empty()) setDefault(api, config, "TLS", tls.c_str(), "from BRAID_UCX_TLS");
  // Every endpoint asks for peer-failure handling; UCX's shared-memory transports only
  // offer it when told to (they then detect a dead peer process by its pid). Without
  // this, UCX_TLS=shm could not connect at all. "MM_" is the table both posix and sysv
  // inherit. Only where they may be used: UCX warns about settings nothing consumed.
  const char* userTls = getenv("UCX_TLS");
  if (mayUseSharedMemory(userTls && *userTls ? userTls : tls) &&
      !envSet("UCX_POSIX_ERROR_HANDLING") && !envSet("UCX_SYSV_ERROR_HANDLING"))
    setDefault(api, config, "MM_ERROR_HANDLING", "y", "shared memory with failure handling");

  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 1;  // workers of different contexts run on different threads
  params.name = "braid";
  st = api->init(&params, config, out);
  api->config_release(config);
  if (st != UCS_OK)
    return setError(ncclSystemError, nullptr, "UCX net: ucp_init failed: %s%s",
                    api->status_string(st),
                    tls.empty() ? "" : " (check BRAID_UCX_TLS / UCX_TLS)");
  return ncclSuccess;
}

ncclResult_t acquireContext(const UcxApi* api, ucp_context_h* out) {
  SharedContext& s = sharedContext();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.refs == 0) {
    ncclResult_t res = createContext(api, &s.context);
    if (res != ncclSuccess) return res;
  }
  ++s.refs;
  *out = s.context;
  return ncclSuccess;
}

void releaseContext(const UcxApi* api) {
  SharedContext& s = sharedContext();
  std::lock_guard<std::mutex> lock(s.mu);
  if (--s.refs == 0) {
    api->cleanup(s.context);
    s.context = nullptr;
  }
}

}  // namespace

ncclResult_t UcxWorker::create(const UcxApi* api, UcxWorker** out) {
  ucp_context_h context = nullptr;
  BRAID_CHECK(acquireContext(api, &context));
  UcxWorker* w = new UcxWorker(api);
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // mu_ serializes every call
  ucs_status_t st = api->worker_create(context, &params, &w->worker_);
  if (st != UCS_OK) {
    delete w;  // releases the context
    return setError(ncclSystemError, nullptr, "UCX net: ucp_worker_create failed: %s",
                    api->status_string(st));
  }
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = api->worker_get_address(w->worker_, &addr, &len);
  if (st != UCS_OK) {
    delete w;
    return setError(ncclSystemError, nullptr, "UCX net: ucp_worker_get_address failed: %s",
                    api->status_string(st));
  }
  w->address_.assign(reinterpret_cast<const char*>(addr), len);
  api->worker_release_address(w->worker_, addr);
  BRAID_INFO(kLogNet, "UCX net: worker created (address %zu bytes)", len);
  *out = w;
  return ncclSuccess;
}

UcxWorker::~UcxWorker() {
  if (worker_) {
    // Endpoints still open are closed within a bound; ucp_worker_destroy releases
    // whatever UCX still holds after that, and then no callback can reach a UcxPeer.
    std::vector<UcxPeer*> all = retired_;
    for (auto& kv : peers_) all.push_back(kv.second);
    std::vector<void*> closing;
    for (UcxPeer* peer : all) {
      if (!peer->ep) continue;
      if (void* req = closeEndpoint(peer)) closing.push_back(req);
    }
    const int64_t deadline = monotonicMs() + kFinalizeMs;
    while (!closing.empty() && monotonicMs() < deadline) {
      api_->worker_progress(worker_);
      for (size_t i = closing.size(); i-- > 0;) {
        if (api_->request_check_status(closing[i]) == UCS_INPROGRESS) continue;
        api_->request_free(closing[i]);
        closing.erase(closing.begin() + long(i));
      }
    }
    for (void* req : closing) api_->request_free(req);
    api_->worker_destroy(worker_);
    for (UcxPeer* peer : all) delete peer;
  }
  releaseContext(api_);
}

ncclResult_t UcxWorker::attach(const std::string& address, const char* peerName,
                               UcxComm* comm, UcxPeer** out) {
  auto it = peers_.find(address);
  if (it != peers_.end() && !it->second->failed) {
    it->second->comms.push_back(comm);
    *out = it->second;
    return ncclSuccess;
  }
  if (it != peers_.end()) {  // failed: a new endpoint replaces it
    retired_.push_back(it->second);
    peers_.erase(it);
  }
  UcxPeer* peer = new UcxPeer();
  peer->worker = this;
  peer->address = address;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = onPeerError;
  params.err_handler.arg = peer;
  ucs_status_t st = api_->ep_create(worker_, &params, &peer->ep);
  if (st != UCS_OK) {
    delete peer;
    return setError(ncclSystemError, nullptr,
                    "UCX net: cannot create an endpoint to peer %s: %s (no common UCX "
                    "transport? check UCX_TLS / BRAID_UCX_TLS)",
                    peerName, api_->status_string(st));
  }
  peer->comms.push_back(comm);
  peers_[address] = peer;
  *out = peer;
  return ncclSuccess;
}

void UcxWorker::adopt(std::unique_ptr<UcxRequestSlots> slots) {
  orphans_.push_back(std::move(slots));
}

void* UcxWorker::closeEndpoint(UcxPeer* peer) {
  // Forced: released locally, without the peer's participation (its endpoint, in
  // peer-failure mode, notices).
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t st = api_->ep_close_nbx(peer->ep, &p);
  peer->ep = nullptr;
  return (st != nullptr && !UCS_PTR_IS_ERR(st)) ? st : nullptr;
}

bool UcxWorker::detach(UcxPeer* peer, UcxComm* comm, void** closeReq) {
  *closeReq = nullptr;
  for (size_t i = 0; i < peer->comms.size(); ++i) {
    if (peer->comms[i] != comm) continue;
    peer->comms.erase(peer->comms.begin() + long(i));
    break;
  }
  if (!peer->comms.empty() || !peer->failed || !peer->ep) return false;  // kept for reuse
  *closeReq = closeEndpoint(peer);
  return true;
}

void UcxWorker::onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  UcxPeer* peer = static_cast<UcxPeer*>(arg);
  peer->failed = true;  // comms made from now on get a new endpoint
  for (UcxComm* c : peer->comms) c->peerFailed(status);
}

}  // namespace braid
#endif  // BRAID_HAVE_UCX
