// DDP: distributed data parallelism with bucketed gradient all-reduce overlapping
// backward (the mechanics of PyTorch DDP, on Braid host streams).
//
// Gradients live in the ParamStore's flat gradient buffer, parameters contiguous in
// registration order. Buckets are contiguous ranges of that buffer in REVERSE parameter
// order (the order backward produces them), with boundaries at parameter boundaries:
// the first bucket (the last parameters) holds about firstBucketBytes, the others up to
// bucketCapBytes (a parameter larger than the cap gets a bucket of its own). A bucket's
// all-reduce is queued on the process group's host stream as soon as every layer owning
// one of its parameters finished its LAST backward of the step (postBackward(l, true)),
// so communication runs while backward continues with earlier layers.
//
//   Ddp<float> ddp(pg, store, adamw);   // broadcasts rank 0's parameters
//   for each step: ddp.beginStep(); ...hooks...; double norm = ddp.finishStep();
//
// no_sync: while setNoSync(true) (or a NoSync scope) is active, postBackward launches no
// communication: gradients just accumulate locally; the first backward outside it
// reduces the accumulated sum (PyTorch's no_sync). finishStep() reduces any bucket not
// yet reduced, so a step is always consistent.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "training/dist/process_group.h"
#include "training/nn/param.h"
#include "training/parallel/data_parallel.h"

namespace braid {
namespace train {

struct DdpConfig {
  int64_t firstBucketBytes = int64_t(1) << 20;   ///< first bucket (last params), ~1 MiB
  int64_t bucketCapBytes = int64_t(25) << 20;    ///< later buckets, 25 MiB
  /// When > 0, override the byte sizes in ELEMENTS (tests: tiny models, many buckets).
  int64_t firstBucketElems = 0;
  int64_t bucketCapElems = 0;
  /// false: reduce with SUM (the caller scaled the loss by 1/(M*dp)); true: AVG.
  bool average = false;
  /// Broadcast rank 0's parameter values at construction.
  bool broadcastParams = true;
  /// Partial squared norm -> sum over the model-parallel group (identity if empty).
  NormReduce normReduce;
  /// This rank's TP rank: TP-replicated params count in the norm on TP rank 0 only.
  int tpRank = 0;
};

/// One bucket: a contiguous range [begin, end) of the flat gradient buffer holding the
/// params [firstParam, lastParam] (store indices), and the layers they belong to.
struct Bucket {
  int64_t begin = 0, end = 0;
  int firstParam = 0, lastParam = 0;
  std::vector<int> layers;
  int64_t elements() const { return end - begin; }
};

/// Bucket plan over `params` (store order; offsets and sizes from Param::offset/numel):
/// reverse parameter order, first bucket ~firstElems, then up to capElems. Exposed for
/// tests and for ZeRO-1/2, which reuse it.
template <class T>
std::vector<Bucket> planBuckets(const ParamStore<T>& store, int64_t firstElems, int64_t capElems);

template <class T>
class Ddp : public DataParallel<T> {
 public:
  /// Collective (broadcast of the parameters). `pg` and `store` must outlive the Ddp;
  /// the store must be allocated.
  Ddp(ProcessGroup& pg, ParamStore<T>& store, AdamWConfig opt, DdpConfig cfg = {});
  ~Ddp() override;

  std::string name() const override { return "ddp"; }
  void beginStep() override;
  void preForward(int) override {}
  void postForward(int) override {}
  void preBackward(int) override {}
  void postBackward(int layer, bool lastMicro) override;
  double finishStep() override;
  StateBytes stateBytes() const override;
  int64_t heldBytes() const override;
  const CommStats& commStats() const override { return stats_; }
  AdamW<T>& optimizer() override { return opt_; }
  std::vector<StateSlice<T>> stateSlices(bool forSave) override;
  void afterLoad() override {}

  /// no_sync on/off (see the file comment).
  void setNoSync(bool on) { noSync_ = on; }
  bool noSync() const { return noSync_; }
  /// RAII no_sync scope: { Ddp<float>::NoSync ns(ddp); ...backward... }
  class NoSync {
   public:
    explicit NoSync(Ddp& d) : d_(d), prev_(d.noSync()) { d_.setNoSync(true); }
    ~NoSync() { d_.setNoSync(prev_); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    Ddp& d_;
    bool prev_;
  };

  const std::vector<Bucket>& buckets() const { return buckets_; }
  /// Waits for the launched buckets and adds the local sum of squares (TP-aware) of the
  /// whole gradient; no optimizer step. For tests and the trainer's diagnostics.
  double gradNorm();

 private:
  void launch(size_t b);
  double localSquares() const;

  ProcessGroup& pg_;
  ParamStore<T>& store_;
  AdamW<T> opt_;
  DdpConfig cfg_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<size_t>> bucketsOfLayer_;  ///< layer -> buckets it touches
  std::vector<int> pendingLayers_;                   ///< per bucket, layers not done
  std::vector<char> layerDone_;                      ///< per layer, last backward seen
  std::vector<Work> work_;                           ///< per bucket, when launched
  std::vector<double> queuedAt_;
  bool noSync_ = false;
  double lastBackwardAt_ = 0;
  CommStats stats_;
};

}  // namespace train
}  // namespace braid
