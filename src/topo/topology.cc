#include "src/topo/topology.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace braid {
namespace topo {

const char* nodeTypeName(NodeType t) {
  switch (t) {
    case NodeType::kMachine: return "machine";
    case NodeType::kPackage: return "package";
    case NodeType::kNuma: return "numa";
    case NodeType::kCore: return "core";
    case NodeType::kPciSwitch: return "pciswitch";
    case NodeType::kGpu: return "gpu";
    case NodeType::kNvSwitch: return "nvswitch";
    case NodeType::kNic: return "nic";
  }
  return "?";
}

const char* pathTypeName(PathType t) {
  switch (t) {
    case PathType::kLoc: return "LOC";
    case PathType::kNvl: return "NVL";
    case PathType::kNvb: return "NVB";
    case PathType::kPix: return "PIX";
    case PathType::kPxb: return "PXB";
    case PathType::kPhb: return "PHB";
    case PathType::kSys: return "SYS";
    case PathType::kNet: return "NET";
  }
  return "?";
}

double PciInfo::gbps() const {
  if (linkGts <= 0 || linkWidth <= 0) return 0;
  // Gen1/2 use 8b/10b line coding, Gen3+ 128b/130b (Gen6's FLIT coding is close to it).
  double coding = linkGts < 8 ? 0.8 : 128.0 / 130.0;
  return linkGts * linkWidth * coding / 8.0;
}

std::string PciInfo::linkSpeedText() const {
  if (linkGts <= 0) return "";
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f GT/s PCIe", linkGts);
  return buf;
}

bool PciInfo::parseLinkSpeed(const std::string& text, double* gts) {
  const char* s = text.c_str();
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || !(v > 0) || v > 1000) return false;
  std::string rest(end);
  rest.erase(0, rest.find_first_not_of(' '));
  if (!rest.empty() && rest.compare(0, 4, "GT/s") != 0) return false;
  *gts = v;
  return true;
}

double nvlinkGbpsPerLink(int sm) {
  // Per link and direction: NVLink1 (sm_60) 20, NVLink2/3 (sm_70/80) 25,
  // NVLink4 (sm_90) 25 (18 links: 450 GB/s), NVLink5 (sm_100+) 50 (18 links: 900 GB/s).
  if (sm >= 100) return 50.0;
  if (sm >= 70) return 25.0;
  return 20.0;
}

Topology::Topology() {
  nodes_.emplace_back();
  nodes_[0].id = 0;
  nodes_[0].type = NodeType::kMachine;
}

int Topology::addNode(NodeType type, int parent) {
  int id = int(nodes_.size());
  nodes_.emplace_back();
  Node& n = nodes_.back();
  n.id = id;
  n.type = type;
  n.parent = parent;
  if (parent >= 0) nodes_[size_t(parent)].children.push_back(id);
  return id;
}

void Topology::addNvLink(int from, int to, int count, double gbpsPerLink) {
  for (NvLink& l : nvlinks_) {
    if ((l.from == from && l.to == to) || (l.from == to && l.to == from)) {
      l.count = count;
      l.gbpsPerLink = gbpsPerLink;
      return;
    }
  }
  nvlinks_.push_back(NvLink{from, to, count, gbpsPerLink});
}

void Topology::assignCudaDevices() {
  std::vector<int> gpus = nodesOfType(NodeType::kGpu);
  std::sort(gpus.begin(), gpus.end(), [&](int a, int b) {
    return node(a).pci.busId < node(b).pci.busId;
  });
  std::vector<bool> used;
  for (int g : gpus)
    if (node(g).index >= 0) {
      if (size_t(node(g).index) >= used.size()) used.resize(size_t(node(g).index) + 1);
      used[size_t(node(g).index)] = true;
    }
  int next = 0;
  for (int g : gpus) {
    if (node(g).index >= 0) continue;
    while (size_t(next) < used.size() && used[size_t(next)]) ++next;
    node(g).index = next++;
  }
}

std::vector<int> Topology::nodesOfType(NodeType t) const {
  std::vector<int> out;
  std::function<void(int)> walk = [&](int id) {
    if (nodes_[size_t(id)].type == t) out.push_back(id);
    for (int c : nodes_[size_t(id)].children) walk(c);
  };
  walk(0);
  return out;
}

int Topology::count(NodeType t) const {
  int n = 0;
  for (const Node& x : nodes_) n += x.type == t;
  return n;
}

int Topology::gpuOfCudaDev(int cudaDev) const {
  if (cudaDev < 0) return -1;
  for (const Node& n : nodes_)
    if (n.type == NodeType::kGpu && n.index == cudaDev) return n.id;
  return -1;
}

int Topology::nodeOfBusId(const std::string& busId) const {
  if (busId.empty()) return -1;
  std::string want = busId;
  for (char& c : want) c = char(tolower(static_cast<unsigned char>(c)));
  for (const Node& n : nodes_)
    if (n.pci.busId == want && n.type != NodeType::kNic) return n.id;
  for (const Node& n : nodes_)
    if (n.pci.busId == want) return n.id;
  return -1;
}

