// The node topology: what one machine is made of, as NCCL sees it. A tree
//   machine > package > numa > { core, PCI switch > ... > { GPU, NIC port, NVSwitch } }
// plus NVLinks between GPUs and GPU-NVSwitch, and the path (type, bottleneck bandwidth,
// hops) between any two nodes. Built by detect() (hwloc), or read from our XML format
// (NCCL's element names: <system>, <cpu>, <pci>, <gpu>, <nvlink>, <nic>, <net>; see
// docs/topology.md), and written back by toXml()/save().
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "src/topo/node.h"
#include "src/topo/path.h"

namespace braid {
namespace topo {

class Topology {
 public:
  /// A topology with only the machine node (id 0).
  Topology();

  // ---- discovery and files ------------------------------------------------------
  /// Detects this machine with hwloc (CPU packages, NUMA nodes, cores, the PCI tree of
  /// GPUs and NICs; NVLinks when NVML can be loaded). Prints nothing. nullopt and
  /// *error on failure.
  static std::optional<Topology> detect(std::string* error = nullptr);
  /// One package, one NUMA node and sysconf's online CPUs as cores: the fallback.
  static Topology minimal();
  /// Parses our XML format. `source` names the text in errors ("file.xml:12: ...").
  static std::optional<Topology> fromXml(const std::string& text, const std::string& source,
                                         std::string* error);
  /// Reads and parses a file.
  static std::optional<Topology> load(const std::string& path, std::string* error);
  /// The XML text (deterministic; fromXml(toXml()) gives the same toXml()).
  std::string toXml() const;
  /// Writes toXml() to a file (atomically: a temporary file renamed).
  bool save(const std::string& path, std::string* error) const;
  /// Where this topology came from: "hwloc", "minimal" or the file path.
  const std::string& source() const { return source_; }
  void setSource(const std::string& s) { source_ = s; }

  // ---- building ----------------------------------------------------------------
  /// Adds a node under `parent`; returns its id. References to nodes stay valid only
  /// until the next addNode.
  int addNode(NodeType type, int parent);
  /// Adds (or, if the pair exists, replaces) NVLinks between a GPU and a GPU/NVSwitch.
  void addNvLink(int from, int to, int count, double gbpsPerLink);
  /// Gives GPUs without a CUDA index (-1) the next free indices in bus-id order.
  void assignCudaDevices();
  Node& node(int id) { return nodes_[size_t(id)]; }

  // ---- queries ----------------------------------------------------------------
  const Node& node(int id) const { return nodes_[size_t(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<NvLink>& nvlinks() const { return nvlinks_; }
  int size() const { return int(nodes_.size()); }
  /// Ids of every node of a type, in tree (depth-first) order.
  std::vector<int> nodesOfType(NodeType t) const;
  int count(NodeType t) const;
  /// The GPU node with this CUDA device index, or -1.
  int gpuOfCudaDev(int cudaDev) const;
  /// The node with this PCI bus id (case-insensitive), or -1.
  int nodeOfBusId(const std::string& busId) const;
  /// The nearest ancestor-or-self of this type, or -1.
  int ancestorOf(int id, NodeType t) const;
  /// Path between two nodes: NVLink when both are GPUs/NVSwitches connected by NVLink
  /// (directly, through NVSwitches, or NVB through one GPU), else the tree path. For a
  /// NIC endpoint the bandwidth is also limited by the port speed.
  Path path(int a, int b) const;
  /// NVLink bandwidth between two nodes: direct links plus, for two GPUs, what they
  /// share through each NVSwitch (min of both sides); 0 if none.
  double nvlinkGbps(int a, int b) const;
  /// Bandwidth of the SMP interconnect between packages (from the CPU vendor).
  double interSocketGbps() const;
  /// An indented text tree (cores summarized per NUMA node) and the NVLinks.
  std::string describeTree() const;

 private:
  double edgeGbps(int child) const;
  double directNvlinkGbps(int a, int b) const;
  Path treePath(int a, int b) const;

  std::vector<Node> nodes_;
  std::vector<NvLink> nvlinks_;
  std::string source_;
};

/// GB/s of a bus: NCCL-like constants used where nothing better is known.
constexpr double kLocGbps = 5000.0;        ///< inside a NUMA node
constexpr double kDefaultPciGbps = 12.0;   ///< a PCI link of unknown speed

}  // namespace topo
}  // namespace braid
