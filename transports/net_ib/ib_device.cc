// Device discovery of the IB net (see ib_device.h).
#include "transports/net_ib/ib_device.h"
#ifdef BRAID_HAVE_IBVERBS
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/net/socket.h"

namespace braid {
namespace ib {
namespace {

// GID table entries the automatic choice looks at: enough for the link-local and
// address entries of a port's first netdev addresses; every entry read costs a sysfs
// access, which is slow under emulation.
constexpr int kGidScanLimit = 16;

struct HcaRule {
  std::string name;
  int port = -1;  // -1: any port
};

int laneMbps(uint8_t activeSpeed) {
  switch (activeSpeed) {
    case 1: return 2500;      // SDR
    case 2: return 5000;      // DDR
    case 4: return 10000;     // QDR
    case 8: return 10000;     // FDR10
    case 16: return 14000;    // FDR
    case 32: return 25000;    // EDR
    case 64: return 50000;    // HDR
    case 128: return 100000;  // NDR
    default: return 10000;
  }
}

int laneCount(uint8_t activeWidth) {
  switch (activeWidth) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 1;
  }
}

// RoCE version of a GID entry from sysfs ("RoCE v2" / "IB/RoCE v1"); 0 when unreadable
// (unpopulated entry, or an old kernel without gid_attrs).
int gidRoceVersion(const std::string& hca, int port, int index) {
  std::ifstream f("/sys/class/infiniband/" + hca + "/ports/" + std::to_string(port) +
                  "/gid_attrs/types/" + std::to_string(index));
  std::string type;
  if (!f || !std::getline(f, type)) return 0;
  if (type.find("v2") != std::string::npos) return 2;
  if (type.find("v1") != std::string::npos) return 1;
  return 0;
}

bool gidIsZero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

bool gidIsIpv4Mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g.raw[i]) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

bool gidIsLinkLocal(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

// Picks the GID index of a RoCE port: NCCL_IB_GID_INDEX when set; otherwise the
// preferred RoCE version (NCCL_IB_ROCE_VERSION_NUM) first, and within a version an
// IPv4-mapped address over a routable IPv6 one over a link-local one.
bool pickRoceGid(const IbvApi* api, IbDevice* d, int tableLen) {
  const int forced = static_cast<int>(param::kIbGidIndex.get());
  if (forced >= 0) {
    d->gidIndex = forced;
    return api->queryGid(d->ctx, uint8_t(d->port), forced, &d->gid) == 0;
  }
  const int want = static_cast<int>(param::kIbRoceVersion.get());
  int bestScore = -1;
  const int limit = std::min(tableLen, kGidScanLimit);
  for (int i = 0; i < limit; ++i) {
    ibv_gid g;
    if (api->queryGid(d->ctx, uint8_t(d->port), i, &g) != 0 || gidIsZero(g)) continue;
    const int version = gidRoceVersion(d->hca, d->port, i);
    if (version == 0) continue;
    const int score = (version == want ? 4 : 0) + (gidIsIpv4Mapped(g)  ? 2
                                                   : gidIsLinkLocal(g) ? 0
                                                                       : 1);
    if (score > bestScore) {
      bestScore = score;
      d->gidIndex = i;
      d->gid = g;
    }
    if (score == 6) break;  // the best there is
  }
  return bestScore >= 0;
}

std::vector<HcaRule> parseRules(std::string spec, bool* exclude, bool* exact) {
  *exclude = !spec.empty() && spec[0] == '^';
  if (*exclude) spec.erase(0, 1);
  *exact = !spec.empty() && spec[0] == '=';
  if (*exact) spec.erase(0, 1);
  std::vector<HcaRule> rules;
  for (std::string item : splitCommaList(spec)) {
    HcaRule r;
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      r.port = std::atoi(item.c_str() + colon + 1);
      item.resize(colon);
    }
    r.name = item;
    rules.push_back(r);
  }
  return rules;
}

std::string sysfsRealpath(const std::string& hca) {
  std::string link = "/sys/class/infiniband/" + hca + "/device";
  char buf[PATH_MAX];
  if (!realpath(link.c_str(), buf)) return "";
  return buf;
}

bool probeDmabuf(const IbvApi* api, ibv_pd* pd) {
  if (!api->regDmabufMr) return false;
  // An invalid fd: a provider without dma-buf support says EOPNOTSUPP/EPROTONOSUPPORT
  // before looking at it; one with support fails on the fd instead.
  errno = 0;
  ibv_mr* mr = api->regDmabufMr(pd, 0, 0, 0, -1, 0);
  if (mr) {
    api->deregMr(mr);
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

std::vector<IbDevice>* discover() {
  auto* devs = new std::vector<IbDevice>;
  const IbvApi* api = ibvApi();
  if (!api || param::kIbDisable.get()) return devs;
  int n = 0;
  ibv_device** list = api->getDeviceList(&n);
  if (!list) {
    BRAID_INFO(kLogNet, "IB: ibv_get_device_list failed: %s", strerror(errno));
    return devs;
  }
  const std::string filter = param::kIbHca.get();
  for (int i = 0; i < n; ++i) {
    const std::string hca = api->getDeviceName(list[i]);
    ibv_context* ctx = api->openDevice(list[i]);
    if (!ctx) {
      BRAID_INFO(kLogNet, "IB: cannot open %s: %s", hca.c_str(), strerror(errno));
      continue;
    }
    ibv_device_attr attr;
    if (api->queryDevice(ctx, &attr) != 0) {
      api->closeDevice(ctx);
      continue;
    }
    ibv_pd* pd = nullptr;
    IbMrCache* cache = nullptr;
    bool dmabuf = false;
    for (int port = 1; port <= attr.phys_port_cnt; ++port) {
      if (!ibHcaAllowed(filter, hca, port)) continue;
      ibv_port_attr pa;
      if (api->queryPort(ctx, uint8_t(port), &pa) != 0) continue;
      if (pa.state != IBV_PORT_ACTIVE) continue;
      if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET &&
          pa.link_layer != IBV_LINK_LAYER_UNSPECIFIED)
        continue;
      IbDevice d;
      d.hca = hca;
      d.port = port;
      d.name = hca + ":" + std::to_string(port);
      d.ctx = ctx;
      d.linkLayer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                             : IBV_LINK_LAYER_INFINIBAND;
      d.activeMtu = pa.active_mtu;
      d.lid = pa.lid;
      d.speedMbps = laneMbps(pa.active_speed) * laneCount(pa.active_width);
      d.guid = attr.node_guid;
      d.maxQp = attr.max_qp;
      d.maxMsg = pa.max_msg_sz;
      if (d.roce()) {
        if (!pickRoceGid(api, &d, pa.gid_tbl_len)) {
          BRAID_INFO(kLogNet, "IB: %s has no usable RoCE GID; skipped", d.name.c_str());
          continue;
        }
      } else {
        const int forced = static_cast<int>(param::kIbGidIndex.get());
        d.gidIndex = forced >= 0 ? forced : 0;
        api->queryGid(ctx, uint8_t(port), d.gidIndex, &d.gid);
      }
      if (!pd) {
        pd = api->allocPd(ctx);
        if (!pd) {
          BRAID_INFO(kLogNet, "IB: ibv_alloc_pd on %s failed: %s", hca.c_str(), strerror(errno));
          break;
        }
        dmabuf = probeDmabuf(api, pd);
        // Lives as long as the process, like the context and the PD.
        cache = new IbMrCache(api, pd, strdup(hca.c_str()));
      }
      d.pd = pd;
      d.mrCache = cache;
      d.dmabuf = dmabuf;
      d.pciPath = sysfsRealpath(hca);
      BRAID_INFO(kLogNet, "IB: device %zu = %s (%s, MTU %d, %d Mbit/s, %s %s%s)", devs->size(),
                 d.name.c_str(), d.roce() ? "RoCE" : "IB", 128 << int(d.activeMtu), d.speedMbps,
                 d.roce() ? "GID" : "LID",
                 d.roce() ? gidToString(d.gid).c_str() : std::to_string(d.lid).c_str(),
                 d.dmabuf ? ", dma-buf" : "");
      devs->push_back(d);
    }
    if (!pd) api->closeDevice(ctx);
  }
  api->freeDeviceList(list);
  return devs;
}

}  // namespace

bool ibHcaAllowed(const std::string& filter, const std::string& hca, int port) {
  bool exclude = false, exact = false;
  std::vector<HcaRule> rules = parseRules(filter, &exclude, &exact);
  if (rules.empty()) return true;
  bool matched = false;
  for (const HcaRule& r : rules) {
    bool nameOk = exact ? hca == r.name : hca.compare(0, r.name.size(), r.name) == 0;
    if (nameOk && (r.port < 0 || r.port == port)) {
      matched = true;
      break;
    }
  }
  return exclude ? !matched : matched;
}

std::string gidToString(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(AF_INET6, gid.raw, buf, sizeof(buf))) return "?";
  return buf;
}

const std::vector<IbDevice>& ibDevices() {
  // Once per process. A child of fork() must not use the contexts it inherited: the
  // kernel refuses verbs commands on a uverbs file that another process opened (EACCES,
  // e.g. ibv_post_send on rxe), so the child discovers (opens) devices of its own. The
  // inherited ones are left alone: destroying them would destroy the parent's PD and
  // regions, and comms inherited from the parent still point at them.
  struct Discovered {
    pid_t pid;
    std::vector<IbDevice>* devs;
  };
  static std::mutex mu;
  static std::atomic<Discovered*> current{nullptr};
  const pid_t pid = getpid();
  Discovered* d = current.load(std::memory_order_acquire);
  if (d && d->pid == pid) return *d->devs;
  std::lock_guard<std::mutex> lock(mu);
  d = current.load(std::memory_order_acquire);
  if (!d || d->pid != pid) {
    d = new Discovered{pid, discover()};  // never freed: lives as long as the process
    current.store(d, std::memory_order_release);
  }
  return *d->devs;
}

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
