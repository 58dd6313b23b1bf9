// P2p transport internals shared with the other transports and the tests: the
// descriptor a receiver hands its sender, the rule that decides whether two ranks can
// use device memory directly, and the RAII helpers that make memory reachable by this
// rank's GPU. The transport itself is p2pTransport() (src/exec/transport.h).
//
// A p2p connection's FIFO (FifoLayout) lives in the receiving rank's device memory.
// The sender's kernel writes slots and `tail` there; the receiver's kernel reads them
// and writes `head`. The sender reaches the region
//   * in the same process: through the receiver's pointer as is (same GPU; a second
//     GPU of the process would need peer access enabled, see p2pCanConnect);
//   * in another process: through a CUDA IPC handle of the allocation (+ offset),
//     opened with lazy peer access; this also covers several processes on one GPU.
// The host views (SendSide::fifo / RecvSide::fifo) of a p2p connection stay invalid:
// the host cannot dereference device memory.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "nccl.h"
#include "src/os/cuda_rt.h"
#include "src/exec/transport.h"

namespace braid {

/// What the receiver puts in ConnDescriptor::data (fits in ConnDescriptor::kBytes).
struct P2pDescriptor {
  static constexpr uint64_t kMagic = 0x4252414944503250ull;  // "BRAIDP2P"
  uint64_t magic = 0;
  uint64_t processHash = 0;   ///< creator's PeerInfo::processHash
  uint64_t devPtr = 0;        ///< the region in the creator's address space
  uint64_t ipcOffset = 0;     ///< the region's offset in its allocation (with ipcHandle)
  uint64_t slotBytes = 0;
  uint64_t creatorStart = 0;  ///< creator's process start time (0: unknown)
  uint64_t creatorPidNs = 0;  ///< creator's pid namespace (0: unknown)
  int32_t creatorPid = 0;
  int32_t creatorRank = -1;
  uint32_t nslots = 0;
  int32_t cudaDev = -1;       ///< creator's device index (in its own process)
  uint32_t ipcValid = 0;      ///< 1: ipcHandle/ipcOffset are filled
  uint32_t pad = 0;
  char busId[16] = {};        ///< creator's GPU
  unsigned char ipcHandle[kCudaIpcHandleBytes] = {};
};
static_assert(sizeof(P2pDescriptor) <= ConnDescriptor::kBytes, "p2p descriptor too large");

/// Writes d into out (transport id kP2p).
void encodeP2pDescriptor(const P2pDescriptor& d, ConnDescriptor* out);
/// Reads a descriptor received from rank peerRank; checks that it is a p2p one with a
/// sane geometry. Errors are set with a message naming the rank.
ncclResult_t decodeP2pDescriptor(const ConnDescriptor& in, int peerRank, P2pDescriptor* out);

/// Whether two PCI bus ids name the same device ("0000:3B:00.0", "00000000:3b:00.0"
/// and "3b:00.0" are one device). Empty or unparsable ids match nothing.
bool sameBusId(const char* a, const char* b);

/// The device facts p2pCanConnect needs; the default asks the CUDA runtime, tests
/// supply their own.
struct P2pDeviceQuery {
  /// This process's index of the GPU with that PCI bus id, or -1 if it is not visible.
  std::function<int(const char* busId)> deviceOf;
  /// Whether device a (an index in this process) can access device b's memory.
  std::function<bool(int a, int b)> canAccessPeer;
};
const P2pDeviceQuery& cudaDeviceQuery();

/// The p2p rule (see the file comment): both ranks have a GPU, on the same machine
/// (hostHash and machineHash), and either one GPU (bus ids equal; in one process the
/// device indices equal too when bus ids are unknown), or two GPUs of two processes
/// that both see both GPUs and that can access each other in both directions.
/// Two GPUs in one process are refused: reaching the second needs peer access enabled
/// (cudaDeviceEnablePeerAccess), which src/os/cuda_rt.h does not offer yet.
/// Symmetric: p2pCanConnect(a, b, q) == p2pCanConnect(b, a, q).
bool p2pCanConnect(const PeerInfo& self, const PeerInfo& peer, const P2pDeviceQuery& q);

/// Host memory pinned and mapped for the GPUs (cudaHostRegister) while alive: the shm
/// and net transports' FIFOs in device mode. Unregistered by reset() or the
/// destructor, only in the process that registered it (a fork()ed copy skips it).
class HostRegistration {
 public:
  HostRegistration() = default;
  ~HostRegistration() { reset(); }
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

  /// Registers [p, p + bytes) with device dev current; *devPtr is the device address
  /// of p. `what` names the connection in the error message ("shm transport: rank 1 <-
  /// rank 0"). Fails with ncclSystemError and CUDA's reason (no driver, no device).
  ncclResult_t registerRange(void* p, size_t bytes, int dev, const char* what,
                             void** devPtr);
  void reset();
  bool active() const { return host_ != nullptr; }

 private:
  void* host_ = nullptr;
  int dev_ = -1;
  pid_t pid_ = 0;
};

/// "CUDA is not usable (...)" or CUDA's last error text: the reason part of messages.
std::string cudaReason();

}  // namespace braid
