// ZeRO: data parallelism with sharded model state (DeepSpeed's ZeRO stages; stage 3 is
// PyTorch's FSDP with full sharding).
//
// Stage 1: optimizer state sharded. Gradients are all-reduced in buckets as DDP does
//   (overlapping backward); each rank runs AdamW on its 1/N slice of the flat
//   parameter vector, then every rank's slice is all-gathered (one grouped broadcast
//   per owner, so the last, shorter slice needs no padding).
// Stage 2: optimizer state and gradients sharded. Each bucket is reduced (one grouped
//   ncclReduce per owner whose slice the bucket overlaps: a reduce-scatter to the
//   owners) straight into the owner's shard gradient; only shard-sized gradients
//   survive the step. Parameters as in stage 1.
// Stage 3 (FSDP): parameters, gradients and optimizer state sharded. Each Layer's
//   parameters form one flat unit, padded to a multiple of N; a rank keeps 1/N of it.
//   preForward(l) all-gathers layer l's unit into a full buffer and points its Params'
//   w at it, and prefetches the NEXT layer's all-gather asynchronously on the host
//   stream; postForward(l) frees it (reshardAfterForward). Backward gathers again in
//   reverse, prefetching the PREVIOUS layer; postBackward(l, ...) reduce-scatters the
//   unit's full gradient into the shard gradient (accumulating over microbatches) and
//   frees it. While a unit is freed its Params' w and g are nullptr.
//
// The ParamStore's flat buffers: stages 1 and 2 use its values (full on every rank);
// stages 2 and 3 keep gradients in their own buffers, and stage 3 the values, so the
// constructor RELEASES the store's flat gradients (stages 2, 3) and flat values (stage
// 3) (ParamStore::releaseGrads/releaseValues): the memory really falls ~1/N, as
// heldBytes() measures. From then on the Zero owns Param::w/g of that store; the store
// cannot be handed to another strategy, and full parameters come from fullParams().
//
// Contract for callers (stage 2 and 3): Param::g (and for stage 3 Param::w) is nullptr
// outside the hooks that make it live, so EVERY forward that touches the parameters,
// validation included, must be wrapped in preForward/postForward; backward in
// preBackward/postBackward. finishStep() frees all gathered units.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "training/dist/process_group.h"
#include "training/nn/param.h"
#include "training/parallel/data_parallel.h"
#include "training/parallel/ddp.h"

namespace braid {
namespace train {

struct ZeroConfig {
  int stage = 1;                                 ///< 1, 2 or 3
  int64_t firstBucketBytes = int64_t(1) << 20;   ///< stages 1-2: as DdpConfig
  int64_t bucketCapBytes = int64_t(25) << 20;
  int64_t firstBucketElems = 0;                  ///< > 0: sizes in elements (tests)
  int64_t bucketCapElems = 0;
  bool average = false;                          ///< as DdpConfig::average
  bool reshardAfterForward = true;               ///< stage 3: free params after forward
  bool prefetch = true;                          ///< stage 3: prefetch next/previous unit
  bool broadcastParams = true;                   ///< rank 0's values at start (every stage)
  NormReduce normReduce;                         ///< as DdpConfig::normReduce
  int tpRank = 0;                                ///< as DdpConfig::tpRank
};

template <class T>
class Zero : public DataParallel<T> {
 public:
  /// Collective. `pg` and `store` must outlive the Zero; the store must be allocated
  /// (stage 3 takes its shard of rank 0's values from it, then releases the store's
  /// flat buffers; stage 2 releases its flat gradients: see the file comment).
  Zero(ProcessGroup& pg, ParamStore<T>& store, AdamWConfig opt, ZeroConfig cfg);
  ~Zero() override;

  std::string name() const override { return "zero" + std::to_string(cfg_.stage); }
  void beginStep() override;
  void preForward(int layer) override;
  void postForward(int layer) override;
  void preBackward(int layer) override;
  void postBackward(int layer, bool lastMicro) override;
  double finishStep() override;
  StateBytes stateBytes() const override;
  int64_t heldBytes() const override;
  const CommStats& commStats() const override { return stats_; }
  AdamW<T>& optimizer() override { return opt_; }
  std::vector<StateSlice<T>> stateSlices(bool forSave) override;
  void afterLoad() override;

  /// Stage 3: gathers every unit into the store's flat values (for tests comparing
  /// full parameters; collective). Stages 1-2: copies the flat values. out gets
  /// store.flatSize() elements in store order.
  void fullParams(std::vector<T>* out);
  /// Peak bytes of gathered (full) units alive at once in the last step (stage 3).
  int64_t peakGatheredBytes() const { return peakGathered_; }

 private:
  struct Unit;                  // stage 3: one layer's params
  struct Impl;                  // the stage-specific state
  void gather(int unit, bool async);
  void waitGathered(int unit);
  void release(int unit);
  void reduceUnitGrads(int unit);
  void launchBucket(size_t b);
  double localSquares() const;
  int unitOf(int layer) const;
  void recordGathered();

  ProcessGroup& pg_;
  ParamStore<T>& store_;
  ZeroConfig cfg_;
  std::unique_ptr<Impl> impl_;
  AdamW<T> opt_;
  CommStats stats_;
  int64_t peakGathered_ = 0;
};

}  // namespace train
}  // namespace braid
