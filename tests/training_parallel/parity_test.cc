// Parity of the parallel layouts with one process: the Trainer on TP, PP (GPipe, 1F1B),
// and 3D DP x TP x PP meshes of thread ranks produces, for 20 steps, the same per-step
// losses (within 1e-5 relative, fp32) as a single process on the same global batches,
// and the same parameters at the end. Also: the bubble fraction is reported and sane,
// and the loss is identical on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/training_parallel/ranks.h"
#include "training/dist/process_group.h"
#include "training/parallel/trainer.h"
#include "training/data/markov.h"
#include "training/data/text_dataset.h"

namespace bt = braid::train;

namespace {

constexpr int kSteps = 20;
constexpr double kLr = 1e-2;
// Parameters after 20 AdamW steps. AdamW normalises each update to about lr whatever
// the gradient's size, so where a gradient is at rounding level (the attention key
// bias, whose exact gradient is 0; GELU units that are off for the batch) fp32 rounding
// differences of other summation orders move a parameter by a visible fraction of lr:
// fp32 allows 2% of lr absolute. fp64 runs the same layouts with a 1e-9 bound, which
// only exact parity passes.
constexpr double kParamRel32 = 1e-4, kParamAbs32 = 0.02 * kLr;
constexpr double kParamRel64 = 1e-9, kParamAbs64 = 1e-9;

/// A corpus with structure to learn: text of a random order-2 Markov chain.
const bt::TextDataset& corpus() {
  static const bt::TextDataset data =
      bt::TextDataset::fromText(bt::MarkovSource::random(2024, 16, 2).generate(7, 6000));
  return data;
}

bt::TrainerConfig baseConfig() {
  bt::TrainerConfig c;
  c.model.vocab = 16;
  c.model.context = 8;
  c.model.width = 16;
  c.model.layers = 2;
  c.model.heads = 4;
  c.batch = 8;
  c.seed = 11;
  c.adamw.lr = kLr;
  c.evalBatches = 1;
  c.firstBucketElems = 300;  // several DDP buckets even on a tiny model
  c.bucketCapElems = 1000;
  return c;
}

template <class T>
struct Outcome {
  std::vector<double> losses;
  double valLoss = 0;
  std::map<std::string, std::vector<T>> params;
  std::vector<bt::StepStats> stats;  // of world rank 0
};

/// Runs `config` for kSteps on its mesh's number of thread ranks.
template <class T = float>
Outcome<T> train(const bt::TrainerConfig& config) {
  Outcome<T> out;
  std::mutex mu;
  std::vector<std::vector<double>> lossesOf(size_t(config.mesh.size()));
  tp_test::runRanks(config.mesh.size(), [&](int rank, int, ncclComm_t comm) {
    bt::ProcessGroup world(comm);
    bt::Trainer<T> trainer(config, world, corpus());
    std::vector<double> losses;
    std::vector<bt::StepStats> stats;
    for (int s = 0; s < kSteps; ++s) {
      stats.push_back(trainer.step());
      losses.push_back(stats.back().loss);
    }
    const double val = trainer.evaluate();
    auto params = trainer.fullParameters();
    std::lock_guard<std::mutex> lock(mu);
    lossesOf[size_t(rank)] = losses;
    for (auto& kv : params) out.params[kv.first] = kv.second;
    if (rank == 0) {
      out.stats = stats;
      out.valLoss = val;
    }
  });
  out.losses = lossesOf[0];
  for (size_t r = 1; r < lossesOf.size(); ++r)
    EXPECT_EQ(lossesOf[r], lossesOf[0]) << "rank " << r << " reports another loss";
  return out;
}

template <class T = float>
const Outcome<T>& reference() {
  static const Outcome<T> ref = train<T>(baseConfig());
  return ref;
}

template <class T>
void expectParity(const Outcome<T>& got, const Outcome<T>& ref, const std::string& layout) {
  const bool fp32 = sizeof(T) == 4;
  const double lossRel = fp32 ? 1e-5 : 1e-12;
  const double paramRel = fp32 ? kParamRel32 : kParamRel64;
  const double paramAbs = fp32 ? kParamAbs32 : kParamAbs64;
  ASSERT_EQ(got.losses.size(), ref.losses.size()) << layout;
  double worst = 0;
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    const double rel = std::fabs(got.losses[s] - ref.losses[s]) / std::fabs(ref.losses[s]);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, lossRel) << layout << " step " << s + 1 << ": " << got.losses[s] << " vs "
                         << ref.losses[s];
  }
  EXPECT_NEAR(got.valLoss, ref.valLoss, lossRel * ref.valLoss) << layout;
  ASSERT_EQ(got.params.size(), ref.params.size()) << layout;
  double worstParam = 0;
  for (const auto& kv : ref.params) {
    auto it = got.params.find(kv.first);
    ASSERT_NE(it, got.params.end()) << layout << " lacks " << kv.first;
    ASSERT_EQ(it->second.size(), kv.second.size()) << layout << " " << kv.first;
    for (size_t i = 0; i < kv.second.size(); ++i) {
      const double a = it->second[i], b = kv.second[i];
      worstParam = std::max(worstParam, std::fabs(a - b));
      EXPECT_LE(std::fabs(a - b), paramRel * std::fabs(b) + paramAbs)
          << layout << " " << kv.first << "[" << i << "]: " << a << " vs " << b;
    }
  }
  // The loss must have moved: parity of a model that does not train proves little.
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.05);
  std::printf("[parity] %s %-28s steps %zu  loss %.6f -> %.6f  max rel loss diff %.2e  max param diff %.2e\n",
              fp32 ? "fp32" : "fp64", layout.c_str(), ref.losses.size(), got.losses.front(), got.losses.back(), worst,
              worstParam);
}

