// One node of the node topology (src/topo/topology.h): a machine, CPU package, NUMA
// node, core, PCI switch, GPU, NVSwitch or NIC port, with what we know about it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace braid {
namespace topo {

enum class NodeType : uint8_t {
  kMachine,    ///< the root: one per topology
  kPackage,    ///< a CPU socket
  kNuma,       ///< a NUMA node (NCCL's <cpu> element); PCI trees hang below it
  kCore,       ///< a physical core (its hardware threads in Node::cpus)
  kPciSwitch,  ///< a PCIe switch (upstream port; its downstream ports folded in)
  kGpu,        ///< an NVIDIA GPU (PCI class 0x03xx, vendor 0x10de)
  kNvSwitch,   ///< an NVSwitch (PCI-visible, or only known from NVLink targets)
  kNic,        ///< one network port: an RDMA device port or a network interface
};

/// "machine", "package", "numa", "core", "pciswitch", "gpu", "nvswitch", "nic".
const char* nodeTypeName(NodeType t);

/// PCI identity and link of a device or switch; all zero / empty when unknown.
struct PciInfo {
  std::string busId;     ///< "0000:19:00.0" (lower case); empty if not a PCI device
  uint32_t classCode = 0;  ///< 24-bit class: 0x030200 GPU, 0x060400 bridge, 0x020000 NIC
  uint16_t vendor = 0, device = 0, subVendor = 0, subDevice = 0;
  double linkGts = 0;    ///< per-lane transfer rate in GT/s (2.5, 5, 8, 16, 32, 64)
  int linkWidth = 0;     ///< lanes

  /// Link bandwidth in GB/s per direction (lanes x rate x line coding); 0 if unknown.
  double gbps() const;
  /// NCCL's text form of the rate, "32.0 GT/s PCIe"; empty if unknown.
  std::string linkSpeedText() const;
  /// Parses "32.0 GT/s PCIe", "32 GT/s" or "32"; false if malformed.
  static bool parseLinkSpeed(const std::string& text, double* gts);
};

/// A node. Fields that do not apply to a node's type stay at their defaults.
struct Node {
  int id = -1;            ///< index in Topology::nodes()
  NodeType type = NodeType::kMachine;
  int parent = -1;        ///< -1 for the machine
  std::vector<int> children;
  /// Package: socket id. Numa: NUMA node id. Core: core id. Gpu: CUDA device index
  /// (-1 unknown). NvSwitch: its number. Nic: NCCL's net "dev" index.
  int index = -1;

  PciInfo pci;            ///< PciSwitch, Gpu, Nic (if on PCI), NvSwitch (if PCI-visible)

  // Package (written on each <cpu> of the package)
  std::string arch, vendor;  ///< "x86_64", "GenuineIntel" / "AuthenticAMD"
  int familyId = -1, modelId = -1;

  // Numa
  uint64_t memoryBytes = 0;
  std::string affinity;   ///< Linux cpumask text "ffffffff,ffffffff" (NCCL's affinity)

  // Core: its hardware threads (OS cpu numbers), e.g. {0, 112}
  std::vector<int> cpus;

  // Gpu
  int sm = 0;             ///< compute capability x10 (90 = sm_90); 0 unknown
  int rank = -1;          ///< communicator rank using it, if recorded (NCCL's rank=)

  // Nic
  std::string name;       ///< NCCL's net name: the RDMA device ("mlx5_0") or interface
  std::string ifName;     ///< the network interface of the port ("ibp24s0", "eth0")
  std::string guid;       ///< port/node GUID if known
  int port = 1;           ///< RDMA port number (1-based)
  int64_t speedMbps = 0;  ///< link speed in Mb/s; 0 unknown
  bool rdma = false;      ///< an RDMA (InfiniBand/RoCE) port, not only a socket NIC

  bool isPciDevice() const {
    return type == NodeType::kPciSwitch || type == NodeType::kGpu ||
           type == NodeType::kNvSwitch || type == NodeType::kNic;
  }
  /// The NIC speed to plan with: speedMbps, or 10 Gb/s when unknown (as NCCL).
  int64_t effectiveSpeedMbps() const { return speedMbps > 0 ? speedMbps : 10000; }
};

/// NVLinks from GPU `from` to `to` (a GPU or an NVSwitch): `count` links of `gbpsPerLink`
/// GB/s per direction each. Links are symmetric; each pair is stored once.
struct NvLink {
  int from = -1, to = -1;
  int count = 0;
  double gbpsPerLink = 0;
  double gbps() const { return count * gbpsPerLink; }
};

/// "0-3,8,10-11" from a list of CPU numbers (sorted, ranges folded).
std::string formatCpuList(const std::vector<int>& cpus);
/// Parses "0-3,8"; false if malformed.
bool parseCpuList(const std::string& text, std::vector<int>* cpus);

/// GB/s per direction of one NVLink for a GPU of this sm (NVLink generation); 20 for
/// unknown sm.
double nvlinkGbpsPerLink(int sm);

}  // namespace topo
}  // namespace braid
