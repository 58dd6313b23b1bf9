// Comm: the object behind ncclComm_t. Owns the bootstrap, the peer table, the
// connections (one SendSide/RecvSide per peer and channel, made on first use) and the
// communicator's state (error, abort, user reduction ops).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/plan.h"
#include "nccl.h"
#include "src/bootstrap/bootstrap.h"
#include "src/exec/op.h"
#include "src/core/plan_cache.h"
#include "src/exec/engine.h"
#include "src/rma/rma.h"
#include "src/exec/transport.h"

namespace braid {

class DeviceComm;
class CollNetState;
class Board;
struct WakeWord;
class FlightRecorder;

/// Settings a communicator takes from ncclConfig_t and the environment at init.
struct CommSettings {
  bool blocking = true;
  FifoGeometry geometry;
  int nChannels = 1;      ///< channels every plan may use (NCCL_MIN_NCHANNELS)
  int maxChannels = 2;    ///< channels a plan may use (NCCL_MAX_NCHANNELS)
  int deviceChannels = 16;  ///< channels a device plan may use (BRAID_DEVICE_NCHANNELS)
  bool deviceDirect = true;  ///< direct-access plans on device buffers (BRAID_DEVICE_DIRECT, rank 0's)
  int timeoutMs = 300000;
  int bootstrapTimeoutMs = 120000;
  int peerCheckMs = 200;
  int spinUs = 1000;  ///< busy-poll time before giving up the CPU (BRAID_SPIN_US)
  /// Then: 0 yield and nap; 1 yield, nap a little, then sleep until woken; 2 sleep
  /// at once (BRAID_SLEEP).
  int sleepMode = 1;
  uint64_t smallMsgBytes = 32768;  ///< direct algorithms up to this size (rank 0's value)
  uint64_t cmaMinBytes = 65536;    ///< single-copy (process_vm_readv) pieces from this size
  bool streamStores = true;        ///< non-temporal stores into peers' FIFO slots
  uint64_t streamOutputBytes = UINT64_MAX;  ///< ... and into results of plans this large
  std::string forcedTransport;  ///< "", "local", "shm", "net" or "socket"
  std::string netName;  ///< network by name (netName config, NCCL_NET; "" = automatic)
  /// BRAID_TRANSPORT forces the net transport ("net", or "socket": net over sockets).
  bool forcedNet() const { return forcedTransport == "net" || forcedTransport == "socket"; }
  std::string algoSpec;   ///< NCCL_ALGO at init (the same on every rank: checked)
  std::string protoSpec;  ///< NCCL_PROTO at init (likewise)
  bool shmDisable = false;
  bool p2pDisable = false;
  std::string commName;
  /// BRAID_CHECK=1 (rank 0's): compare the collectives' fingerprints before running them.
  bool check = false;
  /// BRAID_CHECK not 0 (rank 0's): every call's data carries its CallTag, compared by
  /// the receiver (src/exec/call_tag.h); collectives on the flag board compare theirs.
  bool tagCalls = true;
};

struct Comm : public ConnTable {
  static constexpr uint64_t kMagic = 0xB2A1DC0111ull;
  static constexpr uint64_t kDeadMagic = 0xDEADC0111ull;

  Comm();
  ~Comm() override;

  // ---- identity ------------------------------------------------------------
  std::atomic<uint64_t> magic{kMagic};
  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;
  uint64_t commHash = 0;
  CommSettings settings;
  std::unique_ptr<Bootstrap> bootstrap;
  std::vector<PeerInfo> peers;
  /// Nodes and ring order (from the host identities and the topology), for the tuner
  /// and the topology-aware builders; identical on every rank.
  std::shared_ptr<const RankLayout> layout;
  /// The tuner's cost model (rank 0's, so every rank decides alike).
  CostModel model;