bt::TrainerConfig layout(int dp, int tp, int pp, int micros, bt::Schedule sched,
                         bt::DpMode mode = bt::DpMode::kDdp) {
  bt::TrainerConfig c = baseConfig();
  c.mesh = bt::MeshShape{dp, tp, pp};
  c.micros = micros;
  c.schedule = sched;
  c.dpMode = mode;
  return c;
}

TEST(Parity, TensorParallel2) {
  expectParity(train(layout(1, 2, 1, 1, bt::Schedule::k1F1B)), reference(), "tp=2");
}

TEST(Parity, Pipeline2GPipe) {
  const auto o = train(layout(1, 1, 2, 4, bt::Schedule::kGPipe));
  expectParity(o, reference(), "pp=2 gpipe M=4");
  for (const bt::StepStats& s : o.stats) {
    EXPECT_DOUBLE_EQ(s.bubbleTheory, 1.0 / 5.0);
    EXPECT_GT(s.bubble, 0.0);
    EXPECT_LT(s.bubble, 1.0);
  }
}

TEST(Parity, Pipeline2OneFOneB) {
  const auto o = train(layout(1, 1, 2, 4, bt::Schedule::k1F1B));
  expectParity(o, reference(), "pp=2 1f1b M=4");
  for (const bt::StepStats& s : o.stats) {
    EXPECT_GT(s.bubble, 0.0);
    EXPECT_LT(s.bubble, 1.0);
  }
}

TEST(Parity, Pipeline4OneFOneB) {
  expectParity(train(layout(1, 1, 4, 4, bt::Schedule::k1F1B)), reference(), "pp=4 1f1b M=4");
}

TEST(Parity, DataTensorPipeline2x2x2Ddp) {
  expectParity(train(layout(2, 2, 2, 2, bt::Schedule::k1F1B)), reference(), "3D 2x2x2 ddp 1f1b M=2");
}

TEST(Parity, DataTensorPipeline2x2x2Fsdp) {
  expectParity(train(layout(2, 2, 2, 2, bt::Schedule::kGPipe, bt::DpMode::kZero3)), reference(),
               "3D 2x2x2 zero3 gpipe M=2");
}

TEST(Parity, DataPipeline2x2Zero2OneFOneB) {
  expectParity(train(layout(2, 1, 2, 4, bt::Schedule::k1F1B, bt::DpMode::kZero2)), reference(),
               "dp=2 x pp=2 zero2 1f1b M=4");
}

TEST(Parity, DataParallel2Zero1WithAccumulation) {
  expectParity(train(layout(2, 1, 1, 2, bt::Schedule::k1F1B, bt::DpMode::kZero1)), reference(),
               "dp=2 zero1 M=2");
}

