// Topology <-> XML (NCCL's element names, plus a few of our own; docs/topology.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "src/config/log.h"
#include "src/topo/topology.h"
#include "src/topo/xml.h"

namespace braid {
namespace topo {

namespace {

constexpr uint32_t kNvSwitchClass = 0x068000;

std::string hex(uint32_t v, int digits) {
  char buf[16];
  snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}

std::string num(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---- writing ----------------------------------------------------------------------

void setPci(XmlElement& e, const PciInfo& p) {
  e.set("busid", p.busId);
  e.set("class", hex(p.classCode, 6));
  e.set("vendor", hex(p.vendor, 4));
  e.set("device", hex(p.device, 4));
  if (p.subVendor || p.subDevice) {
    e.set("subsystem_vendor", hex(p.subVendor, 4));
    e.set("subsystem_device", hex(p.subDevice, 4));
  }
  if (p.linkGts > 0) e.set("link_speed", p.linkSpeedText());
  if (p.linkWidth > 0) e.set("link_width", std::to_string(p.linkWidth));
}

class Writer {
 public:
  explicit Writer(const Topology& t) : t_(t) {}

  XmlElement write() {
    XmlElement sys;
    sys.name = "system";
    sys.set("version", "1");
    const Node& m = t_.node(0);
    for (int p : m.children) {
      const Node& pkg = t_.node(p);
      if (pkg.type != NodeType::kPackage) continue;
      for (int n : pkg.children) {
        const Node& numa = t_.node(n);
        if (numa.type != NodeType::kNuma) continue;
        XmlElement& cpu = sys.add("cpu");
        cpu.set("numaid", std::to_string(numa.index));
        cpu.set("package", std::to_string(pkg.index));
        if (!numa.affinity.empty()) cpu.set("affinity", numa.affinity);
        if (!pkg.arch.empty()) cpu.set("arch", pkg.arch);
        if (!pkg.vendor.empty()) cpu.set("vendor", pkg.vendor);
        if (pkg.familyId >= 0) cpu.set("familyid", std::to_string(pkg.familyId));
        if (pkg.modelId >= 0) cpu.set("modelid", std::to_string(pkg.modelId));
        if (numa.memoryBytes) cpu.set("memory", std::to_string(numa.memoryBytes));
        writeChildren(numa, cpu);
      }
    }
    writeChildren(m, sys);
    return sys;
  }

 private:
  void writeChildren(const Node& parent, XmlElement& e) {
    for (int c : parent.children) {
      const Node& n = t_.node(c);
      if (n.type != NodeType::kCore) continue;
      XmlElement& core = e.add("core");
      core.set("id", std::to_string(n.index));
      core.set("cpus", formatCpuList(n.cpus));
    }
    std::vector<bool> done(parent.children.size(), false);
    for (size_t i = 0; i < parent.children.size(); ++i) {
      const Node& n = t_.node(parent.children[i]);
      switch (n.type) {
        case NodeType::kPciSwitch: {
          XmlElement& pci = e.add("pci");
          setPci(pci, n.pci);
          writeChildren(n, pci);
          break;
        }
        case NodeType::kGpu: {
          XmlElement& pci = e.add("pci");
          setPci(pci, n.pci);
          writeGpu(n, pci.add("gpu"));
          break;
        }
        case NodeType::kNvSwitch:
          if (n.pci.classCode) {
            XmlElement& pci = e.add("pci");
            setPci(pci, n.pci);
            pci.add("nvswitch");
          } else {
            e.add("nvswitch").set("busid", n.pci.busId);
          }
          break;
        case NodeType::kNic: {
          if (done[i]) break;
          XmlElement* nic = nullptr;
          if (!n.pci.busId.empty()) {
            XmlElement& pci = e.add("pci");
            setPci(pci, n.pci);
            nic = &pci.add("nic");
          } else {
            nic = &e.add("nic");
          }
          // Every port of the same PCI device goes into one <nic>.
          for (size_t j = i; j < parent.children.size(); ++j) {
            const Node& o = t_.node(parent.children[j]);
            if (o.type != NodeType::kNic || done[j]) continue;
            if (j != i && (n.pci.busId.empty() || o.pci.busId != n.pci.busId)) continue;
            done[j] = true;
            writeNet(o, nic->add("net"));
          }
          break;
        }
        default: break;
      }
    }
  }

  void writeGpu(const Node& g, XmlElement& e) {
    e.set("dev", std::to_string(g.index));
    e.set("sm", std::to_string(g.sm));
    if (g.rank >= 0) e.set("rank", std::to_string(g.rank));
    std::vector<std::pair<std::string, const NvLink*>> links;
    for (const NvLink& l : t_.nvlinks()) {
      int other = l.from == g.id ? l.to : l.to == g.id ? l.from : -1;
      if (other >= 0) links.emplace_back(t_.node(other).pci.busId, &l);
    }
    std::sort(links.begin(), links.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& bl : links) {
      const NvLink& l = *bl.second;
      const Node& o = t_.node(l.from == g.id ? l.to : l.from);
      XmlElement& nv = e.add("nvlink");
      nv.set("target", o.pci.busId);
      nv.set("count", std::to_string(l.count));
      uint32_t tclass = o.type == NodeType::kNvSwitch ? kNvSwitchClass : o.pci.classCode;
      nv.set("tclass", hex(tclass, 6));
      nv.set("bw", num(l.gbpsPerLink));
    }
  }

  static void writeNet(const Node& n, XmlElement& e) {
    e.set("name", n.name);
    e.set("dev", std::to_string(n.index));
    e.set("speed", std::to_string(n.speedMbps));
    e.set("port", std::to_string(n.port));
    if (!n.ifName.empty()) e.set("ifname", n.ifName);
    if (!n.guid.empty()) e.set("guid", n.guid);
    e.set("rdma", n.rdma ? "1" : "0");
  }

  const Topology& t_;
};

// ---- reading ----------------------------------------------------------------------

struct PendingLink {
  int gpu;
  std::string target;
  uint32_t tclass;
  int count;
  double bw;
  int line;
};

class Reader {
 public:
  Reader(const std::string& source, std::string* error) : source_(source), error_(error) {}

  bool read(const XmlElement& root, Topology* t) {
    t_ = t;
    if (root.name != "system")
      return fail(root, "root element is <" + root.name + ">, expected <system>");
    if (const std::string* v = root.attr("version")) {
      long ver;
      if (!toLong(*v, 10, &ver)) return fail(root, "version=\"" + *v + "\" is not a number");
    }
    for (const XmlElement& c : root.children) {
      if (c.name == "cpu") {
        if (!readCpu(c)) return false;
      } else if (!readChild(0, c)) {
        return false;
      }
    }
    return resolveLinks() && finish();
  }

 private:
  bool fail(const XmlElement& e, const std::string& what) {
    if (error_) *error_ = source_ + ":" + std::to_string(e.line) + ": " + what;
    return false;
  }
  static bool toLong(const std::string& s, int base, long* out) {
    std::string v = s;
    if (base == 16 && v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X'))
      v = v.substr(2);
    if (v.empty()) return false;
    char* end = nullptr;
    errno = 0;
    long x = strtol(v.c_str(), &end, base);
    if (*end || errno) return false;
    *out = x;
    return true;
  }
  /// Optional integer attribute in [lo, hi]; absent leaves *out unchanged.
  bool intAttr(const XmlElement& e, const char* key, long lo, long hi, long* out,
               int base = 10) {
    const std::string* v = e.attr(key);
    if (!v) return true;
    long x;
    if (!toLong(*v, base, &x) || x < lo || x > hi)
      return fail(e, "<" + e.name + "> attribute " + key + "=\"" + *v + "\" is not " +
                         (base == 16 ? "a hexadecimal number" : "an integer") + " in [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = x;
    return true;
  }
  bool required(const XmlElement& e, const char* key) {
    if (e.attr(key)) return true;
    return fail(e, "<" + e.name + "> needs attribute " + key);
  }
  void ignore(const XmlElement& e, const char* where) {
    BRAID_INFO(kLogGraph, "%s:%d: ignoring unknown element <%s> in %s", source_.c_str(),
               e.line, e.name.c_str(), where);
  }

  bool readCpu(const XmlElement& e) {
    long numaid = -1, package = -1, family = -1, model = -1, memory = 0;
    if (!required(e, "numaid") || !intAttr(e, "numaid", 0, 1 << 20, &numaid)) return false;
    package = numaid;
    if (!intAttr(e, "package", 0, 1 << 20, &package) ||
        !intAttr(e, "familyid", 0, 1 << 30, &family) ||
        !intAttr(e, "modelid", 0, 1 << 30, &model) ||
        !intAttr(e, "memory", 0, (1L << 62), &memory))
      return false;
    for (int n : t_->nodesOfType(NodeType::kNuma))
      if (t_->node(n).index == numaid)
        return fail(e, "second <cpu> with numaid=\"" + std::to_string(numaid) + "\"");
    int pkg = -1;
    for (int p : t_->node(0).children)
      if (t_->node(p).type == NodeType::kPackage && t_->node(p).index == package) pkg = p;
    if (pkg < 0) {
      pkg = t_->addNode(NodeType::kPackage, 0);
      Node& p = t_->node(pkg);
      p.index = int(package);
      if (const std::string* v = e.attr("arch")) p.arch = *v;
      if (const std::string* v = e.attr("vendor")) p.vendor = *v;
      p.familyId = int(family);
      p.modelId = int(model);
    }
    int numa = t_->addNode(NodeType::kNuma, pkg);
    Node& n = t_->node(numa);
    n.index = int(numaid);
    n.memoryBytes = uint64_t(memory);
    if (const std::string* v = e.attr("affinity")) n.affinity = *v;
    bool anyCore = false;
    for (const XmlElement& c : e.children) {
      anyCore |= c.name == "core";
      if (!readChild(numa, c)) return false;
    }
    if (!anyCore && !t_->node(numa).affinity.empty()) {
      // NCCL's files list no cores: one per CPU of the affinity mask.
      std::vector<int> cpus;
      if (!parseMask(t_->node(numa).affinity, &cpus))
        return fail(e, "<cpu> affinity=\"" + t_->node(numa).affinity +
                           "\" is not a cpumask like \"0000ffff,ffffffff\"");
      for (int cpu : cpus) {
        int c = t_->addNode(NodeType::kCore, numa);
        t_->node(c).index = cpu;
        t_->node(c).cpus = {cpu};
      }
    }
    return true;
  }

  /// Linux cpumask text: 32-bit hex words, most significant first ("ff,ffffffff").
  static bool parseMask(const std::string& text, std::vector<int>* cpus) {
    std::vector<std::string> words;
    size_t b = 0;
    for (size_t e; (e = text.find(',', b)) != std::string::npos; b = e + 1)
      words.push_back(text.substr(b, e - b));
    words.push_back(text.substr(b));
    for (size_t w = 0; w < words.size(); ++w) {
      long v = 0;
      if (words[w].size() > 10 || !toLong(words[w], 16, &v) || v < 0 || v > 0xffffffffL)
        return false;
      int base = int(words.size() - 1 - w) * 32;
      for (int bit = 0; bit < 32; ++bit)
        if (v >> bit & 1) cpus->push_back(base + bit);
    }
    std::sort(cpus->begin(), cpus->end());
    return true;
  }

  bool readChild(int parent, const XmlElement& e) {
    if (e.name == "core") return readCore(parent, e);
    if (e.name == "pci") return readPci(parent, e);
    if (e.name == "nic") return readNic(parent, e, nullptr);
    if (e.name == "nvswitch") {
      if (!required(e, "busid")) return false;
      return addNvSwitch(parent, e, PciInfo{lower(*e.attr("busid"))});
    }
    static const char* const kPlaces[][2] = {{"gpu", "<pci>"}, {"nvlink", "<gpu>"},
                                             {"net", "<nic>"}, {"cpu", "<system>"},
                                             {"system", "nothing (it is the root)"}};
    for (const auto& pl : kPlaces)
      if (e.name == pl[0]) return fail(e, "<" + e.name + "> must be inside " + pl[1]);
    ignore(e, parent == 0 ? "<system>" : "<cpu>");
    return true;
  }

  bool readCore(int parent, const XmlElement& e) {
    if (t_->node(parent).type != NodeType::kNuma)
      return fail(e, "<core> must be inside a <cpu>");
    long id = long(t_->node(parent).children.size());
    if (!intAttr(e, "id", 0, 1 << 24, &id)) return false;
    int c = t_->addNode(NodeType::kCore, parent);
    t_->node(c).index = int(id);
    if (const std::string* v = e.attr("cpus")) {
      if (!parseCpuList(*v, &t_->node(c).cpus))
        return fail(e, "<core> attribute cpus=\"" + *v + "\" is not a list like \"0-3,8\"");
    }
    return true;
  }

  bool readPciInfo(const XmlElement& e, PciInfo* p) {
    if (!required(e, "busid")) return false;
    p->busId = lower(*e.attr("busid"));
    if (t_->nodeOfBusId(p->busId) >= 0)
      return fail(e, "second <pci> with busid=\"" + p->busId + "\"");
    long cls = 0, vendor = 0, device = 0, sv = 0, sd = 0, width = 0;
    if (!intAttr(e, "class", 0, 0xffffff, &cls, 16) ||
        !intAttr(e, "vendor", 0, 0xffff, &vendor, 16) ||
        !intAttr(e, "device", 0, 0xffff, &device, 16) ||
        !intAttr(e, "subsystem_vendor", 0, 0xffff, &sv, 16) ||
        !intAttr(e, "subsystem_device", 0, 0xffff, &sd, 16) ||
        !intAttr(e, "link_width", 0, 64, &width))
      return false;
    p->classCode = uint32_t(cls);
    p->vendor = uint16_t(vendor);
    p->device = uint16_t(device);
    p->subVendor = uint16_t(sv);
    p->subDevice = uint16_t(sd);
    p->linkWidth = int(width);
    if (const std::string* v = e.attr("link_speed")) {
      if (!v->empty() && !PciInfo::parseLinkSpeed(*v, &p->linkGts))
        return fail(e, "<pci> link_speed=\"" + *v + "\" is not like \"32.0 GT/s PCIe\"");
    }
    return true;
  }

  bool readPci(int parent, const XmlElement& e) {
    PciInfo p;
    if (!readPciInfo(e, &p)) return false;
    int gpus = 0, nics = 0, nvs = 0, pcis = 0;
    for (const XmlElement& c : e.children) {
      gpus += c.name == "gpu";
      nics += c.name == "nic";
      nvs += c.name == "nvswitch";
      pcis += c.name == "pci";
    }
    if ((gpus > 0) + (nics > 0) + (nvs > 0) + (pcis > 0) > 1 || gpus > 1 || nvs > 1)
      return fail(e, "<pci busid=\"" + p.busId +
                         "\"> must hold one <gpu>, one <nvswitch>, <nic>s or <pci>s, not a mix");
    bool nvidia = p.vendor == 0x10de;
    if (gpus || (!nics && !nvs && !pcis && nvidia && (p.classCode >> 16) == 0x03)) {
      int g = t_->addNode(NodeType::kGpu, parent);
      t_->node(g).pci = p;
      for (const XmlElement& c : e.children)
        if (c.name == "gpu") return readGpu(g, c);
      return true;
    }
    if (nvs || (!nics && !pcis && nvidia && p.classCode == kNvSwitchClass))
      return addNvSwitch(parent, e, p);
    if (nics) {
      for (const XmlElement& c : e.children)
        if (c.name == "nic" && !readNic(parent, c, &p)) return false;
      return true;
    }
    if (pcis || (p.classCode >> 8) == 0x0604) {
      int s = t_->addNode(NodeType::kPciSwitch, parent);
      t_->node(s).pci = p;
      for (const XmlElement& c : e.children) {
        if (c.name == "pci") {
          if (!readPci(s, c)) return false;
        } else {
          ignore(c, "<pci>");
        }
      }
      return true;
    }
    BRAID_INFO(kLogGraph, "%s:%d: ignoring PCI device %s (class %06x): not a GPU, NIC or switch",
               source_.c_str(), e.line, p.busId.c_str(), p.classCode);
    return true;
  }

  bool addNvSwitch(int parent, const XmlElement& e, const PciInfo& p) {
    if (p.classCode == 0 && t_->nodeOfBusId(p.busId) >= 0)
      return fail(e, "second <nvswitch> with busid=\"" + p.busId + "\"");
    int s = t_->addNode(NodeType::kNvSwitch, parent);
    t_->node(s).pci = p;
    return true;
  }

  bool readGpu(int g, const XmlElement& e) {
    long dev = -1, sm = 0, rank = -1;
    if (!intAttr(e, "dev", -1, 1 << 16, &dev) || !intAttr(e, "sm", 0, 10000, &sm) ||
        !intAttr(e, "rank", -1, 1 << 30, &rank))
      return false;
    if (dev >= 0 && t_->gpuOfCudaDev(int(dev)) >= 0)
      return fail(e, "second <gpu> with dev=\"" + std::to_string(dev) + "\"");
    Node& n = t_->node(g);
    n.index = int(dev);
    n.sm = int(sm);
    n.rank = int(rank);
    for (const XmlElement& c : e.children) {
      if (c.name != "nvlink") {
        ignore(c, "<gpu>");
        continue;
      }
      long count = 1, tclass = 0;
      if (!required(c, "target") || !intAttr(c, "count", 1, 1024, &count) ||
          !intAttr(c, "tclass", 0, 0xffffff, &tclass, 16))
        return false;
      double bw = 0;
      if (const std::string* v = c.attr("bw")) {
        char* end = nullptr;
        bw = strtod(v->c_str(), &end);
        if (v->empty() || *end || !(bw > 0) || bw > 1e6)
          return fail(c, "<nvlink> bw=\"" + *v + "\" is not a positive number of GB/s");
      }
      links_.push_back(PendingLink{g, lower(*c.attr("target")), uint32_t(tclass), int(count),
                                   bw, c.line});
    }
    return true;
  }

  bool readNic(int parent, const XmlElement& e, const PciInfo* p) {
    for (const XmlElement& c : e.children) {
      if (c.name != "net") {
        ignore(c, "<nic>");
        continue;
      }
      long dev = -1, speed = 0, port = 1;
      if (!required(c, "name") || !intAttr(c, "dev", -1, 1 << 16, &dev) ||
          !intAttr(c, "speed", -1, 1L << 40, &speed) || !intAttr(c, "port", 0, 1 << 16, &port))
        return false;
      for (int o : t_->nodesOfType(NodeType::kNic))
        if (dev >= 0 && t_->node(o).index == dev)
          return fail(c, "second <net> with dev=\"" + std::to_string(dev) + "\"");
      int n = t_->addNode(NodeType::kNic, parent);
      Node& x = t_->node(n);
      if (p) x.pci = *p;
      x.index = int(dev);
      x.name = *c.attr("name");
      x.speedMbps = speed < 0 ? 0 : speed;
      x.port = int(port);
      if (const std::string* v = c.attr("ifname")) x.ifName = *v;
      if (const std::string* v = c.attr("guid")) x.guid = *v;
      if (const std::string* v = c.attr("rdma")) {
        if (*v != "0" && *v != "1") return fail(c, "<net> rdma=\"" + *v + "\" is not 0 or 1");
        x.rdma = *v == "1";
      }
    }
    return true;
  }

  bool resolveLinks() {
    for (const PendingLink& l : links_) {
      int to = t_->nodeOfBusId(l.target);
      if (to < 0 && l.tclass == kNvSwitchClass) {
        to = t_->addNode(NodeType::kNvSwitch, 0);  // NCCL files name NVSwitches only here
        t_->node(to).pci.busId = l.target;
      }
      XmlElement where;
      where.line = l.line;
      where.name = "nvlink";
      if (to < 0)
        return fail(where, "nvlink target \"" + l.target + "\" is not a GPU or NVSwitch here");
      NodeType tt = t_->node(to).type;
      if (tt != NodeType::kGpu && tt != NodeType::kNvSwitch) {
        BRAID_INFO(kLogGraph, "%s:%d: ignoring NVLink to %s (a %s)", source_.c_str(), l.line,
                   l.target.c_str(), nodeTypeName(tt));
        continue;
      }
      if (to == l.gpu) return fail(where, "nvlink from a GPU to itself");
      double bw = l.bw > 0 ? l.bw : nvlinkGbpsPerLink(t_->node(l.gpu).sm);
      t_->addNvLink(l.gpu, to, l.count, bw);
    }
    return true;
  }

  bool finish() {
    int next = 0;
    for (int s : t_->nodesOfType(NodeType::kNvSwitch)) t_->node(s).index = next++;
    std::vector<int> nics = t_->nodesOfType(NodeType::kNic);
    std::vector<bool> used(nics.size() + 1, false);
    for (int n : nics)
      if (t_->node(n).index >= 0 && size_t(t_->node(n).index) < used.size())
        used[size_t(t_->node(n).index)] = true;
    next = 0;
    for (int n : nics) {
      if (t_->node(n).index >= 0) continue;
      while (used[size_t(next)]) ++next;
      t_->node(n).index = next++;
    }
    t_->assignCudaDevices();
    return true;
  }

  std::string source_;
  std::string* error_;
  Topology* t_ = nullptr;
  std::vector<PendingLink> links_;
};

}  // namespace

std::string Topology::toXml() const {
  Writer w(*this);
  // The header is fixed text so that toXml() depends only on the topology itself.
  return writeXml(w.write(), {"Braid node topology (format: docs/topology.md). This machine's: "
                               "NCCL_TOPO_DUMP_FILE=out.xml braid-info --topo"});
}

std::optional<Topology> Topology::fromXml(const std::string& text, const std::string& source,
                                          std::string* error) {
  XmlElement root;
  if (!parseXml(text, source, &root, error)) return std::nullopt;
  Topology t;
  t.source_ = source;
  Reader r(source, error);
  if (!r.read(root, &t)) return std::nullopt;
  return t;
}

std::optional<Topology> Topology::load(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = path + ": cannot open: " + strerror(errno);
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return fromXml(ss.str(), path, error);
}

bool Topology::save(const std::string& path, std::string* error) const {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::string text = toXml();
  FILE* f = fopen(tmp.c_str(), "w");
  bool ok = f && fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) ok = false;
  if (!ok) {
    if (error) *error = path + ": cannot write: " + strerror(errno);
    unlink(tmp.c_str());
  }
  return ok;
}

}  // namespace topo
}  // namespace braid