  // ---- state ---------------------------------------------------------------
  std::atomic<bool> abortFlag{false};    ///< ncclCommAbort / revoke / fatal error
  std::atomic<int> asyncError{ncclSuccess};  ///< ncclInProgress while initialising
  std::atomic<bool> revoked{false};
  bool finalized = false;
  uint64_t opCount = 0;
  int64_t collSeqNext = 0;  ///< the next collective's number (under issueMu; issue order)
  std::thread initThread;  ///< nonblocking init
  std::mutex execMutex;    ///< held while a thread executes this comm's work
  std::atomic<int> queuedBatches{0};  ///< batches waiting on host streams
  /// ncclCommSuspend .. ncclCommResume: new work is refused (checkCommUsable).
  std::atomic<bool> suspended{false};

  // ---- issue order -----------------------------------------------------------
  // NCCL runs a communicator's operations in the order they were issued, whatever the
  // stream or thread. Every unit of work (a group's batch, a split, a destroy) takes a
  // ticket when issued and runs only when the tickets before it are done.
  /// Takes the next ticket. Call with issueMu held, and also issueOrderMutex() when
  /// the work spans several comms, so that a batch's tickets on several comms are
  /// consistent with one global order (no cycles; work on one comm alone cannot make
  /// one, so it needs only this comm's lock).
  uint64_t takeTicket() { return ticketNext_++; }
  /// Guards this comm's ticket and collective numbering (collSeqNext, takeTicket).
  std::mutex issueMu;
  /// Waits until the work issued before `ticket` is done. Returns false (at once) if
  /// the comm is aborted, or revoked (unless evenIfRevoked: ncclCommShrink), or
  /// `alsoAbort` (a child communicator's flag) is set meanwhile.
  bool waitTurn(uint64_t ticket, bool evenIfRevoked = false,
                const std::atomic<bool>* alsoAbort = nullptr);
  /// takeTicket() under issueMu, for work on this comm alone.
  uint64_t issue();
  /// Lets the work issued after `ticket` run. Must be called exactly once per ticket.
  void endTurn(uint64_t ticket);
  std::vector<UserRedOp> userOps;  ///< index = op - ncclNumOps

  // ---- connections (ConnTable) --------------------------------------------
  FifoSender* sender(int peer, int channel) override;
  FifoReceiver* receiver(int peer, int channel) override;
  uint64_t directMinBytes(int peer, int channel) override;
  uint64_t streamOutputMinBytes() override { return settings.streamOutputBytes; }
  bool streamTo(int peer, int channel) override {
    (void)channel;
    return settings.streamStores && peer != rank && peer != kSwitchPeer;
  }
  Announce announceSwitch(int channel, SwitchOp op, uint64_t bytes,
                          const Reducer& red) override;
  std::string whyClosed(int peer) override {
    std::string why;
    return checkPeer(peer, &why) != ncclSuccess ? why : std::string();
  }

  static uint64_t connKey(int peer, int channel) {
    return (uint64_t(uint32_t(channel)) << 32) | uint32_t(peer);
  }
  std::unordered_map<uint64_t, SendSide> sends;
  std::unordered_map<uint64_t, RecvSide> recvs;
  /// The CUDA executor's connections (device-reachable FIFOs), keyed alike.
  std::unordered_map<uint64_t, SendSide> devSends;
  std::unordered_map<uint64_t, RecvSide> devRecvs;
  /// The transport both ends of (rank, peer) use (same answer on both sides).
  ncclResult_t chooseTransport(int peer, Transport** out);
  /// Likewise for device connections: p2p (CUDA IPC / same process), else shm with
  /// pinned staging on one host, else the network with pinned staging.
  ncclResult_t chooseDeviceTransport(int peer, Transport** out);
  /// The CUDA executor's state (launch control words, plan images, watchdog); made on
  /// the first op on device buffers.
  std::unique_ptr<DeviceComm> device;
  /// The device API's abort word (ncclDevComm.abortFlag): one host-mapped word, made by
  /// the first ncclDevCommCreate, set to 1 by abort and revoke (wakeSelf).
  std::atomic<uint32_t*> devApiAbortHost{nullptr};
  void* devApiAbortDev = nullptr;
  /// In-network reduction (transports/collnet/collnet_state.h): the switch groups'
  /// ports, made at init when CollNet is enabled and set up; null otherwise.
  std::shared_ptr<CollNetState> collnet;
  /// The flag board (src/exec/board.h): made at init when every rank is on one host;
  /// small and medium collectives on host buffers run on it.
  std::unique_ptr<Board> board;
  /// Whether every host connection made so far rings the board's wake words (local and
  /// shm transports; the connector clears it for a network): only then may a rank
  /// waiting for this comm's plans sleep in the kernel (src/exec/wake.h).
  bool connsRing = true;
  /// The wake word a rank waiting for this comm's plans sleeps on; null where nothing
  /// would ring it (no board, a network or CollNet connection).
  WakeWord* planWakeWord() const;
  /// Wakes this rank's executing thread if it sleeps (after abortFlag or revoked is set).
  void wakeSelf() const;
  /// Whether CollNet plans may run this reduction (a collnet is set up and takes the
  /// datatype and op).
  bool collnetSupports(ncclDataType_t type, ncclRedOp_t op) const;
  /// One-sided operations (src/rma/rma.h): signal counters, per-peer paths; made by the
  /// first ncclCommWindowRegister.
  std::unique_ptr<RmaState, RmaStateDeleter> rma;
  /// Ask the connections' transports whether `peer` is still there.
  ncclResult_t checkPeer(int peer, std::string* why);
  /// Mark every connection closed (peers then fail fast instead of timing out).
  void closeConnections(uint32_t why);

