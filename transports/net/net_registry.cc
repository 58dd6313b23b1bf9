// NetRegistry: see net_registry.h.
#include "transports/net/net_registry.h"

#include <strings.h>

#include <cstdio>
#include <map>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/config/error.h"
#include "src/net/socket.h"

namespace braid {
namespace {

std::mutex& extensionsMu() {
  static std::mutex mu;
  return mu;
}
std::map<const ncclNet_v11_t*, NetExtensions>& extensions() {
  static auto* m = new std::map<const ncclNet_v11_t*, NetExtensions>();  // used at exit
  return *m;
}

/// Initialises `n` (table set) and reads its devices; false with *why if unusable.
bool initNet(Net* n, std::string* why) {
  ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclResult_t r = n->table->init(&n->ctx, 0, &cfg, netPluginLogger, netNoProfiler);
  if (r != ncclSuccess) {
    *why = "init() failed (error " + std::to_string(int(r)) + ")";
    return false;
  }
  int ndev = 0;
  r = n->table->devices(&ndev);
  if (r != ncclSuccess || ndev <= 0) {
    *why = r != ncclSuccess ? "devices() failed (error " + std::to_string(int(r)) + ")"
                            : std::string("no usable device");
    if (n->table->finalize) n->table->finalize(n->ctx);
    return false;
  }
  for (int d = 0; d < ndev; ++d) {
    ncclNetProperties_v11_t p{};
    r = n->table->getProperties(d, &p);
    if (r != ncclSuccess) {
      *why = "getProperties(" + std::to_string(d) + ") failed (error " +
             std::to_string(int(r)) + ")";
      return false;
    }
    if (p.netDeviceType != NCCL_NET_DEVICE_HOST) {
      *why = "device " + std::to_string(d) + " needs network offload type " +
             std::to_string(int(p.netDeviceType)) + ", which Braid does not run";
      return false;
    }
    if (!(p.ptrSupport & NCCL_PTR_HOST)) {
      *why = "device " + std::to_string(d) + " cannot send from host memory";
      return false;
    }
    n->devices.push_back(p);
  }
  n->ext = netExtensions(n->table);
  return true;
}

std::string describeDevices(const Net& n) {
  std::string s;
  for (size_t d = 0; d < n.devices.size(); ++d) {
    const ncclNetProperties_v11_t& p = n.devices[d];
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s[%zu] %s port %d %d Mbit/s", d ? "; " : "", d,
                  p.name ? p.name : "?", p.port, p.speed);
    s += buf;
  }
  return s;
}

}  // namespace

void registerNetExtensions(const ncclNet_v11_t* net, const NetExtensions& ext) {
  std::lock_guard<std::mutex> lk(extensionsMu());
  extensions()[net] = ext;
}

NetExtensions netExtensions(const ncclNet_v11_t* net) {
  std::lock_guard<std::mutex> lk(extensionsMu());
  auto it = extensions().find(net);
  return it == extensions().end() ? NetExtensions{} : it->second;
}

NetRegistry& NetRegistry::get() {
  static NetRegistry* r = new NetRegistry();  // lives until exit (used by exiting comms)
  return *r;
}

const Net* NetRegistry::builtin(const char* which, std::string* why) {
  for (const Builtin& b : builtins_)
    if (b.which == which) {
      *why = b.why;
      return b.net;
    }
  const ncclNet_v11_t* table = std::string(which) == "IB"    ? ibNet()
                               : std::string(which) == "UCX" ? ucxNet()
                                                             : socketNet();
  const Net* result = nullptr;
  if (!table) {
    *why = std::string(which) == "IB"
               ? "not available (libibverbs.so.1 cannot be loaded, or built without "
                 "libibverbs-dev)"
               : "not available (libucp.so.0 cannot be loaded, or built without libucx-dev)";
  } else {
    auto n = std::make_unique<Net>();
    n->table = table;
    n->name = table->name;
    if (initNet(n.get(), why)) {
      result = n.get();
      nets_.push_back(std::move(n));
      why->clear();
    }
  }
  builtins_.push_back({which, result, *why});
  return result;
}

