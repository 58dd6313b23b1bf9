// Pipeline schedules (GPipe, 1F1B) and their execution on one stage (see pipeline.h).
#include "training/parallel/pipeline.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>
#include <string>

namespace braid {
namespace train {

const char* scheduleName(Schedule s) { return s == Schedule::kGPipe ? "gpipe" : "1f1b"; }

bool parseSchedule(const std::string& text, Schedule* out) {
  std::string t;
  for (char c : text) t += char(std::tolower(static_cast<unsigned char>(c)));
  if (t == "gpipe") {
    *out = Schedule::kGPipe;
  } else if (t == "1f1b") {
    *out = Schedule::k1F1B;
  } else {
    return false;
  }
  return true;
}

double theoreticalBubble(int stages, int micros) {
  return double(stages - 1) / double(micros + stages - 1);
}

namespace {

/// Builds the step list of one stage, dropping transfers that have no peer.
class StepList {
 public:
  StepList(int stage, int stages) : first_(stage == 0), last_(stage == stages - 1) {}
  void compute(PipeOp::Kind k, int m) { steps_.push_back({PipeOp{k, m}}); }
  /// One group of transfers; kinds whose neighbour is missing are skipped.
  void group(std::initializer_list<PipeOp> ops) {
    PipeStep step;
    for (const PipeOp& op : ops) {
      const bool toPrev = op.kind == PipeOp::kRecvAct || op.kind == PipeOp::kSendGrad;
      if (toPrev ? first_ : last_) continue;
      step.push_back(op);
    }
    if (!step.empty()) steps_.push_back(step);
  }
  std::vector<PipeStep> take() { return std::move(steps_); }

 private:
  bool first_, last_;
  std::vector<PipeStep> steps_;
};

}  // namespace

std::vector<PipeStep> buildSchedule(Schedule schedule, int stages, int stage, int micros) {
  if (stages < 1 || stage < 0 || stage >= stages || micros < 1)
    throw std::invalid_argument("buildSchedule: bad stages/stage/micros " +
                                std::to_string(stages) + "/" + std::to_string(stage) + "/" +
                                std::to_string(micros));
  StepList s(stage, stages);
  using K = PipeOp;
  if (schedule == Schedule::kGPipe) {
    // Fill: all forwards, each received from the left and passed on to the right.
    for (int m = 0; m < micros; ++m) {
      s.group({{K::kRecvAct, m}});
      s.compute(K::kForward, m);
      s.group({{K::kSendAct, m}});
    }
    // Drain: all backwards, gradients flowing right to left.
    for (int m = 0; m < micros; ++m) {
      s.group({{K::kRecvGrad, m}});
      s.compute(K::kBackward, m);
      s.group({{K::kSendGrad, m}});
    }
    return s.take();
  }
  // 1F1B. Warmup: stage s is P-s-1 forwards ahead of its first backward.
  const int warmup = std::min(stages - stage - 1, micros);
  const int steady = micros - warmup;
  for (int m = 0; m < warmup; ++m) {
    s.group({{K::kRecvAct, m}});
    s.compute(K::kForward, m);
    s.group({{K::kSendAct, m}});
  }
  if (steady > 0) s.group({{K::kRecvAct, warmup}});
  // Steady state: forward of microbatch warmup+i, backward of microbatch i. The send of
  // a result is grouped with the receive the next op needs, matching the neighbour's
  // own grouped pair, so the two sides never wait on each other in opposite order.
  for (int i = 0; i < steady; ++i) {
    const int fm = warmup + i, bm = i;
    s.compute(K::kForward, fm);
    s.group({{K::kSendAct, fm}, {K::kRecvGrad, bm}});
    s.compute(K::kBackward, bm);
    if (i == steady - 1) {
      s.group({{K::kSendGrad, bm}});
    } else {
      s.group({{K::kSendGrad, bm}, {K::kRecvAct, fm + 1}});
    }
  }
  // Cooldown: the backwards of the warmup microbatches.
  for (int m = steady; m < micros; ++m) {
    s.group({{K::kRecvGrad, m}});
    s.compute(K::kBackward, m);
    s.group({{K::kSendGrad, m}});
  }
  return s.take();
}

std::string describeSchedule(const std::vector<PipeStep>& steps) {
  static const char* kNames[] = {"F", "B", "Ra", "Sa", "Rg", "Sg"};
  std::string out;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i) out += " | ";
    for (size_t j = 0; j < steps[i].size(); ++j) {
      if (j) out += ",";
      out += kNames[steps[i][j].kind] + std::to_string(steps[i][j].micro);
    }
  }
  return out;
}