  // ---- plans ----------------------------------------------------------------
  /// Plans built for this comm (least recently used dropped when full).
  PlanCache planCache;

  /// Record a fatal error: sets asyncError, closes connections, returns code. The
  /// first one also dumps the flight record, with `reason` ("timeout", "peer", ...).
  ncclResult_t fatal(ncclResult_t code, const char* reason = "error");
  /// The last BRAID_FLIGHT_RECORDER operations (src/diag/flight_recorder.h); made at
  /// init, null when turned off.
  std::unique_ptr<FlightRecorder> recorder;
  /// "rank 1 of 4" for messages.
  std::string who() const;
  /// Before connections are dropped: waits until every end has finished (a send end
  /// handed what it published to its transport, ends said goodbye:
  /// ConnResource::drained), one deadline for all (the bootstrap timeout; 60 s when
  /// that is unbounded).
  void drainConnections();

  /// Releases everything (connections, bootstrap, caches) and marks the handle dead;
  /// the small shell stays in a bounded quarantine, so a later call with this stale
  /// handle gets "was destroyed" instead of touching freed memory.
  static void retire(Comm* c);

 private:
  /// Joins a pending init, drops connections, bootstrap and caches, marks the handle dead.
  void releaseResources();

  uint64_t ticketNext_ = 0;  ///< under issueOrderMutex()
  std::mutex turnMu_;
  std::condition_variable turnCv_;
  uint64_t serving_ = 0;  ///< under turnMu_
  std::atomic<uint64_t> servingNow_{0};  ///< serving_, readable without the lock
  int turnWaiters_ = 0;   ///< threads in waitTurn (under turnMu_): endTurn notifies them
};

/// Serialises ticket assignment across communicators (see Comm::takeTicket).
std::mutex& issueOrderMutex();

/// Ends a turn when it goes out of scope, whatever the exit path.
class TurnGuard {
 public:
  TurnGuard(Comm* c, uint64_t ticket) : c_(c), ticket_(ticket) {}
  ~TurnGuard() { c_->endTurn(ticket_); }
  TurnGuard(const TurnGuard&) = delete;
  TurnGuard& operator=(const TurnGuard&) = delete;

 private:
  Comm* c_;
  uint64_t ticket_;
};

/// Validates a handle from the user: magic, not destroyed. Sets the error message.
ncclResult_t checkComm(ncclComm_t comm, const char* call);
/// As checkComm, and also not aborted/revoked/failed/initialising (for new work).
ncclResult_t checkCommUsable(ncclComm_t comm, const char* call);

inline Comm* asComm(ncclComm_t c) { return reinterpret_cast<Comm*>(c); }
inline ncclComm_t asHandle(Comm* c) { return reinterpret_cast<ncclComm_t>(c); }

}  // namespace braid
