// DeviceComm: a communicator's CUDA executor state.
//
// Made on the first op on device buffers. Owns the words kernels share with the host
// (DevControl, in mapped pinned memory: abort, error, launch counts, progress), the grid
// barrier words (device memory), the plans' images (device memory), the
// plans' device scratch, the events that order its launches across streams, and a
// watchdog thread: while a launch is running and nothing moves, it checks the peers
// (a dead one fails the communicator with an error naming it, BRAID_PEER_CHECK_MS) and
// gives up after BRAID_TIMEOUT_MS; either way the kernels are told to stop, so a dead
// peer never hangs the GPU.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"
#include "src/device/dev_launch.h"
#include "src/device/dev_plan.h"

namespace braid {

struct Comm;

/// A plan in the kernel's form, with its image once made (DeviceComm::compiled).
struct CompiledPlan {
  std::shared_ptr<const Plan> plan;  ///< kept alive while cached: its address is the key
  DevPlan dev;
  const DevPlanImage* image = nullptr;      ///< device address, once made
  const DevPlanImage* imageHost = nullptr;  ///< the same bytes, host view
};

class DeviceComm {
 public:
  explicit DeviceComm(Comm* comm) : comm_(comm) {}
  ~DeviceComm();
  DeviceComm(const DeviceComm&) = delete;
  DeviceComm& operator=(const DeviceComm&) = delete;

  /// Allocates the control and barrier words (the comm's device must be current).
  ncclResult_t init();

  /// The GPU-readable image of the compiled plan `dp` (of algorithm `algorithm`, for
  /// messages) over this comm's device connections, which must exist. Cached by
  /// content: equal plans share one. *dev is the address kernels use, *host the same
  /// bytes seen by the host.
  ncclResult_t image(const DevPlan& dp, const char* algorithm, const DevPlanImage** dev,
                     const DevPlanImage** host);
  /// The compiled form of `plan` (elements of typeSize bytes) and its image: from this
  /// comm's cache when the plan was compiled before, so a repeated call (the tuner
  /// hands back the same cached Plan) compiles nothing and finds its image by pointer.
  /// A plan made afresh for each call (`keep` false: send/recv) is compiled into
  /// *scratch instead. *out points at the one used. False (and *why) as
  /// DevPlan::compile.
  bool compiled(const std::shared_ptr<const Plan>& plan, size_t typeSize, bool keep,
                CompiledPlan* scratch, CompiledPlan** out, std::string* why);
  /// Device working memory of at least `bytes` for one launch. Launches of a comm run
  /// one after another, so each may reuse it; a larger request gets a new buffer (the
  /// old one stays until the comm is destroyed: queued launches may still use it).
  ncclResult_t scratch(size_t bytes, char** out);

  /// Orders a launch on `s` after this comm's previous launch (when that was on another
  /// stream) and after the other streams of the group (`others`); afterLaunch makes the
  /// others wait for the launch and records it. Not across a stream being captured.
  ncclResult_t beforeLaunch(cudaStream_t s, const std::vector<cudaStream_t>& others);
  ncclResult_t afterLaunch(cudaStream_t s, const std::vector<cudaStream_t>& others);

  DevControl* controlDev() const { return controlDev_; }
  uint32_t* barrier() const { return barrier_; }

  // Direct access (algorithms/plan.h; src/device/dev_peers.h): every rank's DevPeerArea.
  /// Whether this comm's device plans may use direct-access steps: every rank is a
  /// thread of this process on this GPU, 2..kDevMaxDirectRanks of them, and
  /// BRAID_DEVICE_DIRECT (rank 0's) is on. The same answer on every rank.
  bool directAccess() const { return direct_; }
  /// Device address of this rank's area (zeroed at init), for the exchange.
  uint64_t peerAreaAddress() const { return uint64_t(reinterpret_cast<uintptr_t>(peerArea_)); }
  /// Whether the ranks' areas are known (setPeerAreas ran).
  bool peersReady() const { return peerTable_.areas != nullptr; }
  /// Records every rank's area address (index: rank) in device memory for the images.
  ncclResult_t setPeerAreas(const std::vector<uint64_t>& areas);

  /// Tells running and queued kernels of this comm to give up.
  void abortKernels();
  /// Marks every device connection closed (peers' kernels give up too).
  void closeConnections(uint32_t why);
  /// Waits until the launches enqueued so far have finished; false after timeoutMs
  /// without progress (0: no limit while the communicator is healthy).
  bool drain(int timeoutMs);
  /// Waits for the launches (destroy; the watchdog still watching) or stops them at
  /// once (abort), then stops the watchdog, so connections and images may be freed.
  void shutdown(bool abort);

 private:
  struct Image {
    std::vector<char> key;  ///< the compiled plan's bytes (programs, steps, conn refs)
    const DevPlanImage* hostView = nullptr;  ///< its pinned host copy (header read by the host)
    const DevPlanImage* dev = nullptr;       ///< the copy kernels read (device memory)
  };
  /// Plan images are carved from arenas, device memory with a pinned host twin of the
  /// same size, made at init (and, rarely, when one fills up): no cudaMalloc and no
  /// copy from pageable memory while kernels run. Either may wait for every kernel of
  /// the context (device page tables), and a kernel of a thread rank of this process
  /// waiting for this rank's launch would then never end.
  struct Arena {
    char* dev = nullptr;
    char* host = nullptr;
    size_t bytes = 0;
    size_t used = 0;
  };
  static constexpr size_t kArenaBytes = 1 << 20;
  /// `bytes` (16-aligned) of the current arena, or of a new one if it is full.
  ncclResult_t carve(size_t bytes, char** host, char** dev);
  /// Warns (once per comm) when ranks of other processes share this comm's GPU.
  void warnSharedGpu() const;
  void startWatchdog();
  void watchdogLoop();
  /// Fails the communicator (error message, asyncError, kernels stopped, FIFOs closed).
  /// Returns false if the comm's lock was busy (try again later).
  bool failComm(ncclResult_t code, const std::string& why);

  Comm* comm_;
  void* controlHost_ = nullptr;       ///< DevControl, pinned
  DevControl* controlDev_ = nullptr;  ///< its device address
  uint32_t* barrier_ = nullptr;       ///< device memory, 4 words
  bool direct_ = false;               ///< directAccess(), decided at init
  DevPeerArea* peerArea_ = nullptr;   ///< device memory: this rank's direct-access words
  DevPeerTable peerTable_;            ///< areas: device array of every rank's area
  std::unordered_map<uint64_t, std::vector<Image>> images_;  ///< by hash of the key
  /// compiled(): by plan address (bounded: cleared at kMaxCompiled; images stay).
  std::unordered_map<const Plan*, CompiledPlan> compiled_;
  static constexpr size_t kMaxCompiled = 4096;
  size_t imageCount_ = 0;
  std::vector<Arena> arenas_;         ///< the last is the current one
  std::vector<void*> scratch_;        ///< the last is the current one
  size_t scratchBytes_ = 0;
  void* lastEvent_ = nullptr;         ///< recorded after each launch
  bool launched_ = false;
  std::vector<void*> events_;         ///< for joining a group's other streams

  std::thread watchdog_;
  std::mutex wdMu_;
  std::condition_variable wdCv_;
  bool wdStop_ = false;
};

}  // namespace braid
