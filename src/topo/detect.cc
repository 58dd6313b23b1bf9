// Topology::detect(): this machine through hwloc (CPU side and the PCI tree), plus a few
// sysfs files hwloc does not interpret (PCIe link rate/width, NIC speeds, RDMA ports).
#include <dirent.h>
#include <hwloc.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "src/topo/nvml_links.h"
#include "src/topo/topology.h"

namespace braid {
namespace topo {

namespace {

using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (in) std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string busIdOf(const PciAttr& a) {
  char buf[32];
  snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", unsigned(a.domain), unsigned(a.bus),
           unsigned(a.dev), unsigned(a.func));
  return buf;
}

PciInfo pciInfoOf(const PciAttr& a) {
  PciInfo p;
  p.busId = busIdOf(a);
  p.classCode = uint32_t(a.class_id) << 8;
  p.vendor = a.vendor_id;
  p.device = a.device_id;
  p.subVendor = a.subvendor_id;
  p.subDevice = a.subdevice_id;
  // The maximum link (GPUs train down to 2.5 GT/s when idle, so not the current one).
  std::string dir = "/sys/bus/pci/devices/" + p.busId + "/";
  std::string cls = readLine(dir + "class");
  if (cls.size() > 2) p.classCode = uint32_t(strtoul(cls.c_str(), nullptr, 16)) & 0xffffff;
  double gts = 0;
  if (PciInfo::parseLinkSpeed(readLine(dir + "max_link_speed"), &gts)) p.linkGts = gts;
  int w = atoi(readLine(dir + "max_link_width").c_str());
  if (w > 0 && w <= 64 && p.linkGts > 0) p.linkWidth = w;
  if (p.linkWidth == 0) p.linkGts = 0;
  return p;
}

/// Linux cpumask text ("0000ffff,ffffffff": 32-bit words, most significant first).
std::string cpuMask(hwloc_const_bitmap_t set) {
  int last = hwloc_bitmap_last(set);
  if (last < 0) return "";
  std::string out;
  for (int w = last / 32; w >= 0; --w) {
    unsigned word = 0;
    for (int b = 0; b < 32; ++b)
      if (hwloc_bitmap_isset(set, unsigned(w * 32 + b))) word |= 1u << b;
    char buf[16];
    snprintf(buf, sizeof buf, "%08x", word);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

/// Compute capability from the PCI device id (no driver needed); 0 if unknown.
int smOfDevice(uint16_t id) {
  struct Range { uint16_t lo, hi; int sm; };
  static const Range kRanges[] = {
      {0x15f0, 0x15ff, 60},  // GP100
      {0x1db0, 0x1dbf, 70},  // GV100
      {0x1df0, 0x1dff, 70},
      {0x1e00, 0x1fff, 75},  // TU10x
      {0x20b0, 0x20ff, 80},  // GA100 (A100, A30)
      {0x2200, 0x25ff, 86},  // GA10x
      {0x2300, 0x234f, 90},  // GH100 (H100, H200, GH200)
      {0x2680, 0x28ff, 89},  // AD10x (L40, L4)
      {0x2900, 0x29ff, 100}, // GB100/GB200
      {0x2b00, 0x2bff, 120}, // GB20x
  };
  for (const Range& r : kRanges)
    if (id >= r.lo && id <= r.hi) return r.sm;
  return 0;
}

/// "400 Gb/sec (4X NDR)" -> 400000 Mb/s.
int64_t rateMbps(const std::string& rate) {
  double gb = atof(rate.c_str());
  return gb > 0 ? int64_t(gb * 1000 + 0.5) : 0;
}

class Detector {
 public:
  explicit Detector(hwloc_topology_t h) : h_(h) {}

  void run(Topology* t) {
    t_ = t;
    addCpuSide();
    addPci();
    t_->assignCudaDevices();
  }

 private:
  static std::string info(hwloc_obj_t o, const char* name) {
    for (; o; o = o->parent)
      if (const char* v = hwloc_obj_get_info_by_name(o, name)) return v;
    return "";
  }

  void addCpuSide() {
    std::string arch = info(hwloc_get_root_obj(h_), "Architecture");
    if (arch.empty()) {
      utsname u;
      if (uname(&u) == 0) arch = u.machine;
    }
    int nPkg = hwloc_get_nbobjs_by_type(h_, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < std::max(nPkg, 1); ++i) {
      hwloc_obj_t o = nPkg ? hwloc_get_obj_by_type(h_, HWLOC_OBJ_PACKAGE, unsigned(i))
                           : hwloc_get_root_obj(h_);
      int p = t_->addNode(NodeType::kPackage, 0);
      Node& n = t_->node(p);
      n.index = nPkg && o->os_index != HWLOC_UNKNOWN_INDEX ? int(o->os_index) : i;
      n.arch = arch;
      n.vendor = info(o, "CPUVendor");
      std::string fam = info(o, "CPUFamilyNumber"), model = info(o, "CPUModelNumber");
      if (!fam.empty()) n.familyId = atoi(fam.c_str());
      if (!model.empty()) n.modelId = atoi(model.c_str());
      packages_.emplace_back(p, o);
    }
    int nNuma = hwloc_get_nbobjs_by_type(h_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < nNuma; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(h_, HWLOC_OBJ_NUMANODE, unsigned(i));
      if (!o->cpuset || hwloc_bitmap_iszero(o->cpuset)) continue;  // memory-only node
      int pkg = packages_[0].first;
      for (const auto& po : packages_)
        if (po.second->cpuset && hwloc_bitmap_intersects(po.second->cpuset, o->cpuset)) {
          pkg = po.first;
          break;
        }
      int id = t_->addNode(NodeType::kNuma, pkg);
      Node& n = t_->node(id);
      n.index = o->os_index != HWLOC_UNKNOWN_INDEX ? int(o->os_index) : i;
      n.memoryBytes = o->attr ? o->attr->numanode.local_memory : 0;
      n.affinity = cpuMask(o->cpuset);
      numas_.emplace_back(id, o);
    }
    if (numas_.empty()) {
      hwloc_obj_t root = hwloc_get_root_obj(h_);
      int id = t_->addNode(NodeType::kNuma, packages_[0].first);
      t_->node(id).index = 0;
      t_->node(id).memoryBytes = root->total_memory;
      t_->node(id).affinity = cpuMask(root->cpuset);
      numas_.emplace_back(id, root);
    }
    hwloc_obj_type_t coreType =
        hwloc_get_nbobjs_by_type(h_, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    int nCores = hwloc_get_nbobjs_by_type(h_, coreType);
    for (int i = 0; i < nCores; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(h_, coreType, unsigned(i));
      std::vector<int> cpus;
      for (int b = hwloc_bitmap_first(o->cpuset); b >= 0;
           b = hwloc_bitmap_next(o->cpuset, b))
        cpus.push_back(b);
      if (cpus.empty()) continue;
      int numa = numas_[0].first;
      for (const auto& no : numas_)
        if (hwloc_bitmap_isset(no.second->cpuset, unsigned(cpus[0]))) {
          numa = no.first;
          break;
        }
      int c = t_->addNode(NodeType::kCore, numa);
      t_->node(c).index = int(o->logical_index);
      t_->node(c).cpus = cpus;
    }
  }

  /// The NUMA node (our id) a PCI object hangs under, or the machine.
  int attachPoint(hwloc_obj_t pci) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(h_, pci);
    if (anc && anc->nodeset) {
      for (int b = hwloc_bitmap_first(anc->nodeset); b >= 0;
           b = hwloc_bitmap_next(anc->nodeset, b))
        for (const auto& no : numas_)
          if (no.second->os_index == unsigned(b)) return no.first;
    }
    hwloc_obj_t root = hwloc_get_root_obj(h_);
    if (anc && anc != root && anc->cpuset)
      for (const auto& no : numas_)
        if (hwloc_bitmap_intersects(no.second->cpuset, anc->cpuset)) return no.first;
    return 0;
  }

  /// Where a device goes: below the PCIe switches above it (created on first use).
  /// hwloc's chain below the host bridge is: root port, then per switch its upstream
  /// port and one downstream port. Root ports belong to the CPU (PHB); each
  /// upstream/downstream pair is folded into one switch node.
  int parentFor(hwloc_obj_t dev) {
    std::vector<hwloc_obj_t> chain;  // bridges from the device up, excluding host bridges
    for (hwloc_obj_t p = dev->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
      if (p->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;
      chain.push_back(p);
    }
    std::reverse(chain.begin(), chain.end());
    int parent = attachPoint(dev);
    for (size_t level = 1; level < chain.size(); level += 2) {
      const PciAttr& a = chain[level]->attr->bridge.upstream.pci;
      std::string bus = busIdOf(a);
      auto it = switches_.find(bus);
      if (it == switches_.end()) {
        int s = t_->addNode(NodeType::kPciSwitch, parent);
        t_->node(s).pci = pciInfoOf(a);
        it = switches_.emplace(bus, s).first;
      }
      parent = it->second;
    }
    return parent;
  }

  void addPci() {
    std::vector<hwloc_obj_t> devs;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(h_, nullptr); o; o = hwloc_get_next_pcidev(h_, o))
      devs.push_back(o);
    std::sort(devs.begin(), devs.end(), [](hwloc_obj_t a, hwloc_obj_t b) {
      return busIdOf(a->attr->pcidev) < busIdOf(b->attr->pcidev);
    });
    int nicDev = 0;
    for (hwloc_obj_t o : devs) {
      const PciAttr& a = o->attr->pcidev;
      bool nvidia = a.vendor_id == 0x10de;
      std::vector<std::string> netdevs, ibdevs;
      for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) netdevs.push_back(c->name);
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) ibdevs.push_back(c->name);
      }
      if (nvidia && (a.class_id >> 8) == 0x03) {
        int g = t_->addNode(NodeType::kGpu, parentFor(o));
        t_->node(g).pci = pciInfoOf(a);
        t_->node(g).sm = smOfDevice(a.device_id);
      } else if (nvidia && a.class_id == 0x0680) {
        int s = t_->addNode(NodeType::kNvSwitch, parentFor(o));
        t_->node(s).pci = pciInfoOf(a);
        t_->node(s).index = t_->count(NodeType::kNvSwitch) - 1;
      } else if (!netdevs.empty() || !ibdevs.empty()) {
        int parent = parentFor(o);
        PciInfo pci = pciInfoOf(a);
        for (const std::string& ib : ibdevs) {
          std::string base = "/sys/class/infiniband/" + ib + "/ports/";
          std::vector<std::string> ports = listDir(base);
          if (ports.empty()) ports.push_back("1");
          for (size_t i = 0; i < ports.size(); ++i) {
            int n = t_->addNode(NodeType::kNic, parent);
            Node& x = t_->node(n);
            x.pci = pci;
            x.index = nicDev++;
            x.name = ib;
            x.rdma = true;
            x.port = atoi(ports[i].c_str());
            x.speedMbps = rateMbps(readLine(base + ports[i] + "/rate"));
            if (i < netdevs.size()) x.ifName = netdevs[i];
            for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
              if (c->name && ib == c->name)
                if (const char* g = hwloc_obj_get_info_by_name(c, "NodeGUID")) x.guid = g;
          }
        }
        if (ibdevs.empty()) {
          for (const std::string& nd : netdevs) {
            int n = t_->addNode(NodeType::kNic, parent);
            Node& x = t_->node(n);
            x.pci = pci;
            x.index = nicDev++;
            x.name = nd;
            x.ifName = nd;
            long speed = atol(readLine("/sys/class/net/" + nd + "/speed").c_str());
            x.speedMbps = speed > 0 ? speed : 0;
          }
        }
      }
    }
  }