// ---- execution ---------------------------------------------------------------------------

namespace {

template <class T>
ncclDataType_t ncclTypeOf();
template <>
ncclDataType_t ncclTypeOf<float>() { return ncclFloat32; }
template <>
ncclDataType_t ncclTypeOf<double>() { return ncclFloat64; }

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

template <class T>
Pipeline<T>::Pipeline(Options options, std::vector<Layer<T>*> layers, int firstLayer,
                      ncclComm_t pp, int stage, int stages, DataParallel<T>* dp)
    : opt_(std::move(options)),
      layers_(std::move(layers)),
      firstLayer_(firstLayer),
      pp_(pp),
      stage_(stage),
      stages_(stages),
      dp_(dp) {
  if (layers_.empty()) throw std::invalid_argument("Pipeline: a stage needs at least one layer");
  if (stages_ > 1 && !pp_) throw std::invalid_argument("Pipeline: stages > 1 needs a pp communicator");
  if (stages_ > 1 && opt_.actShape.empty())
    throw std::invalid_argument("Pipeline: stages > 1 needs the activation shape");
  steps_ = buildSchedule(opt_.schedule, stages_, stage_, opt_.micros);
  for (const PipeStep& st : steps_)
    for (const PipeOp& op : st)
      if (op.kind == PipeOp::kBackward) lastBackwardMicro_ = op.micro;
}

template <class T>
void Pipeline<T>::resizeBuffers(int micros) {
  // (clear + resize: never copy an empty Tensor)
  for (auto* v : {&actIn_, &actOut_, &gradIn_, &gradOut_}) {
    v->clear();
    v->resize(size_t(micros));
  }
  saved_.clear();
  saved_.resize(size_t(micros));
}

template <class T>
void Pipeline<T>::forward(const Micro& micro, int m, bool keep, std::vector<double>* losses) {
  Tensor<T> x = std::move(actIn_[size_t(m)]);
  auto& saved = saved_[size_t(m)];
  saved.clear();
  saved.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int l = firstLayer_ + int(i);
    Tensor<T> y;
    if (dp_) dp_->preForward(l);
    std::unique_ptr<Saved> s = layers_[i]->forward(micro, x, y);
    if (dp_) dp_->postForward(l);
    if (keep) saved[i] = std::move(s);
    x = std::move(y);
  }
  if (lastStage()) {
    if (x.numel() != 1)
      throw std::runtime_error("Pipeline: the last stage's output must be the 1-element loss, got " +
                               shapeString(x.shape()));
    if (losses) losses->push_back(double(x[0]));
  } else {
    if (x.numel() != numelOf(opt_.actShape))
      throw std::runtime_error("Pipeline: stage " + std::to_string(stage_) + " output " +
                               shapeString(x.shape()) + " is not the activation shape " +
                               shapeString(opt_.actShape));
    actOut_[size_t(m)] = std::move(x);
  }
}

template <class T>
void Pipeline<T>::backward(const Micro& micro, int m, T lossWeight, bool lastMicro) {
  Tensor<T> dy;
  if (lastStage()) {
    dy.reset({1});
    dy[0] = lossWeight;
  } else {
    dy = std::move(gradIn_[size_t(m)]);
  }
  auto& saved = saved_[size_t(m)];
  for (size_t i = layers_.size(); i-- > 0;) {
    const int l = firstLayer_ + int(i);
    const bool noInputGrad = (l == 0);
    Tensor<T> dx;
    if (dp_) dp_->preBackward(l);
    layers_[i]->backward(micro, *saved[i], dy, noInputGrad ? nullptr : &dx);
    if (dp_) dp_->postBackward(l, lastMicro);
    saved[i].reset();
    dy = std::move(dx);
  }
  saved.clear();
  if (stage_ > 0) {
    if (dy.numel() != numelOf(opt_.actShape))
      throw std::runtime_error("Pipeline: stage " + std::to_string(stage_) +
                               " input gradient " + shapeString(dy.shape()) +
                               " is not the activation shape " + shapeString(opt_.actShape));
    gradOut_[size_t(m)] = std::move(dy);
  }
}

