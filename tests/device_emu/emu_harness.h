// Host-memory FIFOs and launches for running the CUDA executor's interpreter on the
// host (emulateDevBlock), one std::thread per (rank, block), as the GPU would run the
// blocks of every rank's kernel at once.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"
#include "src/device/dev_kernel.h"
#include "tests/device_emu/emulate.h"
#include "src/device/dev_launch.h"
#include "src/device/dev_plan.h"
#include "src/exec/engine.h"
#include "src/exec/fifo.h"

namespace braid {
namespace emutest {

/// 64-byte aligned heap bytes.
class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(size_t n);
  ~AlignedBytes();
  AlignedBytes(AlignedBytes&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  AlignedBytes& operator=(AlignedBytes&& o) noexcept;
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  char* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  char* p_ = nullptr;
  size_t n_ = 0;
};

/// Every connection (src -> dst, channel) of a set of ranks: a FifoLayout region in
/// host memory, made on first use.
class Fabric {
 public:
  Fabric(uint32_t nslots, uint64_t slotBytes) : nslots_(nslots), slotBytes_(slotBytes) {}
  void* region(int src, int dst, int channel);
  DevConn conn(int src, int dst, int channel) {
    return DevConn::at(region(src, dst, channel), nslots_, slotBytes_, true);
  }
  FifoHeader* header(int src, int dst, int channel) {
    return static_cast<FifoHeader*>(region(src, dst, channel));
  }
  /// Whether every FIFO is empty (all bytes sent were consumed).
  bool drained() const;
  /// The ranks' direct-access areas (DevPeerArea, zeroed when first asked for), as a
  /// DevPeerTable of `rank` among `nranks`: every rank of a run shares them, as thread
  /// ranks of one GPU do.
  DevPeerTable peers(int rank, int nranks);
  const DevPeerArea& area(int rank) const { return *areaPtrs_[size_t(rank)]; }
  uint32_t nslots() const { return nslots_; }
  uint64_t slotBytes() const { return slotBytes_; }

 private:
  uint32_t nslots_;
  uint64_t slotBytes_;
  std::map<std::tuple<int, int, int>, AlignedBytes> regions_;
  std::vector<AlignedBytes> areas_;
  std::vector<DevPeerArea*> areaPtrs_;
};

/// One op of a rank's launch.
struct EmuWork {
  const Plan* plan = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  void* scratch = nullptr;
  DevScalarMode scalarMode = kDevScalarNone;
  uint64_t scalarBits = 0;
  const void* scalarPtr = nullptr;
  bool avg = false;
  int nranks = 1;
  /// Overrides the plan's sliceBytes on this side (UINT64_MAX: keep it).
  uint64_t sliceBytes = UINT64_MAX;
  /// DevWork::firstBlock / newStage (works side by side in one stage, as the CUDA
  /// executor places a group's send/recv ops).
  uint16_t firstBlock = 0;
  bool newStage = true;
};

/// One rank's launch: compiled plans, their images, the control words.
class EmuLaunch {
 public:
  /// Compiles the works (ADD_FAILURE and returns false on error).
  bool build(Fabric* fabric, int rank, size_t typeSize, const std::vector<EmuWork>& works);
  DevLaunch& launch() { return launch_; }
  DevControl& control() { return control_; }
  uint32_t* barrier() { return barrier_; }

 private:
  std::vector<AlignedBytes> images_;
  DevLaunch launch_;
  DevControl control_{};
  uint32_t barrier_[2] = {0, 0};
};

/// Threads per emulated block in runAll: BRAID_EMU_BLOCK_THREADS, 4 by default (thread 0
/// waits and posts, all threads move data, as on the GPU; 1 runs the block alone).
int blockThreads();

/// Runs every block of every launch concurrently, each as blockThreads() threads (or
/// `threads` when given); returns each rank's result (true: every block of the rank
/// finished, its threads agreeing).
std::vector<bool> runAll(std::vector<EmuLaunch*> launches, ncclDataType_t type, DevRed red,
                         int threads = 0);

/// The host executor's view of a Fabric (host FifoSender / FifoReceiver ends) for one
/// rank: for running some ranks with PlanRun next to emulated ones.
class HostConns : public ConnTable {
 public:
  /// Attaches every connection `plan` uses now (before any thread runs).
  HostConns(Fabric* fabric, int rank, const Plan& plan);
  FifoSender* sender(int peer, int channel) override;
  FifoReceiver* receiver(int peer, int channel) override;

 private:
  Fabric* fabric_;
  int rank_;
  std::map<std::pair<int, int>, std::unique_ptr<FifoSender>> senders_;
  std::map<std::pair<int, int>, std::unique_ptr<FifoReceiver>> receivers_;
};

}  // namespace emutest
}  // namespace braid