// fp64: the same layouts agree to rounding level (no AdamW amplification visible).
TEST(ParityFp64, ThreeDAndPipelines) {
  expectParity(train<double>(layout(1, 1, 2, 4, bt::Schedule::kGPipe)), reference<double>(),
               "pp=2 gpipe M=4");
  expectParity(train<double>(layout(1, 2, 2, 4, bt::Schedule::k1F1B)), reference<double>(),
               "tp=2 pp=2 1f1b M=4");
  expectParity(train<double>(layout(2, 2, 2, 2, bt::Schedule::k1F1B)), reference<double>(),
               "3D 2x2x2 ddp 1f1b M=2");
}

/// Steps [from, to) of `config` on its mesh, after loading `loadDir` (if not empty);
/// saves into `saveDir` at the end (if not empty). Returns world rank 0's losses.
std::vector<double> trainRange(const bt::TrainerConfig& config, const std::string& loadDir,
                               const std::string& saveDir, int to) {
  std::vector<double> losses;
  std::mutex mu;
  tp_test::runRanks(config.mesh.size(), [&](int rank, int, ncclComm_t comm) {
    bt::ProcessGroup world(comm);
    bt::Trainer<float> trainer(config, world, corpus());
    if (!loadDir.empty()) trainer.load(loadDir);
    std::vector<double> mine;
    while (trainer.stepsDone() < to) mine.push_back(trainer.step().loss);
    if (!saveDir.empty()) trainer.save(saveDir);
    std::lock_guard<std::mutex> lock(mu);
    if (rank == 0) losses = mine;
  });
  return losses;
}

TEST(Checkpoint, ThreeDSaveResumesOnAnotherDataParallelSize) {
  char tmpl[] = "/tmp/braid_tp_ckpt_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  // 10 steps on 2x2x2 (DDP), saved; 10 more on dp=1 x tp=2 x pp=2 from the checkpoint.
  const std::vector<double> first = trainRange(layout(2, 2, 2, 2, bt::Schedule::k1F1B), "", dir, 10);
  const std::vector<double> second = trainRange(layout(1, 2, 2, 2, bt::Schedule::kGPipe), dir, "", kSteps);
  std::system(("rm -rf " + dir).c_str());
  ASSERT_EQ(first.size(), 10u);
  ASSERT_EQ(second.size(), size_t(kSteps - 10));
  const auto& ref = reference().losses;
  for (int s = 0; s < kSteps; ++s) {
    const double got = s < 10 ? first[size_t(s)] : second[size_t(s - 10)];
    EXPECT_NEAR(got, ref[size_t(s)], 1e-5 * ref[size_t(s)]) << "step " << s + 1;
  }
  // A checkpoint of another TP x PP split is refused with a message.
  tp_test::runRanks(1, [&](int, int, ncclComm_t comm) {
    bt::ProcessGroup world(comm);
    bt::Trainer<float> trainer(baseConfig(), world, corpus());
    EXPECT_THROW(trainer.load("/nonexistent/braid/ckpt"), std::runtime_error);
  });
}

TEST(TrainerConfig, RejectsBadLayouts) {
  tp_test::runRanks(1, [&](int, int, ncclComm_t comm) {
    bt::ProcessGroup world(comm);
    bt::TrainerConfig c = baseConfig();
    c.micros = 3;  // batch 8 not divisible by 3
    EXPECT_THROW(bt::Trainer<float>(c, world, corpus()), std::invalid_argument);
    c = baseConfig();
    c.seqLen = 9;  // > context
    EXPECT_THROW(bt::Trainer<float>(c, world, corpus()), std::invalid_argument);
    c = baseConfig();
    c.mesh.tp = 2;  // 2 ranks wanted, world has 1
    EXPECT_THROW(bt::Trainer<float>(c, world, corpus()), std::invalid_argument);
    c = baseConfig();
    c.model.vocab = 8;  // smaller than the data's vocabulary
    EXPECT_THROW(bt::Trainer<float>(c, world, corpus()), std::invalid_argument);
  });
}

TEST(TrainerConfig, ParsesModes) {
  bt::DpMode m;
  EXPECT_TRUE(bt::parseDpMode("fsdp", &m));
  EXPECT_EQ(m, bt::DpMode::kZero3);
  EXPECT_TRUE(bt::parseDpMode("ZeRO2", &m));
  EXPECT_EQ(m, bt::DpMode::kZero2);
  EXPECT_FALSE(bt::parseDpMode("zero4", &m));
}

}  // namespace
