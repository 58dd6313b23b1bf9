// Sharded checkpoints: every data-parallel rank writes its own shard file, rank 0 a small
// text manifest; a checkpoint written with one DP size loads with another.
//
// Layout of a checkpoint directory `dir` (one per model part: with tensor or pipeline
// parallelism each (tp, pp) coordinate passes its own `part`, e.g. "tp0-pp1"):
//   dir/<part>manifest.txt       rank 0: format, dp size, step, dtype, flat size, every
//                                parameter (name, full shape, local shape, flat offset,
//                                numel) and every shard file's flat range
//   dir/<part>shard-<r>-of-<N>.bin   rank r: header, the training state (step, RNG and
//                                data position), then for each of its ranges
//                                (flatBegin, n, values[n], m[n], v[n])
// Ranges are in the global flat parameter vector (ParamStore order, unsharded), so any
// DP layout reads the ranges it needs (DataParallel::stateSlices(false)) from whichever
// files hold them, then afterLoad() makes the rest consistent.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "training/dist/process_group.h"
#include "training/nn/param.h"
#include "training/parallel/data_parallel.h"

namespace braid {
namespace train {

/// The trainer's state saved with the model (same on every DP rank).
struct TrainState {
  int64_t step = 0;            ///< optimizer steps done
  uint64_t rngState = 0;       ///< the data sampler's / dropout RNG state
  int64_t dataPosition = 0;    ///< e.g. the next batch index
  std::vector<double> losses;  ///< optional loss history (for plots after a resume)
};

/// One rank's part of a checkpoint, copied out of the live training state (it owns its
/// data, so training may go on while another thread writes it: asynchronous
/// checkpoints, training/checkpoint/async_checkpoint.h).
template <class T>
struct CheckpointSnapshot {
  std::string part;
  int dpRank = 0, dpSize = 1;
  TrainState state;
  int64_t optStep = 0;  ///< the optimizer's step count
  struct Range {
    int64_t flatBegin = 0;
    std::vector<T> w, m, v;  ///< values and AdamW moments of [flatBegin, flatBegin + w.size())
  };
  std::vector<Range> ranges;  ///< DataParallel::stateSlices(true)
  std::string manifest;       ///< the manifest's text on DP rank 0; empty on the others
};

/// Copies this rank's checkpoint state (local: no communication).
template <class T>
CheckpointSnapshot<T> snapshotCheckpoint(const ProcessGroup& dp, const ParamStore<T>& store,
                                         DataParallel<T>& strategy, const TrainState& state,
                                         const std::string& part = "");
/// Writes the snapshot's shard file into `dir` (created if missing; written to a .tmp
/// file, then renamed). File I/O only; throws std::runtime_error naming the file.
template <class T>
void writeCheckpointShard(const std::string& dir, const CheckpointSnapshot<T>& snap);
/// Writes the manifest (DP rank 0's snapshot; a no-op for the others). File I/O only.
template <class T>
void writeCheckpointManifest(const std::string& dir, const CheckpointSnapshot<T>& snap);

/// Writes this rank's shard (and, on DP rank 0, the manifest) into `dir` (created if
/// missing). Collective over `dp` (a barrier at the end, so the checkpoint is complete
/// when any rank returns). Throws std::runtime_error naming the file on I/O failure.
template <class T>
void saveCheckpoint(const std::string& dir, ProcessGroup& dp, ParamStore<T>& store,
                    DataParallel<T>& strategy, const TrainState& state,
                    const std::string& part = "");

/// Reads the checkpoint in `dir` into this rank's state, whatever DP size wrote it:
/// checks the manifest against `store` (parameter names and shapes), fills the slices
/// the strategy asks for, sets the optimizer step, calls strategy.afterLoad() and
/// returns the TrainState. Collective over `dp`. Throws std::runtime_error (naming the
/// file or the mismatching parameter) on failure.
template <class T>
TrainState loadCheckpoint(const std::string& dir, ProcessGroup& dp, ParamStore<T>& store,
                          DataParallel<T>& strategy, const std::string& part = "");

/// True if `dir` holds a manifest for `part`.
bool checkpointExists(const std::string& dir, const std::string& part = "");

}  // namespace train
}  // namespace braid