const Net* NetRegistry::external(std::vector<Entry>* failures) {
  const char* raw = param::kNetPlugin.raw();
  const bool explicitSpec = raw != nullptr;
  std::vector<std::string> specs;
  if (!explicitSpec) specs.push_back("libnccl-net.so");
  else if (strcasecmp(raw, "none") != 0) specs = splitCommaList(raw);
  for (const std::string& spec : specs) {
    const Tried* seen = nullptr;
    for (const Tried& t : plugins_)
      if (t.spec == spec) seen = &t;
    if (!seen) {
      Tried t{spec, nullptr, ""};
      auto n = std::make_unique<Net>();
      bool notFound = false;
      if (loadNetPlugin(spec, n.get(), &t.why, &notFound)) {
        if (initNet(n.get(), &t.why)) {
          t.net = n.get();
          nets_.push_back(std::move(n));
          BRAID_INFO(kLogNet | kLogInit, "NET/Plugin: loaded %s from %s (ncclNet v%d)",
                     t.net->name.c_str(), t.net->library.c_str(), t.net->abiVersion);
        } else {
          t.why = "plugin " + n->name + " (" + n->library + "): " + t.why;
        }
      }
      // The default name missing is normal; anything the user asked for is not.
      if (!t.net) {
        if (explicitSpec || !notFound)
          BRAID_WARN("NET/Plugin: NCCL_NET_PLUGIN item '%s' is not used: %s; falling back "
                     "to the next candidate", spec.c_str(), t.why.c_str());
        else
          BRAID_INFO(kLogNet | kLogInit, "NET/Plugin: no %s (%s); using internal networks",
                     spec.c_str(), t.why.c_str());
      }
      plugins_.push_back(t);
      seen = &plugins_.back();
    }
    if (seen->net) return seen->net;
    if (failures) failures->push_back({spec, seen->why, nullptr});
  }
  return nullptr;
}

ncclResult_t NetRegistry::select(const std::string& preferred, const Net** out) {
  std::lock_guard<std::mutex> lk(mu_);
  const bool ibDisabled = param::kIbDisable.get();
  std::vector<Entry> tried;
  const Net* ext = external(&tried);
  std::string ibWhy, ucxWhy, sockWhy;
  const Net* ib = ibDisabled ? nullptr : builtin("IB", &ibWhy);
  if (ibDisabled) ibWhy = "disabled by NCCL_IB_DISABLE";
  const Net* sock = builtin("Socket", &sockWhy);
  const Net* chosen = nullptr;
  if (!preferred.empty()) {
    const Net* ucx = strcasecmp(preferred.c_str(), "UCX") == 0 ? builtin("UCX", &ucxWhy)
                                                                : nullptr;
    for (const Net* n : {ext, ib, ucx, sock})
      if (n && strcasecmp(n->name.c_str(), preferred.c_str()) == 0) {
        chosen = n;
        break;
      }
    if (!chosen) {
      std::string why;
      if (strcasecmp(preferred.c_str(), "IB") == 0) why = "IB: " + ibWhy;
      else if (strcasecmp(preferred.c_str(), "UCX") == 0) why = "UCX: " + ucxWhy;
      else why = "no network has that name";
      std::string avail;
      for (const Net* n : {ext, ib, sock})
        if (n) avail += (avail.empty() ? "" : ", ") + n->name;
      return setError(ncclInvalidUsage, nullptr,
                      "NCCL_NET / netName '%s' cannot be used (%s); available: %s",
                      preferred.c_str(), why.c_str(), avail.c_str());
    }
  } else {
    chosen = ext ? ext : ib ? ib : sock;
  }
  if (!chosen)
    return setError(ncclSystemError, nullptr, "NET: no network can be used (Socket: %s)",
                    sockWhy.c_str());
  if (chosen != lastLogged_) {
    lastLogged_ = chosen;
    BRAID_INFO(kLogNet | kLogInit, "NET: using %s%s%s: %s", chosen->name.c_str(),
               chosen->external ? " from " : "", chosen->external ? chosen->library.c_str() : "",
               describeDevices(*chosen).c_str());
  }
  *out = chosen;
  return ncclSuccess;
}

std::vector<NetRegistry::Entry> NetRegistry::describe() {
  std::vector<Entry> out;
  std::vector<Entry> failures;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const Net* ext = external(&failures);
    if (ext) out.push_back({ext->name, "ok", ext});
    for (const Entry& f : failures) out.push_back({"plugin " + f.name, f.state, nullptr});
    for (const char* which : {"IB", "UCX", "Socket"}) {
      std::string why;
      const Net* n = builtin(which, &why);
      out.push_back({which, n ? "ok" : why, n});
    }
  }
  return out;
}

}  // namespace braid
