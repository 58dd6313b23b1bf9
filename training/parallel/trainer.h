// Trainer: composes the training layer into one object per rank. From a TrainerConfig
// it builds the DP x TP x PP mesh (mesh.h), this rank's pipeline stage of the GPT
// (training/model/gpt.h, with an NcclTpGroup when TP > 1), the ParamStore, the
// data-parallel strategy (DDP or ZeRO-1/2/3, training/parallel/ddp.h, zero.h) and the
// pipeline schedule (pipeline.h), then runs optimizer steps.
//
// One step s, on every rank:
//   1. the global batch: B windows of T+1 tokens of the training split at offsets drawn
//      from (seed, s) (TextDataset::batch, training/data): the same on every rank;
//   2. DP rank r takes sequences [r*B/D, (r+1)*B/D) and cuts them into M microbatches
//      (sliceMicro);
//   3. strategy.beginStep(); the pipeline runs the schedule, each microbatch's mean loss
//      weighted 1/(M*D) (the DP reduction is a sum, so the gradient is that of the mean
//      loss over the B*T tokens of the global batch);
//   4. strategy.finishStep(): reductions, global-norm clipping (the squared norm summed
//      over the model-parallel group), AdamW;
//   5. the loss: the last stage's TP rank 0 of every replica contributes the weighted
//      sum of its microbatch losses, summed over the world: identical on every rank.
// So every layout computes the loss and the update of one process on the same batch.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "training/checkpoint/checkpoint.h"
#include "training/data/text_dataset.h"
#include "training/dist/process_group.h"
#include "training/model/gpt.h"
#include "training/nn/param.h"
#include "training/nn/tp_group.h"
#include "training/optim/adamw.h"
#include "training/parallel/data_parallel.h"
#include "training/parallel/mesh.h"
#include "training/parallel/pipeline.h"

namespace braid {
namespace train {

/// The data-parallel strategy on the DP axis.
enum class DpMode : uint8_t { kDdp, kZero1, kZero2, kZero3 };
const char* dpModeName(DpMode m);  ///< "ddp", "zero1", "zero2", "zero3"
/// Parses "ddp", "zero1", "zero2", "zero3" (also "fsdp" = zero3); false otherwise.
bool parseDpMode(const std::string& text, DpMode* out);

struct TrainerConfig {
  GptConfig model;
  MeshShape mesh;                 ///< dp x tp x pp; its size must be the world size
  DpMode dpMode = DpMode::kDdp;
  int micros = 1;                 ///< M microbatches per step on each DP replica
  Schedule schedule = Schedule::k1F1B;
  int64_t batch = 8;              ///< B, sequences in the GLOBAL batch; divisible by dp*M
  int64_t seqLen = 0;             ///< T tokens per sequence; 0 = model.context
  uint64_t seed = 1;              ///< initialisation and data sampling
  AdamWConfig adamw;
  int evalBatches = 2;            ///< validation batches (of B sequences) per evaluate()
  /// DDP / ZeRO-1/2 bucket sizes in elements (0: the strategies' byte defaults).
  int64_t firstBucketElems = 0, bucketCapElems = 0;
  /// ZeRO-3: free each layer's gathered parameters after its forward (true; false keeps
  /// them until its backward: less communication, more memory) and prefetch the
  /// next / previous layer's gather in forward / backward.
  bool reshardAfterForward = true, prefetch = true;
  std::string describe() const;
};

/// What one step did.
struct StepStats {
  int64_t step = 0;             ///< 1-based index of the step just done
  double loss = 0;              ///< mean over the global batch (same on every rank)
  double gradNorm = 0;          ///< global gradient norm before clipping
  double seconds = 0;           ///< wall time of the step on this rank
  double tokensPerSec = 0;      ///< B*T / seconds
  double commHidden = 1;        ///< share of DP communication overlapped with backward
  double commSeconds = 0;       ///< DP communication running time in the step
  double bubble = 0;            ///< measured pipeline idle share, mean over the ranks
  double bubbleTheory = 0;      ///< (P-1)/(M+P-1)
};

template <class T>
class Trainer {
 public:
  /// Collective over `world` (every rank passes the same config): builds the mesh,
  /// the stage, the strategy (which broadcasts/shards the initial parameters) and the
  /// pipeline. Throws std::invalid_argument on a bad config (naming the field).
  /// `data` must outlive the Trainer; its vocabulary must fit config.model.vocab.
  Trainer(const TrainerConfig& config, ProcessGroup& world, const TextDataset& data);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Runs one optimizer step (collective).
  StepStats step();
  /// Mean validation loss over config.evalBatches fixed batches (collective; the same
  /// batches every call, so the values form a curve).
  double evaluate();

  /// Sharded checkpoint of the parameters, optimizer state and step count into `dir`:
  /// every (tp, pp) part written by its DP group (training/checkpoint). Collective.
  void save(const std::string& dir);
  /// Loads a checkpoint written by save() (any DP size, same TP x PP and model);
  /// the next step() continues from its step count. Collective.
  void load(const std::string& dir);
  /// This rank's checkpoint state at the current step boundary, copied (local, no
  /// communication): write it later, from any thread, with writeCheckpointShard +
  /// writeCheckpointManifest into a directory that save()/load() understand.
  CheckpointSnapshot<T> snapshot();
  /// After a peer failure: abandons every group of the mesh (training/dist/elastic.h),
  /// so destroying the Trainer aborts them instead of waiting for dead peers.
  void abandon();

  /// Every parameter of this rank's stage as its FULL tensor (TP parts and ZeRO-3
  /// shards gathered), by name. Collective over the TP and DP groups (for tests).
  std::map<std::string, std::vector<T>> fullParameters();

  int64_t stepsDone() const { return step_; }
  Mesh& mesh() { return *mesh_; }
  const TrainerConfig& config() const { return cfg_; }
  DataParallel<T>& strategy() { return *dp_; }
  const Pipeline<T>& pipeline() const { return *pipe_; }
  /// Bytes of model state this rank holds (the strategy's report).
  StateBytes stateBytes() const { return dp_->stateBytes(); }
  /// Number of parameters of the whole model (every stage, unsharded).
  int64_t modelParams() const { return modelParams_; }
  int64_t seqLen() const { return T_; }

 private:
  /// Samples global batch `index` of `split` into batch_; returns this DP rank's
  /// microbatches (pointing into batch_).
  std::vector<Micro> makeMicros(Split split, int64_t index);
  /// Weighted microbatch losses -> the global mean, on every rank.
  double globalLoss(const std::vector<double>& losses);

  TrainerConfig cfg_;
  const TextDataset& data_;
  int64_t T_ = 0, microB_ = 0;
  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<TpGroup<T>> tp_;
  ParamStore<T> store_;
  GptStage<T> stage_;
  std::unique_ptr<DataParallel<T>> dp_;
  std::unique_ptr<Pipeline<T>> pipe_;
  Batch batch_;  ///< the current global batch
  int64_t step_ = 0;
  int64_t modelParams_ = 0;
  std::vector<double> lossHistory_;
};

}  // namespace train
}  // namespace braid
