// CollNetState: a communicator's in-network reduction (CollNet), set up at init.
//
// As NCCL does, a communicator uses CollNet when NCCL_COLLNET_ENABLE=1, it spans at
// least NCCL_COLLNET_NODE_THRESHOLD nodes of equal size, and a collnet is there: the
// ncclCollNetPlugin_v11 table of the external net plugin's library when that plugin
// carries the communicator's traffic, else Braid's braid-switch client (BRAID_SWITCH).
// Setup is collective: every rank listens once per channel, the handles are allgathered
// over the bootstrap, and the ranks with the same local index on every node connect one
// collComm per channel (a switch group, members in node order: the plans' kSwitchPeer,
// algorithms/plan.h). If any rank fails, every rank closes what it made and goes on
// without CollNet (a WARN says why), as NCCL falls back to point-to-point.
//
// Each collComm is wrapped in a CollNetPort (the executor's FIFOs to and from the
// switch), progressed by the CollNetProxy thread; the SendSide/RecvSide of
// (kSwitchPeer, channel) in the communicator's connection table point at it.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "braid/net_plugin.h"
#include "nccl.h"
#include "transports/collnet/collnet_port.h"

namespace braid {

struct Comm;

class CollNetState {
 public:
  /// Collective over comm's ranks (after the layout is known; called when some rank set
  /// NCCL_COLLNET_ENABLE, `everyRank` when all did). *out stays null when CollNet is
  /// off, not possible, or failed (then with a WARN); errors of the bootstrap itself are
  /// returned.
  static ncclResult_t setup(Comm* comm, bool everyRank, std::unique_ptr<CollNetState>* out);
  ~CollNetState();
  /// The communicator failed: closes every collComm now (the switch then fails the
  /// group for the other members at once, instead of leaving them waiting for this
  /// rank's messages) and stops progressing the ports. Later ops find the ports failed.
  void abandon();

  /// The collnet supports this reduction (built-in type and op; Avg and PreMulSum
  /// reach it as sums).
  bool supports(ncclDataType_t type, ncclRedOp_t op) const;
  CollNetPort* port(int channel) const;
  int channels() const { return int(ports_.size()); }
  /// Re-attaches the executor's ends of the ports to a connection table emptied by
  /// ncclCommSuspend (the ports and their collComms stay).
  void attachEnds(Comm* comm) const;
  const std::string& name() const { return name_; }

 private:
  CollNetState() = default;
  void closeAll();

  const ncclCollNet_v11_t* coll_ = nullptr;
  void* ctx_ = nullptr;
  std::string name_;
  std::vector<void*> collComms_;  ///< per channel
  std::vector<std::shared_ptr<CollNetPort>> ports_;
  bool registered_ = false;       ///< ports handed to the CollNetProxy
  std::mutex closeMu_;            ///< abandon() (any thread) vs the destructor
  unsigned char supported_[32][8] = {};  ///< [type][op] from reduceSupport
};

}  // namespace braid