int Topology::ancestorOf(int id, NodeType t) const {
  for (; id >= 0; id = nodes_[size_t(id)].parent)
    if (nodes_[size_t(id)].type == t) return id;
  return -1;
}

double Topology::interSocketGbps() const {
  // One figure per CPU family for the socket-to-socket link, per direction.
  for (const Node& n : nodes_) {
    if (n.type != NodeType::kPackage) continue;
    if (n.vendor == "GenuineIntel") return n.modelId >= 0x8f ? 20.0 : 10.0;
    if (n.vendor == "AuthenticAMD" || n.vendor == "HygonGenuine") return 16.0;
    if (n.arch == "ppc64le" || n.arch == "ppc64") return 32.0;
    return 12.0;
  }
  return 12.0;
}

double Topology::edgeGbps(int child) const {
  const Node& n = nodes_[size_t(child)];
  switch (n.type) {
    case NodeType::kPackage: return interSocketGbps();
    case NodeType::kMachine:
    case NodeType::kNuma:
    case NodeType::kCore: return kLocGbps;
    default: {
      double g = n.pci.gbps();
      return g > 0 ? g : kDefaultPciGbps;
    }
  }
}

double Topology::directNvlinkGbps(int a, int b) const {
  double g = 0;
  for (const NvLink& l : nvlinks_)
    if ((l.from == a && l.to == b) || (l.from == b && l.to == a)) g += l.gbps();
  return g;
}

double Topology::nvlinkGbps(int a, int b) const {
  if (a == b) return 0;
  double g = directNvlinkGbps(a, b);
  if (nodes_[size_t(a)].type == NodeType::kGpu && nodes_[size_t(b)].type == NodeType::kGpu) {
    for (const Node& s : nodes_) {
      if (s.type != NodeType::kNvSwitch) continue;
      g += std::min(directNvlinkGbps(a, s.id), directNvlinkGbps(b, s.id));
    }
  }
  return g;
}

Path Topology::treePath(int a, int b) const {
  std::vector<int> up;  // a's ancestors-or-self
  for (int x = a; x >= 0; x = nodes_[size_t(x)].parent) up.push_back(x);
  std::vector<int> down;  // b up to (excluding) the common ancestor
  int lca = -1;
  for (int x = b; x >= 0; x = nodes_[size_t(x)].parent) {
    if (std::find(up.begin(), up.end(), x) != up.end()) {
      lca = x;
      break;
    }
    down.push_back(x);
  }
  Path p;
  p.gbps = 1e30;
  int switches = 0;
  auto visit = [&](int x) {
    if (nodes_[size_t(x)].type == NodeType::kPciSwitch) ++switches;
  };
  for (int x : up) {  // edges a..lca
    visit(x);
    if (x == lca) break;
    p.gbps = std::min(p.gbps, edgeGbps(x));
    ++p.hops;
  }
  for (int x : down) {
    visit(x);
    p.gbps = std::min(p.gbps, edgeGbps(x));
    ++p.hops;
  }
  const Node& l = nodes_[size_t(lca)];
  bool pciEnd = nodes_[size_t(a)].isPciDevice() || nodes_[size_t(b)].isPciDevice();
  bool endIsLca = lca == a || lca == b;
  switch (l.type) {
    case NodeType::kMachine:
    case NodeType::kPackage:
      p.type = endIsLca ? (pciEnd ? PathType::kPhb : PathType::kLoc) : PathType::kSys;
      if (endIsLca && l.type == NodeType::kMachine) p.type = PathType::kSys;
      break;
    case NodeType::kNuma:
    case NodeType::kCore: p.type = pciEnd ? PathType::kPhb : PathType::kLoc; break;
    default: p.type = switches <= 1 ? PathType::kPix : PathType::kPxb; break;
  }
  if (p.hops == 0) p.gbps = kLocGbps;
  return p;
}

