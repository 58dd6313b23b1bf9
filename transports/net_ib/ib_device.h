// IbDevice: one active port of one RDMA HCA, i.e. one device of the IB net. Found once
// per process (ibv_get_device_list, NCCL_IB_HCA filter, port state ACTIVE), with the
// addressing a queue pair needs (LID for InfiniBand, GID for RoCE), and kept for the
// life of the process, as NCCL keeps its device contexts.
#pragma once
#include "transports/net_ib/ibv_api.h"
#ifdef BRAID_HAVE_IBVERBS
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/net_ib/ib_mr_cache.h"

namespace braid {
namespace ib {

struct IbDevice {
  std::string name;  ///< "rxe0:1" style, for logs
  std::string hca;   ///< "rxe0"
  int port = 1;
  ibv_context* ctx = nullptr;  ///< shared by the ports of one HCA
  ibv_pd* pd = nullptr;        ///< one per HCA, so regions work on every comm
  IbMrCache* mrCache = nullptr;
  uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  ibv_mtu activeMtu = IBV_MTU_1024;
  uint16_t lid = 0;
  int gidIndex = 0;
  ibv_gid gid{};
  int speedMbps = 0;
  std::string pciPath;  ///< sysfs realpath of the device, "" when it has none
  uint64_t guid = 0;
  int maxQp = 0;
  uint32_t maxMsg = 0;
  bool dmabuf = false;  ///< ibv_reg_dmabuf_mr works on this HCA

  bool roce() const { return linkLayer == IBV_LINK_LAYER_ETHERNET; }
};

/// The IB net's devices, discovered on first call (thread-safe), again on the first call
/// in a child of fork() (it cannot use the parent's contexts). Empty when there is no
/// active port that NCCL_IB_HCA allows, or when libibverbs cannot be loaded.
const std::vector<IbDevice>& ibDevices();

/// Whether an NCCL_IB_HCA-style filter admits hca:port (exposed for tests).
bool ibHcaAllowed(const std::string& filter, const std::string& hca, int port);

/// Printable GID ("::ffff:10.0.0.1" style), for logs and messages.
std::string gidToString(const ibv_gid& gid);

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
