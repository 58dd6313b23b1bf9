#include "src/topo/nvml_links.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "src/config/log.h"
#include "src/topo/topology.h"

namespace braid {
namespace topo {

namespace {

// The few NVML declarations we use (NVML's public C ABI).
using nvmlDevice_t = struct nvmlDeviceOpaque*;
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*byBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*) = nullptr;  // optional
  nvmlReturn_t (*capability)(nvmlDevice_t, int*, int*) = nullptr;      // optional

  bool open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    bool ok = sym(&init, "nvmlInit_v2") && sym(&shutdown, "nvmlShutdown") &&
              sym(&byBusId, "nvmlDeviceGetHandleByPciBusId_v2") &&
              sym(&linkState, "nvmlDeviceGetNvLinkState") &&
              sym(&remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    sym(&remoteType, "nvmlDeviceGetNvLinkRemoteDeviceType");
    sym(&capability, "nvmlDeviceGetCudaComputeCapability");
    return ok && init() == kNvmlSuccess;
  }
  ~Nvml() {
    if (lib) {
      if (init && shutdown) shutdown();
      dlclose(lib);
    }
  }
  template <typename F>
  bool sym(F* f, const char* name) {
    *f = reinterpret_cast<F>(dlsym(lib, name));
    return *f != nullptr;
  }
};

/// NVML's "00000000:19:00.0" as ours, "0000:19:00.0".
std::string normalizeBusId(const char* s) {
  const char* colon = strchr(s, ':');
  if (!colon) return "";
  unsigned long domain = strtoul(s, nullptr, 16);
  char buf[48];
  snprintf(buf, sizeof buf, "%04lx%s", domain, colon);
  std::string out = buf;
  for (char& c : out) c = char(tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool addNvmlLinks(Topology* t) {
  Nvml nvml;
  if (!nvml.open()) return false;
  std::map<std::string, int> switches;  // remote bus id -> NVSwitch node
  for (int g : t->nodesOfType(NodeType::kGpu)) {
    nvmlDevice_t dev = nullptr;
    if (nvml.byBusId(t->node(g).pci.busId.c_str(), &dev) != kNvmlSuccess) continue;
    int major = 0, minor = 0;
    if (nvml.capability && nvml.capability(dev, &major, &minor) == kNvmlSuccess && major > 0)
      t->node(g).sm = major * 10 + minor;
    std::map<int, int> counts;  // remote node -> links
    for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
      int active = 0;
      if (nvml.linkState(dev, l, &active) != kNvmlSuccess || !active) continue;
      NvmlPciInfo pci;
      memset(&pci, 0, sizeof pci);
      if (nvml.remotePci(dev, l, &pci) != kNvmlSuccess) continue;
      std::string bus = normalizeBusId(pci.busId);
      int remoteType = -1;  // 0 GPU, 2 NVSwitch
      if (nvml.remoteType) nvml.remoteType(dev, l, &remoteType);
      int to = t->nodeOfBusId(bus);
      if (to >= 0 && t->node(to).type != NodeType::kGpu &&
          t->node(to).type != NodeType::kNvSwitch)
        continue;  // e.g. an NVLink to a CPU
      if (to < 0) {
        if (remoteType == 0) continue;  // a GPU we do not see (not in this container)
        auto it = switches.find(bus);
        if (it == switches.end()) {
          int s = t->addNode(NodeType::kNvSwitch, 0);
          t->node(s).pci.busId = bus.empty() ? "nvswitch" + std::to_string(switches.size()) : bus;
          t->node(s).index = t->count(NodeType::kNvSwitch) - 1;
          it = switches.emplace(bus, s).first;
        }
        to = it->second;
      }
      if (to != g) ++counts[to];
    }
    for (const auto& rc : counts) {
      // GPU-GPU links are seen from both ends: keep one entry per pair.
      if (t->node(rc.first).type == NodeType::kGpu && rc.first < g) continue;
      t->addNvLink(g, rc.first, rc.second, nvlinkGbpsPerLink(t->node(g).sm));
    }
  }
  BRAID_INFO(kLogGraph, "topology: %zu NVLink pairs from NVML", t->nvlinks().size());
  return true;
}

}  // namespace topo
}  // namespace braid
