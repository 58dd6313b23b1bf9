// Simulator: runs every rank's Plan of one collective in ONE thread over in-memory
// FIFOs, with the real executor (PlanRun). No threads, sockets or communicators: the
// algorithms' correctness (and freedom from deadlock under small FIFOs) is checked here.
//
//   Simulator sim(nranks, nChannels, SimGeometry{4, 64});
//   SimResult res = sim.run(ranks);   // ranks[r]: plan, buffers, reducer
//   if (!res.ok) FAIL() << res.error;
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/plan.h"
#include "src/exec/engine.h"
#include "src/exec/fifo.h"
#include "src/reduce/reducer.h"

namespace braid {

/// FIFO geometry of every simulated connection. slotBytes must be a multiple of the
/// largest element size used (8), as real transports guarantee.
struct SimGeometry {
  uint32_t nslots = 4;
  uint64_t slotBytes = 64;
  /// Whether connections accept zero-copy ("direct") entries; a rank's PlanRun uses
  /// them only if its SimRank::allowDirect is set too.
  bool direct = false;
  /// Direct-access steps reach the other ranks' bytes by copies (PeerAccess::read, as
  /// between processes) instead of pointers.
  bool peerReads = false;
};

/// One rank's part of a simulated collective.
struct SimRank {
  const Plan* plan = nullptr;
  PlanBuffers bufs;
  Reducer reducer;
  bool allowDirect = false;  ///< passed to PlanRun (true only out of place)
  /// Buffer sizes in elements, for bounds checks of the plan's regions.
  uint64_t sendElems = UINT64_MAX;
  uint64_t recvElems = UINT64_MAX;
};

struct SimResult {
  bool ok = false;
  bool deadlock = false;    ///< no rank could move while some were not done
  std::string error;        ///< why not ok: plan check, executor error, deadlock, leftovers
  uint64_t passes = 0;      ///< progress passes over all ranks
};

/// Static checks of a set of plans (one per rank) against the Plan contract: channels
/// and peers in range, no empty steps, no two programs of a plan on the same (peer,
/// channel, direction), regions inside the buffers, connection steps of at most
/// maxStepBytes (0: unchecked), every connection's sent bytes == received bytes, and
/// the orders of algorithms/plan.h's direct-access contract (reads of a peer's bytes
/// against its writes of them, announcing before reading, not ending while read).
/// Returns "" if all hold, else a description of the first violation.
std::string checkPlans(const std::vector<SimRank>& ranks, int nChannels, size_t typeSize,
                       uint64_t maxStepBytes);

class Simulator {
 public:
  Simulator(int nranks, int nChannels, SimGeometry geometry);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  /// Runs all ranks to completion (or error/deadlock). FIFOs start empty each run.
  /// After success, also checks that every byte sent was consumed.
  SimResult run(const std::vector<SimRank>& ranks);

  /// Models the aggregation switch (steps to kSwitchPeer): one switch group per local
  /// index of `layout` and channel, members in node order, served by the in-process
  /// collnet (transports/collnet/local_collnet.h) through the same CollNetPort the
  /// real connections use. Without this, plans with switch steps fail.
  void enableSwitch(std::shared_ptr<const RankLayout> layout) { switchLayout_ = layout; }

 private:
  struct Fifo;
  struct SwitchEnd;
  class Conns;
  class Peers;
  struct PeerState {  ///< one rank's direct-access side, for this run
    std::vector<uint64_t> signals;  ///< per program
    bool announced = false;
    PlanBuffers bufs;  ///< announced with its first signal
  };
  Fifo* fifo(int src, int dst, int channel);
  std::string makeSwitch(std::vector<std::unique_ptr<SwitchEnd>>* ends);

  int nranks_;
  int nChannels_;
  SimGeometry geo_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Fifo>> fifos_;
  std::shared_ptr<const RankLayout> switchLayout_;
  std::vector<std::unique_ptr<SwitchEnd>>* switchEnds_ = nullptr;  ///< during run()
  std::vector<PeerState> peerState_;
};

}  // namespace braid
