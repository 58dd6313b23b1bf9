// Transport: sets up connections (a pair of FIFOs per peer and channel) between ranks.
//
// Every transport has the same small interface. A connection is made in three phases
// so that one thread can connect many peers (and many communicators) at once without
// deadlock; the core exchanges the descriptors over the bootstrap network:
//   1. setupRecv   on the receiving rank: create the receive side, fill a descriptor;
//   2. connectSend on the sending rank, with the receiver's descriptor;
//   3. finishRecv  on the receiving rank (e.g. accept a socket); may be a no-op.
// After that the executor moves data through FifoSender / FifoReceiver views; network
// transports progress their bytes with a proxy thread of their own. The interface
// belongs to the executor that uses it (src/exec); the transports under transports/
// implement it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nccl.h"
#include "src/exec/dev_conn.h"
#include "src/exec/fifo.h"

namespace braid {

/// What a rank tells every other rank about itself at init (plain data, exchanged by
/// the bootstrap allgather).
struct PeerInfo {
  int rank = -1;
  int pid = 0;
  uint64_t hostHash = 0;     ///< hostname + boot id, or NCCL_HOSTID
  uint64_t machineHash = 0;  ///< hostname + boot id (the physical machine, for CPU sharing)
  uint64_t processHash = 0;  ///< unique per process (host, pid, random)
  uint64_t pidNamespace = 0;  ///< the pid namespace `pid` means something in (0: unknown)
  int cudaDev = -1;
  char busId[16] = {};       ///< PCI bus id of cudaDev ("" without a GPU)
  char hostname[64] = {};
  char netAddr[64] = {};     ///< "ip" this rank's data sockets listen on (NCCL_SOCKET_IFNAME)
};

/// FIFO geometry of one connection (from NCCL_BUFFSIZE and BRAID_FIFO_SLOTS).
struct FifoGeometry {
  uint32_t nslots = 8;
  uint64_t slotBytes = 512 << 10;
  uint64_t capacity() const { return uint64_t(nslots) * slotBytes; }
};

/// Opaque bytes a receiver hands to its sender in phase 1 -> 2.
struct ConnDescriptor {
  static constexpr size_t kBytes = 192;
  uint32_t transport = 0;  ///< TransportId of the creator, checked by the peer
  char data[kBytes] = {};
};

/// What a transport needs to know to connect this rank to one peer.
struct ConnectContext {
  const PeerInfo* self = nullptr;
  const PeerInfo* peer = nullptr;
  int channel = 0;
  FifoGeometry geometry;
  uint64_t secret = 0;         ///< job secret: every data socket must present it
  uint64_t commHash = 0;       ///< identifies the communicator (for names, logs)
  int timeoutMs = 60000;       ///< for blocking waits during setup
  const std::atomic<bool>* abortFlag = nullptr;  ///< setup gives up when set
  /// A connection for the CUDA executor: the FIFO must be reachable by this rank's GPU
  /// (cudaDev), and the transport fills SendSide::dev / RecvSide::dev.
  bool device = false;
  /// Network for the net transport by name ("" = automatic: NCCL_NET's rules).
  std::string netName;
};

/// Resources owned by one end of a connection (shm mapping, socket, proxy entry...).
/// Destroying it releases them.
class ConnResource {
 public:
  virtual ~ConnResource() = default;
  /// Called by the executor when it has waited a while on this connection: returns
  /// ncclSuccess if the peer is still there, else an error (and sets *why).
  virtual ncclResult_t checkPeer(std::string* why) { (void)why; return ncclSuccess; }
  /// Whether this end has finished with its peer: for a send end, everything published
  /// has left this process (a proxy may still be handing it to the network after the
  /// op completed) or never will (broken); transports may add a closing handshake.
  /// Teardown waits for all ends under one deadline (Comm::drainConnections) before
  /// destroying them.
  virtual bool drained() { return true; }
};

struct SendSide {
  FifoSender fifo;
  bool allowDirect = false;  ///< receiver shares our address space (local transport)
  /// Non-null where the receiver may pull direct entries from our process
  /// (process_vm_readv): allowed while *remoteDirect == 1 (the receiver tested it).
  const std::atomic<uint32_t>* remoteDirect = nullptr;
  DevConn dev;  ///< device connections (ConnectContext::device): the kernel's view
  std::unique_ptr<ConnResource> res;
};
struct RecvSide {
  FifoReceiver fifo;
  DevConn dev;  ///< device connections: the kernel's view
  std::unique_ptr<ConnResource> res;
};

enum class TransportId : uint32_t { kLocal = 1, kShm = 2, kNet = 3, kP2p = 4 };

class Transport {
 public:
  virtual ~Transport() = default;
  virtual TransportId id() const = 0;
  virtual const char* name() const = 0;
  /// Whether this transport can connect the two ranks at all.
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  virtual ncclResult_t setupRecv(const ConnectContext& ctx, RecvSide* out,
                                 ConnDescriptor* desc) = 0;
  virtual ncclResult_t connectSend(const ConnectContext& ctx, const ConnDescriptor& desc,
                                   SendSide* out) = 0;
  virtual ncclResult_t finishRecv(const ConnectContext& ctx, RecvSide* side) {
    (void)ctx; (void)side; return ncclSuccess;
  }
};

/// The built-in transports (singletons).
Transport& localTransport();
Transport& shmTransport();
/// Between hosts, over the network NetRegistry picks (transports/net/net_registry.h).
Transport& netTransport();
/// CUDA IPC / same-process device memory (device connections only).
Transport& p2pTransport();

}  // namespace braid
