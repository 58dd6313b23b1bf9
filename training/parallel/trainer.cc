// The Trainer: mesh + stage + strategy + pipeline, one optimizer step at a time (see
// trainer.h for the step and the parity argument).
#include "training/parallel/trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>
#include <string>

#include "training/checkpoint/checkpoint.h"
#include "training/dist/nccl_tp_group.h"
#include "training/parallel/ddp.h"
#include "training/parallel/zero.h"

namespace braid {
namespace train {

const char* dpModeName(DpMode m) {
  switch (m) {
    case DpMode::kDdp: return "ddp";
    case DpMode::kZero1: return "zero1";
    case DpMode::kZero2: return "zero2";
    case DpMode::kZero3: return "zero3";
  }
  return "?";
}

bool parseDpMode(const std::string& text, DpMode* out) {
  std::string t;
  for (char c : text) t += char(std::tolower(static_cast<unsigned char>(c)));
  if (t == "ddp") *out = DpMode::kDdp;
  else if (t == "zero1") *out = DpMode::kZero1;
  else if (t == "zero2") *out = DpMode::kZero2;
  else if (t == "zero3" || t == "fsdp") *out = DpMode::kZero3;
  else return false;
  return true;
}

std::string TrainerConfig::describe() const {
  std::string dp = dpModeName(dpMode);
  if (dpMode == DpMode::kZero3 && !reshardAfterForward) dp += " (no reshard after forward)";
  if (dpMode == DpMode::kZero3 && !prefetch) dp += " (no prefetch)";
  return model.describe() + ", " + mesh.describe() + ", " + dp + ", " +
         scheduleName(schedule) + " M=" + std::to_string(micros) + ", batch " +
         std::to_string(batch) + " x " + std::to_string(seqLen ? seqLen : model.context);
}

namespace {

using Clock = std::chrono::steady_clock;

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("TrainerConfig: " + what);
}

}  // namespace

template <class T>
Trainer<T>::Trainer(const TrainerConfig& config, ProcessGroup& world, const TextDataset& data)
    : cfg_(config), data_(data) {
  const MeshShape& ms = cfg_.mesh;
  T_ = cfg_.seqLen > 0 ? cfg_.seqLen : cfg_.model.context;
  check(T_ <= cfg_.model.context, "seqLen " + std::to_string(T_) + " > context " +
                                      std::to_string(cfg_.model.context));
  check(cfg_.micros >= 1, "micros must be >= 1");
  check(cfg_.batch % (int64_t(ms.dp) * cfg_.micros) == 0,
        "batch " + std::to_string(cfg_.batch) + " must be divisible by dp*micros = " +
            std::to_string(ms.dp * cfg_.micros));
  check(cfg_.model.numLayers() >= ms.pp, "pp " + std::to_string(ms.pp) + " > the model's " +
                                             std::to_string(cfg_.model.numLayers()) + " layers");
  check(cfg_.model.vocab % ms.tp == 0, "vocab must be divisible by tp");
  check(cfg_.model.heads % ms.tp == 0, "heads must be divisible by tp");
  check(data_.vocabSize() <= cfg_.model.vocab,
        "model.vocab " + std::to_string(cfg_.model.vocab) + " < the data's vocabulary " +
            std::to_string(data_.vocabSize()));
  check(int64_t(data_.tokens(Split::kTrain).size()) > T_ &&
            int64_t(data_.tokens(Split::kValidation).size()) > T_,
        "a data split is shorter than one sequence");
  microB_ = cfg_.batch / (int64_t(ms.dp) * cfg_.micros);

  mesh_ = std::make_unique<Mesh>(world, ms);
  const MeshCoord c = mesh_->coord();
  if (ms.tp > 1) tp_ = std::make_unique<NcclTpGroup<T>>(mesh_->tp().comm());
  int first = 0, last = 0;
  stageLayers(cfg_.model.numLayers(), ms.pp, c.pp, &first, &last);
  stage_ = buildGptStage<T>(cfg_.model, first, last, store_, tp_.get());
  store_.allocate(cfg_.seed, cfg_.model.numLayers());

  // Whole-model parameter count (every stage's full tensors), for the report.
  double mine = 0;
  if (c.tp == 0 && c.dp == 0)
    for (size_t i = 0; i < store_.size(); ++i) mine += double(numelOf(store_[i].fullShape));
  modelParams_ = int64_t(world.allReduceScalar(mine));

  Mesh* mesh = mesh_.get();
  NormReduce normReduce = [mesh](double sq) { return mesh->mp().allReduceScalar(sq); };
  if (cfg_.dpMode == DpMode::kDdp) {
    DdpConfig dc;
    dc.firstBucketElems = cfg_.firstBucketElems;
    dc.bucketCapElems = cfg_.bucketCapElems;
    dc.normReduce = normReduce;
    dc.tpRank = c.tp;
    dp_ = std::make_unique<Ddp<T>>(mesh_->dp(), store_, cfg_.adamw, dc);
  } else {
    ZeroConfig zc;
    zc.stage = cfg_.dpMode == DpMode::kZero1 ? 1 : cfg_.dpMode == DpMode::kZero2 ? 2 : 3;
    zc.firstBucketElems = cfg_.firstBucketElems;
    zc.bucketCapElems = cfg_.bucketCapElems;
    zc.normReduce = normReduce;
    zc.tpRank = c.tp;
    zc.reshardAfterForward = cfg_.reshardAfterForward;
    zc.prefetch = cfg_.prefetch;
    dp_ = std::make_unique<Zero<T>>(mesh_->dp(), store_, cfg_.adamw, zc);
  }

  typename Pipeline<T>::Options po;
  po.schedule = cfg_.schedule;
  po.micros = cfg_.micros;
  po.actShape = {microB_, T_, cfg_.model.width};
  std::vector<Layer<T>*> layers;
  for (auto& l : stage_.layers) layers.push_back(l.get());
  pipe_ = std::make_unique<Pipeline<T>>(po, layers, first, mesh_->pp().comm(), c.pp, ms.pp,
                                        dp_.get());
}

template <class T>
Trainer<T>::~Trainer() {
  // The strategy may still have work queued on the DP group's stream.
  if (mesh_) {
    try {
      mesh_->dp().synchronize();
    } catch (...) {
    }
  }
}

template <class T>
std::vector<Micro> Trainer<T>::makeMicros(Split split, int64_t index) {
  batch_ = data_.batch(split, cfg_.seed, index, cfg_.batch, T_);
  std::vector<Micro> micros;
  for (int m = 0; m < cfg_.micros; ++m)
    micros.push_back(sliceMicro(batch_, mesh_->coord().dp, cfg_.mesh.dp, m, cfg_.micros));
  return micros;
}

template <class T>
double Trainer<T>::globalLoss(const std::vector<double>& losses) {
  // Each replica's last stage, TP rank 0, holds its M microbatch means; the global mean
  // is their sum weighted 1/(M*D), summed over the world (others contribute 0).
  double part = 0;
  if (mesh_->lastStage() && mesh_->coord().tp == 0)
    for (double l : losses) part += l;
  part /= double(cfg_.micros) * double(cfg_.mesh.dp);
  return mesh_->world().allReduceScalar(part);
}

template <class T>
StepStats Trainer<T>::step() {
  const Clock::time_point t0 = Clock::now();
  std::vector<Micro> micros = makeMicros(Split::kTrain, step_);
  dp_->beginStep();
  std::vector<double> losses;
  pipe_->run(micros, T(1.0 / (double(cfg_.micros) * double(cfg_.mesh.dp))), &losses);
  StepStats st;
  st.gradNorm = dp_->finishStep();
  st.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  st.loss = globalLoss(losses);
  st.step = ++step_;
  st.tokensPerSec = double(cfg_.batch * T_) / std::max(st.seconds, 1e-9);
  const CommStats& cs = dp_->commStats();
  st.commSeconds = cs.commSeconds();
  st.commHidden = cs.hiddenShare();
  st.bubble = mesh_->world().allReduceScalar(pipe_->stats().bubble()) / mesh_->worldSize();
  st.bubbleTheory = theoreticalBubble(cfg_.mesh.pp, cfg_.micros);
  lossHistory_.push_back(st.loss);
  return st;
}

template <class T>
double Trainer<T>::evaluate() {
  double sum = 0;
  for (int i = 0; i < cfg_.evalBatches; ++i) {
    std::vector<Micro> micros = makeMicros(Split::kValidation, i);
    std::vector<double> losses;
    pipe_->evaluate(micros, &losses);
    sum += globalLoss(losses);
  }
  return cfg_.evalBatches > 0 ? sum / cfg_.evalBatches : 0.0;
}

namespace {

std::string partName(const MeshCoord& c) {
  return "tp" + std::to_string(c.tp) + "-pp" + std::to_string(c.pp) + "-";
}

}  // namespace

template <class T>
void Trainer<T>::save(const std::string& dir) {
  TrainState st;
  st.step = step_;
  st.dataPosition = step_;
  st.losses = lossHistory_;
  saveCheckpoint<T>(dir, mesh_->dp(), store_, *dp_, st, partName(mesh_->coord()));
  mesh_->world().allReduceScalar(0.0);  // every part is complete when any rank returns
}

template <class T>
CheckpointSnapshot<T> Trainer<T>::snapshot() {
  TrainState st;
  st.step = step_;
  st.dataPosition = step_;
  st.losses = lossHistory_;
  return snapshotCheckpoint<T>(mesh_->dp(), store_, *dp_, st, partName(mesh_->coord()));
}

template <class T>
void Trainer<T>::abandon() {
  if (mesh_) mesh_->abandon();
}

template <class T>
void Trainer<T>::load(const std::string& dir) {
  if (!checkpointExists(dir, partName(mesh_->coord())))
    throw std::runtime_error("Trainer::load: no checkpoint for part " +
                             partName(mesh_->coord()) + " in " + dir);
  TrainState st = loadCheckpoint<T>(dir, mesh_->dp(), store_, *dp_, partName(mesh_->coord()));
  step_ = st.step;
  lossHistory_ = st.losses;
}

template <class T>
std::map<std::string, std::vector<T>> Trainer<T>::fullParameters() {
  std::vector<T> flat;
  if (auto* z = dynamic_cast<Zero<T>*>(dp_.get())) {
    z->fullParams(&flat);
  } else {
    flat.assign(store_.flatValues(), store_.flatValues() + store_.flatSize());
  }
  std::map<std::string, std::vector<T>> out;
  const int tpSize = cfg_.mesh.tp;
  for (size_t i = 0; i < store_.size(); ++i) {
    const Param<T>& p = store_[i];
    const T* local = flat.data() + p.offset;
    std::vector<T>& full = out[p.name];
    if (p.tp.dim < 0 || tpSize == 1) {
      full.assign(local, local + p.numel());
      continue;
    }
    // Gather every TP rank's part, then interleave along the split dimension: a part is
    // [outer, d/tp, inner] of the full [outer, d, inner].
    std::vector<T> parts(size_t(p.numel()) * size_t(tpSize));
    mesh_->tp().allGather(local, parts.data(), size_t(p.numel()));
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < p.tp.dim; ++d) outer *= p.shape[size_t(d)];
    for (size_t d = size_t(p.tp.dim) + 1; d < p.shape.size(); ++d) inner *= p.shape[d];
    const int64_t part = p.shape[size_t(p.tp.dim)] * inner;  // one outer row of a part
    full.resize(parts.size());
    for (int r = 0; r < tpSize; ++r)
      for (int64_t o = 0; o < outer; ++o)
        std::copy(parts.begin() + (int64_t(r) * p.numel() + o * part),
                  parts.begin() + (int64_t(r) * p.numel() + (o + 1) * part),
                  full.begin() + (o * tpSize + r) * part);
  }
  return out;
}

template class Trainer<float>;
template class Trainer<double>;

}  // namespace train
}  // namespace braid
