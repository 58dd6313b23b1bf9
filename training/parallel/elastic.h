// Elastic recovery for pure data parallelism: after a collective failed because a rank
// died, the survivors agree on who failed (training/dist/elastic.h), shrink the world
// communicator without it (ncclCommShrink, NCCL_SHRINK_ABORT), rebuild the Trainer
// with dp = the survivors, and reload the newest complete checkpoint, re-sharded for the
// smaller DP size (checkpoints load at any DP size). Training goes on from its step.
//
// Only the data-parallel axis can shrink: with tensor or pipeline parallelism a dead
// rank takes a part of the model with it (its TP shard or pipeline stage) that no
// survivor holds, so elastic mode requires tp = pp = 1 (checked by elasticCheck).
// The global batch stays the same; it must be divisible by dp * microbatches at the
// new size too (else recovery stops with a message saying so).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "training/checkpoint/async_checkpoint.h"
#include "training/dist/elastic.h"
#include "training/parallel/trainer.h"

namespace braid {
namespace train {

/// What one recovery did (printed by every survivor; rank 0's go in the summary).
struct ElasticEvent {
  int64_t failedAtStep = 0;   ///< the step that was running when the failure hit
  int fromSize = 0, toSize = 0;
  std::vector<int> failed;    ///< original ranks
  std::string why;            ///< how the failed ranks were found dead
  std::string error;          ///< this rank's error
  double detectMs = -1;       ///< error time - the failed rank's last heartbeat (wall clock)
  double agreeMs = 0, shrinkMs = 0, reloadMs = 0, totalMs = 0;
  int64_t resumedFrom = 0;    ///< the checkpoint's step (0: no checkpoint, from scratch)
  std::string checkpoint;     ///< its directory ("" if none)
};

/// Throws std::invalid_argument unless `config` can train elastically (tp = pp = 1).
void elasticCheck(const TrainerConfig& config);

/// The objects recovery replaces. `trainer` refers to `*world`.
template <class T>
struct ElasticRun {
  std::unique_ptr<ProcessGroup>* world;
  std::unique_ptr<Trainer<T>>* trainer;
  TrainerConfig* config;
  const TextDataset* data;
  ElasticMembership* members;
  AsyncCheckpointer* checkpoints;
};

/// Recovers from a failed collective (`error`, caught at wall-clock errorWallMs): see
/// the file comment. Prints its progress to `out` (every survivor). Throws if this rank
/// was declared failed, if the shrink fails repeatedly, or if the batch does not divide.
template <class T>
ElasticEvent elasticRecover(const std::string& error, double errorWallMs, ElasticRun<T>& run,
                            std::FILE* out);

}  // namespace train
}  // namespace braid