template <class T>
void Pipeline<T>::transfer(const PipeStep& step) {
  const size_t n = size_t(numelOf(opt_.actShape));
  const ncclDataType_t type = ncclTypeOf<T>();
  ncclResult_t r = ncclGroupStart();
  std::string what = "ncclGroupStart";
  for (const PipeOp& op : step) {
    if (r != ncclSuccess) break;
    const size_t m = size_t(op.micro);
    switch (op.kind) {
      case PipeOp::kRecvAct:
        actIn_[m].reset(opt_.actShape);
        r = ncclRecv(actIn_[m].data(), n, type, stage_ - 1, pp_, nullptr);
        what = "ncclRecv(activation) from stage " + std::to_string(stage_ - 1);
        break;
      case PipeOp::kSendAct:
        r = ncclSend(actOut_[m].data(), n, type, stage_ + 1, pp_, nullptr);
        what = "ncclSend(activation) to stage " + std::to_string(stage_ + 1);
        stats_.bytesSent += int64_t(n * sizeof(T));
        break;
      case PipeOp::kRecvGrad:
        gradIn_[m].reset(opt_.actShape);
        r = ncclRecv(gradIn_[m].data(), n, type, stage_ + 1, pp_, nullptr);
        what = "ncclRecv(gradient) from stage " + std::to_string(stage_ + 1);
        break;
      case PipeOp::kSendGrad:
        r = ncclSend(gradOut_[m].data(), n, type, stage_ - 1, pp_, nullptr);
        what = "ncclSend(gradient) to stage " + std::to_string(stage_ - 1);
        stats_.bytesSent += int64_t(n * sizeof(T));
        break;
      default:
        break;
    }
  }
  const ncclResult_t e = ncclGroupEnd();
  if (r == ncclSuccess && e != ncclSuccess) {
    r = e;
    what = "ncclGroupEnd (pipeline transfers)";
  }
  if (r != ncclSuccess) {
    std::string msg = "Pipeline stage " + std::to_string(stage_) + ": " + what + " failed: " +
                      ncclGetErrorString(r);
    const char* last = ncclGetLastError(pp_);
    if (last && *last) msg += std::string(" (") + last + ")";
    throw std::runtime_error(msg);
  }
  // Sent buffers are free once the group completed (host memory, null stream).
  for (const PipeOp& op : step) {
    if (op.kind == PipeOp::kSendAct) actOut_[size_t(op.micro)] = Tensor<T>();
    if (op.kind == PipeOp::kSendGrad) gradOut_[size_t(op.micro)] = Tensor<T>();
  }
}

template <class T>
void Pipeline<T>::run(const std::vector<Micro>& micros, T lossWeight,
                      std::vector<double>* losses) {
  if (int(micros.size()) != opt_.micros)
    throw std::invalid_argument("Pipeline::run: " + std::to_string(micros.size()) +
                                " microbatches, the schedule has " + std::to_string(opt_.micros));
  resizeBuffers(opt_.micros);
  stats_ = PipelineStats{};
  const Clock::time_point t0 = Clock::now();
  int live = 0;
  for (const PipeStep& step : steps_) {
    const Clock::time_point ts = Clock::now();
    if (step.size() == 1 && step[0].compute()) {
      const PipeOp& op = step[0];
      if (op.kind == PipeOp::kForward) {
        forward(micros[size_t(op.micro)], op.micro, true, losses);
        stats_.peakLive = std::max(stats_.peakLive, ++live);
      } else {
        backward(micros[size_t(op.micro)], op.micro, lossWeight, op.micro == lastBackwardMicro_);
        --live;
      }
      stats_.computeSec += since(ts);
    } else {
      transfer(step);
      stats_.commSec += since(ts);
    }
  }
  stats_.totalSec = since(t0);
}

template <class T>
void Pipeline<T>::evaluate(const std::vector<Micro>& micros, std::vector<double>* losses) {
  resizeBuffers(int(micros.size()));
  for (int m = 0; m < int(micros.size()); ++m) {
    if (stage_ > 0) transfer({PipeOp{PipeOp::kRecvAct, m}});
    forward(micros[size_t(m)], m, false, losses);
    saved_[size_t(m)].clear();
    if (!lastStage()) transfer({PipeOp{PipeOp::kSendAct, m}});
  }
}

template class Pipeline<float>;
template class Pipeline<double>;

}  // namespace train
}  // namespace braid
