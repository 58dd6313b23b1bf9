// DataParallel: how a rank's gradients and optimizer step are shared with the other
// replicas of its data-parallel group. The training loop (training/parallel/trainer.h)
// calls the hooks around every layer's forward and backward; the implementations are
// DDP (training/parallel/ddp.h: bucketed all-reduce overlapping backward) and ZeRO
// stages 1, 2 and 3 (training/parallel/zero.h; stage 3 = FSDP: sharded parameters
// gathered just in time, with prefetch).
//
// Loop shape, per optimizer step with M microbatches (M = 1 without accumulation or
// pipelining):
//   beginStep()             // zeroes the gradients (wherever this strategy keeps them)
//   for each microbatch m:  (forward of a stage's layers in order, backward in reverse;
//                            with pipelining, forwards and backwards of microbatches
//                            interleave, but each layer sees its M forwards and M
//                            backwards)
//     preForward(l) ; layer l forward ; postForward(l)
//     preBackward(l); layer l backward; postBackward(l, m == M-1)
//   finishStep()            // waits for the gradient reductions, clips, updates,
//                           // and leaves every parameter this rank uses up to date
// Every rank of the DP group must make the same sequence of hook calls (the hooks issue
// collectives). Hooks for layers that own no parameters are allowed (no-ops).
//
// Gradient scaling (training.md, "Determinism and parity"): the caller weights each
// microbatch's mean loss by 1/(M*dpSize); the DP reduction is then a SUM, so the
// reduced gradient is that of the global-batch mean loss. (Config `average = true`
// makes the reduction an average instead, for callers that weight by 1/M only.)
//
// The strategy owns the AdamW optimizer (its state size depends on the sharding).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "training/optim/adamw.h"

namespace braid {
namespace train {

/// Bytes this rank holds for the model's state (for the ZeRO memory report).
struct StateBytes {
  int64_t params = 0, grads = 0, optimizer = 0, buffers = 0;  ///< buffers: gather/bucket space
  int64_t total() const { return params + grads + optimizer + buffers; }
};

/// Timing of one communication op of a step (a DDP bucket, a ZeRO gather, ...), in
/// steady_clock seconds (training/dist/process_group.h now()).
struct CommTiming {
  std::string what;         ///< "bucket 0 [params 12..15]", "gather layer 3", ...
  int64_t elements = 0;
  double queuedAt = 0;      ///< the op was handed to the communication stream
  double startedAt = 0;     ///< the stream started it
  double finishedAt = 0;    ///< it completed
};

/// What a step's communication looked like relative to compute.
struct CommStats {
  std::vector<CommTiming> ops;  ///< in issue order
  double backwardEndAt = 0;     ///< the last postBackward(l, true) of the step
  double stepEndAt = 0;         ///< finishStep() saw every reduction complete
  /// Total seconds the ops ran (sum of finished - started).
  double commSeconds() const;
  /// Seconds of op running time before backwardEndAt (overlapped with backward).
  double hiddenSeconds() const;
  /// hiddenSeconds / commSeconds (1 when there was no communication).
  double hiddenShare() const;
};

/// A piece of the model state this rank owns, for checkpoints: `n` elements of the
/// global flat parameter vector (ParamStore order, unsharded, no padding) starting at
/// `flatBegin`, with this rank's memory for their values and AdamW moments.
template <class T>
struct StateSlice {
  int64_t flatBegin = 0;
  int64_t n = 0;
  T* w = nullptr;
  T* m = nullptr;
  T* v = nullptr;
};

/// Sums a rank's partial squared gradient norm over the model-parallel (TP x PP) group
/// it belongs to; identity when there is no model parallelism. The DP strategies count
/// a TP-replicated parameter (Param::tp.dim < 0) only on TP rank 0 (config `tpRank`),
/// so the sum over the TP group counts every element exactly once.
using NormReduce = std::function<double(double)>;

template <class T>
class DataParallel {
 public:
  virtual ~DataParallel() = default;
  virtual std::string name() const = 0;  ///< "ddp", "zero1", "zero2", "zero3"
  virtual void beginStep() = 0;
  virtual void preForward(int layer) = 0;
  virtual void postForward(int layer) = 0;
  virtual void preBackward(int layer) = 0;
  /// lastMicro: the layer's last backward of this step (its gradients are final).
  virtual void postBackward(int layer, bool lastMicro) = 0;
  /// Completes the gradient reductions, clips by the global norm, runs the optimizer
  /// on what this rank owns, and makes the parameters consistent again. Returns the
  /// global gradient norm (before clipping).
  virtual double finishStep() = 0;
  /// What this rank's model state takes, by kind (the memory report): computed from
  /// the sharding (params/grads/optimizer) and the peak of transient buffers.
  virtual StateBytes stateBytes() const = 0;
  /// Heap bytes actually held NOW for the model state: the capacity of the ParamStore's
  /// flat buffers (ParamStore::heldBytes(), after any release) plus every buffer the
  /// strategy owns (shards, optimizer moments, live bucket / gathered buffers). Measured,
  /// not derived from the sharding formula: the check that memory really falls ~1/N.
  virtual int64_t heldBytes() const = 0;

  /// Communication timing of the last finished step.
  virtual const CommStats& commStats() const = 0;
  /// The optimizer (its step count and moments over what this rank owns).
  virtual AdamW<T>& optimizer() = 0;
  /// Pieces of state for checkpoints. forSave: the pieces this rank writes (disjoint
  /// over the DP group, together the whole model); else the pieces it must read back
  /// (DDP: everything; ZeRO: its shard).
  virtual std::vector<StateSlice<T>> stateSlices(bool forSave) = 0;
  /// After a checkpoint filled this rank's load slices: make the rest consistent (e.g.
  /// all-gather the parameter values other ranks own). Collective.
  virtual void afterLoad() = 0;
};

}  // namespace train
}  // namespace braid