  hwloc_topology_t h_;
  Topology* t_ = nullptr;
  std::vector<std::pair<int, hwloc_obj_t>> packages_, numas_;
  std::map<std::string, int> switches_;
};

}  // namespace

std::optional<Topology> Topology::detect(std::string* error) {
  hwloc_topology_t h;
  if (hwloc_topology_init(&h) != 0) {
    if (error) *error = "hwloc_topology_init failed";
    return std::nullopt;
  }
  // GPUs and NICs come from the PCI tree; skip caches, and plugins that would open GL
  // displays or GPU runtimes (slow, noisy, and GPUs are found on PCI anyway).
  // Every PCI device (hwloc's "important" ones miss PCI-visible NVSwitches, class
  // 0x0680); bridges and OS devices only where they lead to something.
  hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_type_filter(h, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_cache_types_filter(h, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(h, HWLOC_TYPE_FILTER_KEEP_NONE);
  // "pci" (libpciaccess) too: hwloc's Linux backend reads the same PCI tree from sysfs,
  // faster and without libpciaccess's allocations that are never freed (LeakSanitizer).
  for (const char* c : {"gl", "opencl", "cuda", "nvml", "rsmi", "levelzero", "pci"})
    hwloc_topology_set_components(h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
  if (hwloc_topology_load(h) != 0) {
    if (error) *error = std::string("hwloc_topology_load failed: ") + strerror(errno);
    hwloc_topology_destroy(h);
    return std::nullopt;
  }
  Topology t;
  t.source_ = "hwloc";
  Detector(h).run(&t);
  hwloc_topology_destroy(h);
  if (t.count(NodeType::kGpu) > 0) addNvmlLinks(&t);
  return t;
}

}  // namespace topo
}  // namespace braid
