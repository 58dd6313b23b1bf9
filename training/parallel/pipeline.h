// Pipeline parallelism: one stage's share of an optimizer step over M microbatches.
//
// A stage runs a contiguous range of the model's Layers (training/model/layer.h). For
// each microbatch it receives the activation [B_micro, T, C] from the previous stage,
// runs its layers forward and sends its output to the next stage; in backward it
// receives the output gradient from the next stage, runs its layers backward and sends
// the input gradient back. Transfers are ncclSend/ncclRecv on the pipeline
// communicator (Mesh::pp(): group rank = stage). Token ids and targets are not sent:
// every rank derives the step's batch from the seed (training/parallel/trainer.h).
//
// A schedule is data: buildSchedule() returns, per stage, a list of steps, each either
// one compute op (forward or backward of a microbatch) or a group of transfers issued
// together in one ncclGroupStart/End (so a rank that both sends and receives in a step
// cannot deadlock with its neighbour). The schedules:
//
//   GPipe: every forward (m = 0..M-1), then every backward (m = 0..M-1).
//   1F1B:  stage s runs min(P-s-1, M) warmup forwards, then alternates one forward and
//          one backward (steady state), then the remaining backwards (cooldown); at most
//          P-s microbatches' activations are alive at once instead of M.
//
// Both have the theoretical bubble (P-1)/(M+P-1) of idle time per stage; run() also
// measures it (time not spent computing / total time).
//
// The DataParallel hooks (training/parallel/data_parallel.h) wrap every layer call:
// preForward/postForward around each forward, preBackward/postBackward around each
// backward, with lastMicro true on a layer's last backward of the step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "training/model/layer.h"
#include "training/parallel/data_parallel.h"
#include "training/tensor/tensor.h"

namespace braid {
namespace train {

enum class Schedule : uint8_t { kGPipe, k1F1B };
const char* scheduleName(Schedule s);  ///< "gpipe", "1f1b"
/// Parses "gpipe" / "1f1b" (case-insensitive); false on anything else.
bool parseSchedule(const std::string& text, Schedule* out);

/// One operation of a stage's schedule.
struct PipeOp {
  enum Kind : uint8_t {
    kForward,   ///< run the stage's layers forward on microbatch `micro`
    kBackward,  ///< run them backward
    kRecvAct,   ///< receive microbatch `micro`'s input activation from stage-1
    kSendAct,   ///< send its output activation to stage+1
    kRecvGrad,  ///< receive its output gradient from stage+1
    kSendGrad,  ///< send its input gradient to stage-1
  };
  Kind kind;
  int micro;
  bool compute() const { return kind == kForward || kind == kBackward; }
};

/// One step: a single compute op, or transfers issued together (one NCCL group).
using PipeStep = std::vector<PipeOp>;

/// The steps of stage `stage` of `stages` for `micros` microbatches. Transfers with a
/// missing neighbour (the first stage's receives of activations, ...) are left out.
std::vector<PipeStep> buildSchedule(Schedule schedule, int stages, int stage, int micros);
/// Human-readable schedule ("F0 | S0 | F1 | S1,R0 | B0 ..."), for tests and logs.
std::string describeSchedule(const std::vector<PipeStep>& steps);
/// (P-1)/(M+P-1): the share of a stage's time lost to filling and draining the pipe.
double theoreticalBubble(int stages, int micros);

/// What one run() measured on this stage.
struct PipelineStats {
  double totalSec = 0;    ///< wall time of the whole schedule
  double computeSec = 0;  ///< time inside forward/backward ops (layers + DP hooks)
  double commSec = 0;     ///< time inside transfer steps (waiting for neighbours included)
  int peakLive = 0;       ///< most microbatches whose activations were alive at once
  int64_t bytesSent = 0;
  /// Measured bubble: 1 - computeSec / totalSec.
  double bubble() const { return totalSec > 0 ? 1.0 - computeSec / totalSec : 0.0; }
};

template <class T>
class Pipeline {
 public:
  struct Options {
    Schedule schedule = Schedule::k1F1B;
    int micros = 1;    ///< M, microbatches per optimizer step
    Shape actShape;    ///< the activation passed between stages, e.g. {B_micro, T, C}
  };
  /// layers: this stage's layers in model order; firstLayer: the model index of
  /// layers[0] (layer 0, the model's first, gets no input gradient). pp: the pipeline
  /// communicator (group rank = stage), may be null when stages == 1. dp may be null
  /// (no hooks). The last stage's last layer must produce the 1-element mean loss.
  Pipeline(Options options, std::vector<Layer<T>*> layers, int firstLayer, ncclComm_t pp,
           int stage, int stages, DataParallel<T>* dp);

  /// Runs one optimizer step's forwards and backwards of micros.size() == M
  /// microbatches by the schedule. lossWeight: the head's output gradient (the weight
  /// of one microbatch's mean loss in the objective). On the last stage *losses gets
  /// the M microbatch losses (cleared elsewhere). Throws std::runtime_error when a
  /// transfer fails (naming the op and peer) or a layer's output has the wrong size.
  void run(const std::vector<Micro>& micros, T lossWeight, std::vector<double>* losses);
  /// Forward only (validation): every microbatch in order, no backward, DP pre/post
  /// forward hooks only. On the last stage *losses gets the microbatch losses.
  void evaluate(const std::vector<Micro>& micros, std::vector<double>* losses);

  const PipelineStats& stats() const { return stats_; }
  const std::vector<PipeStep>& schedule() const { return steps_; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }
  bool lastStage() const { return stage_ == stages_ - 1; }

 private:
  void forward(const Micro& micro, int m, bool keep, std::vector<double>* losses);
  void backward(const Micro& micro, int m, T lossWeight, bool lastMicro);
  void transfer(const PipeStep& step);
  void resizeBuffers(int micros);

  Options opt_;
  std::vector<Layer<T>*> layers_;
  int firstLayer_;
  ncclComm_t pp_;
  int stage_, stages_;
  DataParallel<T>* dp_;
  std::vector<PipeStep> steps_;
  int lastBackwardMicro_ = 0;
  // Per microbatch: received input, output to send, received output gradient, input
  // gradient to send, and every layer's Saved state.
  std::vector<Tensor<T>> actIn_, actOut_, gradIn_, gradOut_;
  std::vector<std::vector<std::unique_ptr<Saved>>> saved_;
  PipelineStats stats_;
};

}  // namespace train
}  // namespace braid