Path Topology::path(int a, int b) const {
  if (a < 0 || b < 0 || a >= size() || b >= size()) return Path{PathType::kNet, 0, 0};
  if (a == b) return Path{PathType::kLoc, kLocGbps, 0};
  const Node& na = nodes_[size_t(a)];
  const Node& nb = nodes_[size_t(b)];
  auto nvCapable = [](const Node& n) {
    return n.type == NodeType::kGpu || n.type == NodeType::kNvSwitch;
  };
  Path p;
  bool done = false;
  if (nvCapable(na) && nvCapable(nb)) {
    double direct = directNvlinkGbps(a, b);
    double g = nvlinkGbps(a, b);
    if (g > 0) {
      p = Path{PathType::kNvl, g, direct > 0 ? 1 : 2};
      done = true;
    } else if (na.type == NodeType::kGpu && nb.type == NodeType::kGpu) {
      double best = 0;  // NVB: through one intermediate GPU
      for (const Node& m : nodes_)
        if (m.type == NodeType::kGpu && m.id != a && m.id != b)
          best = std::max(best, std::min(nvlinkGbps(a, m.id), nvlinkGbps(m.id, b)));
      if (best > 0) {
        p = Path{PathType::kNvb, best, 2};
        done = true;
      }
    }
  }
  if (!done) p = treePath(a, b);
  for (const Node* n : {&na, &nb})
    if (n->type == NodeType::kNic) p.gbps = std::min(p.gbps, n->effectiveSpeedMbps() / 8000.0);
  return p;
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::vector<int> v = cpus;
  std::sort(v.begin(), v.end());
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

bool parseCpuList(const std::string& text, std::vector<int>* cpus) {
  cpus->clear();
  const char* p = text.c_str();
  while (*p) {
    char* end = nullptr;
    long a = strtol(p, &end, 10);
    if (end == p || a < 0 || a > 1 << 20) return false;
    long b = a;
    p = end;
    if (*p == '-') {
      b = strtol(p + 1, &end, 10);
      if (end == p + 1 || b < a || b > 1 << 20) return false;
      p = end;
    }
    for (long i = a; i <= b; ++i) cpus->push_back(int(i));
    if (*p == ',') {
      ++p;
      if (!*p) return false;
    } else if (*p) {
      return false;
    }
  }
  return true;
}

namespace {

std::string fmtGbps(double g) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f GB/s", g);
  return buf;
}

}  // namespace

std::string Topology::describeTree() const {
  std::string out;
  std::function<void(int, int)> walk = [&](int id, int depth) {
    const Node& n = nodes_[size_t(id)];
    if (n.type == NodeType::kCore) return;  // summarized on the NUMA line
    std::string line(size_t(depth) * 2, ' ');
    line += nodeTypeName(n.type);
    switch (n.type) {
      case NodeType::kMachine: line += " (" + source_ + ")"; break;
      case NodeType::kPackage:
        line += " " + std::to_string(n.index) + " (" + n.vendor + " " + n.arch + ")";
        break;
      case NodeType::kNuma: {
        std::vector<int> cpus;
        int cores = 0;
        for (int c : n.children)
          if (nodes_[size_t(c)].type == NodeType::kCore) {
            ++cores;
            cpus.insert(cpus.end(), nodes_[size_t(c)].cpus.begin(),
                        nodes_[size_t(c)].cpus.end());
          }
        char mem[48];
        snprintf(mem, sizeof mem, "%.1f GiB", double(n.memoryBytes) / (1u << 30));
        line += " " + std::to_string(n.index) + " (" + std::to_string(cores) + " cores, cpus " +
                formatCpuList(cpus) + ", " + mem + ")";
        break;
      }
      case NodeType::kGpu:
        line += " " + std::to_string(n.index) + " sm_" + std::to_string(n.sm);
        break;
      case NodeType::kNic:
        line += " " + n.name + (n.ifName.empty() || n.ifName == n.name ? "" : "/" + n.ifName) +
                (n.rdma ? " rdma port " + std::to_string(n.port) : "") + " " +
                (n.speedMbps > 0 ? std::to_string(n.speedMbps / 1000) + " Gb/s"
                                 : std::string("speed unknown"));
        break;
      case NodeType::kNvSwitch: line += " " + std::to_string(n.index); break;
      default: break;
    }
    if (!n.pci.busId.empty()) {
      line += " " + n.pci.busId;
      if (n.pci.gbps() > 0)
        line += " [" + n.pci.linkSpeedText() + " x" + std::to_string(n.pci.linkWidth) + ", " +
                fmtGbps(n.pci.gbps()) + "]";
    }
    out += line + "\n";
    for (int c : n.children) walk(c, depth + 1);
  };
  walk(0, 0);
  for (int g : nodesOfType(NodeType::kGpu)) {  // one line per GPU with NVLinks
    std::string line;
    for (const NvLink& l : nvlinks_) {
      int o = l.from == g ? l.to : l.to == g ? l.from : -1;
      if (o < 0) continue;
      const Node& b = nodes_[size_t(o)];
      line += std::string(line.empty() ? "" : ", ") + nodeTypeName(b.type) + " " +
              std::to_string(b.index) + " x" + std::to_string(l.count);
    }
    if (line.empty()) continue;
    double total = 0;
    for (const NvLink& l : nvlinks_)
      if (l.from == g || l.to == g) total += l.gbps();
    out += "nvlinks of gpu " + std::to_string(nodes_[size_t(g)].index) + ": " + line + " (" +
           fmtGbps(total) + ")\n";
  }
  return out;
}

Topology Topology::minimal() {
  Topology t;
  t.source_ = "minimal";
  int pkg = t.addNode(NodeType::kPackage, 0);
  t.node(pkg).index = 0;
  int numa = t.addNode(NodeType::kNuma, pkg);
  t.node(numa).index = 0;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  for (long i = 0; i < n; ++i) {
    int c = t.addNode(NodeType::kCore, numa);
    t.node(c).index = int(i);
    t.node(c).cpus = {int(i)};
  }
  return t;
}

}  // namespace topo
}  // namespace braid
