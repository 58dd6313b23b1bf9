// The soak loop one rank runs: init, random iterations (single collectives, groups of
// several, send/recv rings, communicator splits with work on the child), a periodic
// agreement on when to stop, destroy. Every iteration is drawn from the same seeded
// generator on every rank, so all ranks issue matching calls.
#pragma once
#include <atomic>
#include <cstdint>

#include "nccl.h"

namespace soak {

constexpr int kMaxRanks = 64;

struct Config {
  int nranks = 8;
  double seconds = 60;     ///< stop after this long (0: no time limit)
  uint64_t iterations = 0; ///< stop after this many iterations (0: no limit)
  uint64_t seed = 1;
  size_t maxBlockBytes = 4u << 20;
  bool verbose = false;
  /// Replace the main communicator by a split of itself (all one color) every this many
  /// iterations, destroying the old one (0: never). Bounds what a long-lived
  /// communicator legitimately accumulates (its plan cache, one plan per distinct
  /// count/type/root), so that growth left over is a leak.
  uint64_t rotateEvery = 64;
  /// Self-test of the checker: rank 1 changes one result of this iteration (0: never).
  uint64_t corruptIteration = 0;
};

/// Counters of one rank, in memory shared with the process that samples and reports.
struct RankStats {
  std::atomic<uint64_t> iterations{0};
  std::atomic<uint64_t> ops{0};        ///< collectives and send/recv rings issued
  std::atomic<uint64_t> wrong{0};      ///< ops with a wrong element or a broken guard
  std::atomic<uint64_t> errors{0};     ///< NCCL calls that failed
  std::atomic<uint64_t> groups{0};
  std::atomic<uint64_t> splits{0};
  std::atomic<uint64_t> rotations{0};  ///< main communicator replaced by its split
  std::atomic<uint64_t> childOps{0};
  std::atomic<int64_t> liveBytes{0};   ///< bytes of this rank's live test buffers
  std::atomic<int> warm{0};            ///< 1: warm-up done (sampling may start)
  std::atomic<int> finished{0};        ///< 1: returned from runRank
};

/// Runs the soak as `rank` of cfg.nranks with the job's id; returns when the ranks agree
/// to stop or on the first error (the communicator is then aborted).
void runRank(const Config& cfg, int rank, const ncclUniqueId& id, RankStats* stats);

}  // namespace soak
