// Pipeline schedules (pure logic, simulated on all stages), their execution over thread
// ranks with a small fake model (same losses and gradients as one stage), and the
// DataParallel hook order.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/training_parallel/fake_model.h"
#include "tests/training_parallel/ranks.h"
#include "training/parallel/mesh.h"  // stageLayers
#include "training/parallel/pipeline.h"

namespace bt = braid::train;
using bt::PipeOp;
using bt::PipeStep;
using bt::Schedule;

namespace {

// ---- schedule logic -----------------------------------------------------------------------

TEST(PipelineSchedule, GPipeTwoStages) {
  EXPECT_EQ(bt::describeSchedule(bt::buildSchedule(Schedule::kGPipe, 2, 0, 2)),
            "F0 | Sa0 | F1 | Sa1 | Rg0 | B0 | Rg1 | B1");
  EXPECT_EQ(bt::describeSchedule(bt::buildSchedule(Schedule::kGPipe, 2, 1, 2)),
            "Ra0 | F0 | Ra1 | F1 | B0 | Sg0 | B1 | Sg1");
}

TEST(PipelineSchedule, OneFOneBTwoStagesFourMicros) {
  // Stage 0 warms up with one forward; the last stage alternates from the start.
  EXPECT_EQ(bt::describeSchedule(bt::buildSchedule(Schedule::k1F1B, 2, 0, 4)),
            "F0 | Sa0 | F1 | Sa1,Rg0 | B0 | F2 | Sa2,Rg1 | B1 | F3 | Sa3,Rg2 | B2 | Rg3 | B3");
  EXPECT_EQ(bt::describeSchedule(bt::buildSchedule(Schedule::k1F1B, 2, 1, 4)),
            "Ra0 | F0 | B0 | Sg0,Ra1 | F1 | B1 | Sg1,Ra2 | F2 | B2 | Sg2,Ra3 | F3 | B3 | Sg3");
}

TEST(PipelineSchedule, ParseAndBubble) {
  Schedule s;
  EXPECT_TRUE(bt::parseSchedule("GPipe", &s));
  EXPECT_EQ(s, Schedule::kGPipe);
  EXPECT_TRUE(bt::parseSchedule("1f1b", &s));
  EXPECT_EQ(s, Schedule::k1F1B);
  EXPECT_FALSE(bt::parseSchedule("zigzag", &s));
  EXPECT_DOUBLE_EQ(bt::theoreticalBubble(1, 4), 0.0);
  EXPECT_DOUBLE_EQ(bt::theoreticalBubble(2, 4), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(bt::theoreticalBubble(4, 8), 3.0 / 11.0);
  EXPECT_THROW(bt::buildSchedule(Schedule::kGPipe, 2, 2, 4), std::invalid_argument);
  EXPECT_THROW(bt::buildSchedule(Schedule::kGPipe, 2, 0, 0), std::invalid_argument);
}

/// Runs every stage's schedule with rendezvous transfers (an op completes only when the
/// peer has posted its counterpart: the strictest semantics, no buffering). Transfers
/// on one directed link match in posting order, as NCCL send/recv do; a matched pair
/// must name the same microbatch. Returns "" or what went wrong; *peak gets each
/// stage's largest number of microbatches forwarded but not yet backwarded.
std::string simulateSteps(const std::vector<std::vector<PipeStep>>& steps, int M,
                          std::vector<int>* peak) {
  const int P = int(steps.size());
  const size_t n = steps.size();
  std::vector<size_t> pc(n, 0);
  std::vector<std::vector<bool>> done(n);
  std::vector<std::set<int>> fwd(n), bwd(n);
  std::vector<int> live(size_t(P), 0);
  peak->assign(size_t(P), 0);
  auto counterpart = [](PipeOp::Kind k) {
    switch (k) {
      case PipeOp::kSendAct: return PipeOp::kRecvAct;
      case PipeOp::kRecvAct: return PipeOp::kSendAct;
      case PipeOp::kSendGrad: return PipeOp::kRecvGrad;
      default: return PipeOp::kSendGrad;
    }
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < P; ++s) {
      if (pc[size_t(s)] >= steps[size_t(s)].size()) continue;
      const PipeStep& st = steps[size_t(s)][pc[size_t(s)]];
      if (done[size_t(s)].size() != st.size()) done[size_t(s)].assign(st.size(), false);
      if (st.size() == 1 && st[0].compute()) {
        const int m = st[0].micro;
        if (st[0].kind == PipeOp::kForward) {
          if (!fwd[size_t(s)].insert(m).second) return "stage " + std::to_string(s) + " F twice";
          (*peak)[size_t(s)] = std::max((*peak)[size_t(s)], ++live[size_t(s)]);
        } else {
          if (!fwd[size_t(s)].count(m)) return "B before F";
          if (!bwd[size_t(s)].insert(m).second) return "B twice";
          --live[size_t(s)];
        }
        ++pc[size_t(s)];
        done[size_t(s)].clear();
        progress = true;
        continue;
      }
      for (size_t i = 0; i < st.size(); ++i) {
        if (done[size_t(s)][i]) continue;
        const PipeOp& op = st[i];
        const bool toNext = op.kind == PipeOp::kSendAct || op.kind == PipeOp::kRecvGrad;
        const int peer = toNext ? s + 1 : s - 1;
        if (peer < 0 || peer >= P) return "transfer without a peer";
        if (pc[size_t(peer)] >= steps[size_t(peer)].size()) continue;
        const PipeStep& ps = steps[size_t(peer)][pc[size_t(peer)]];
        if (done[size_t(peer)].size() != ps.size()) done[size_t(peer)].assign(ps.size(), false);
        for (size_t j = 0; j < ps.size(); ++j) {
          if (done[size_t(peer)][j] || ps[j].kind != counterpart(op.kind)) continue;
          if (ps[j].micro != op.micro)
            return "stage " + std::to_string(s) + " op micro " + std::to_string(op.micro) +
                   " matched micro " + std::to_string(ps[j].micro) + " on stage " +
                   std::to_string(peer);
          done[size_t(s)][i] = done[size_t(peer)][j] = true;
          progress = true;
          break;
        }
      }
      bool all = true;
      for (bool d : done[size_t(s)]) all = all && d;
      if (all) {
        ++pc[size_t(s)];
        done[size_t(s)].clear();
        progress = true;
      }
    }
  }
  for (int s = 0; s < P; ++s) {
    if (pc[size_t(s)] < steps[size_t(s)].size())
      return "deadlock: stage " + std::to_string(s) + " stuck at step " +
             std::to_string(pc[size_t(s)]) + " of " + bt::describeSchedule(steps[size_t(s)]);
    if (int(fwd[size_t(s)].size()) != M || int(bwd[size_t(s)].size()) != M)
      return "stage " + std::to_string(s) + " missed a microbatch";
  }
  return "";
}

std::string simulate(Schedule sched, int P, int M, std::vector<int>* peak) {
  std::vector<std::vector<PipeStep>> steps;
  for (int s = 0; s < P; ++s) steps.push_back(bt::buildSchedule(sched, P, s, M));
  return simulateSteps(steps, M, peak);
}

TEST(PipelineSchedule, EveryLayoutCompletesWithoutDeadlock) {
  for (Schedule sched : {Schedule::kGPipe, Schedule::k1F1B}) {
    for (int P = 1; P <= 6; ++P) {
      for (int M = 1; M <= 10; ++M) {
        std::vector<int> peak;
        const std::string err = simulate(sched, P, M, &peak);
        ASSERT_EQ(err, "") << bt::scheduleName(sched) << " P=" << P << " M=" << M;
        for (int s = 0; s < P; ++s) {
          // GPipe keeps every microbatch alive; 1F1B at most P - s of them.
          const int bound = sched == Schedule::kGPipe ? M : std::min(M, P - s);
          EXPECT_EQ(peak[size_t(s)], bound) << bt::scheduleName(sched) << " P=" << P
                                            << " M=" << M << " stage " << s;
        }
      }
    }
  }
}

TEST(PipelineSchedule, SimulatorCatchesBrokenSchedules) {
  // The simulator must be able to fail. 1F1B with each transfer in its own group:
  // stage 0 sends activation 1 while stage 1 sends gradient 0; both wait forever.
  using K = PipeOp;
  std::vector<std::vector<PipeStep>> ungrouped = {
      {{{K::kForward, 0}}, {{K::kSendAct, 0}}, {{K::kForward, 1}}, {{K::kSendAct, 1}},
       {{K::kRecvGrad, 0}}, {{K::kBackward, 0}}, {{K::kRecvGrad, 1}}, {{K::kBackward, 1}}},
      {{{K::kRecvAct, 0}}, {{K::kForward, 0}}, {{K::kBackward, 0}}, {{K::kSendGrad, 0}},
       {{K::kRecvAct, 1}}, {{K::kForward, 1}}, {{K::kBackward, 1}}, {{K::kSendGrad, 1}}}};
  std::vector<int> peak;
  EXPECT_NE(simulateSteps(ungrouped, 2, &peak).find("deadlock"), std::string::npos);
  // Microbatches received in another order than sent.
  std::vector<std::vector<PipeStep>> swapped = {bt::buildSchedule(Schedule::kGPipe, 2, 0, 2),
                                                bt::buildSchedule(Schedule::kGPipe, 2, 1, 2)};
  std::swap(swapped[1][0], swapped[1][2]);  // Ra1 | F0 | Ra0 | F1 ...
  EXPECT_NE(simulateSteps(swapped, 2, &peak).find("matched micro"), std::string::npos);
}

// ---- execution on thread ranks ------------------------------------------------------------

constexpr int64_t kV = 16, kC = 8, kB = 2, kT = 3;
constexpr int kBlocks = 4;  // 6 layers in all

struct Batch {
  std::vector<int32_t> tokens, targets;
  std::vector<bt::Micro> micros;
};

Batch makeBatch(int M, uint64_t seed) {
  Batch b;
  const int64_t n = int64_t(M) * kB * kT;
  b.tokens.resize(size_t(n));
  b.targets.resize(size_t(n));
  uint64_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    b.tokens[size_t(i)] = int32_t((s >> 33) % kV);
    b.targets[size_t(i)] = int32_t((s >> 40) % kV);
  }
  for (int m = 0; m < M; ++m) {
    bt::Micro mb;
    mb.tokens = b.tokens.data() + m * kB * kT;
    mb.targets = b.targets.data() + m * kB * kT;
    mb.B = kB;
    mb.T = kT;
    b.micros.push_back(mb);
  }
  return b;
}

struct StageResult {
  std::vector<double> losses;
  std::map<int, std::vector<double>> grads;  // model layer -> gradient
  bt::PipelineStats stats;
};

/// Runs `steps` pipeline steps of the fake model on stage `stage` of `P` (pp comm may be
/// null for P = 1) and returns its losses and final gradients.
StageResult runStage(Schedule sched, int M, int P, int stage, ncclComm_t pp, int steps = 2) {
  auto model = tp_test::makeFakeModel<double>(kV, kC, kBlocks, 7);
  int first, last;
  bt::stageLayers(int(model.size()), P, stage, &first, &last);
  std::vector<bt::Layer<double>*> layers;
  for (int l = first; l <= last; ++l) layers.push_back(model[size_t(l)].get());
  bt::Pipeline<double>::Options opt;
  opt.schedule = sched;
  opt.micros = M;
  opt.actShape = {kB, kT, kC};
  bt::Pipeline<double> pipe(opt, layers, first, pp, stage, P, nullptr);
  StageResult res;
  for (int s = 0; s < steps; ++s) {
    Batch b = makeBatch(M, 100 + uint64_t(s));
    pipe.run(b.micros, 1.0 / M, &res.losses);
  }
  for (int l = first; l <= last; ++l)
    res.grads[l].assign(model[size_t(l)]->grad().begin(), model[size_t(l)]->grad().end());
  res.stats = pipe.stats();
  return res;
}

class PipelineRun : public ::testing::TestWithParam<std::tuple<Schedule, int, int>> {};

TEST_P(PipelineRun, SameLossesAndGradientsAsOneStage) {
  const Schedule sched = std::get<0>(GetParam());
  const int P = std::get<1>(GetParam()), M = std::get<2>(GetParam());
  const StageResult ref = runStage(sched, M, 1, 0, nullptr);
  ASSERT_EQ(ref.losses.size(), size_t(2 * M));
  std::mutex mu;
  StageResult lastStage;
  std::map<int, std::vector<double>> grads;
  std::vector<bt::PipelineStats> stats(static_cast<size_t>(P));
  tp_test::runRanks(P, [&](int rank, int, ncclComm_t world) {
    StageResult r = runStage(sched, M, P, rank, world);
    std::lock_guard<std::mutex> lock(mu);
    for (auto& kv : r.grads) grads[kv.first] = kv.second;
    stats[size_t(rank)] = r.stats;
    if (rank == P - 1) lastStage = r;
    else EXPECT_TRUE(r.losses.empty());
  });
  // The same arithmetic in the same order: bitwise equal.
  ASSERT_EQ(lastStage.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) EXPECT_EQ(lastStage.losses[i], ref.losses[i]) << i;
  ASSERT_EQ(grads.size(), ref.grads.size());
  for (auto& kv : ref.grads) EXPECT_EQ(grads[kv.first], kv.second) << "layer " << kv.first;
  for (int s = 0; s < P; ++s) {
    const bt::PipelineStats& st = stats[size_t(s)];
    EXPECT_GT(st.totalSec, 0.0);
    EXPECT_GE(st.bubble(), 0.0);
    EXPECT_LT(st.bubble(), 1.0);
    EXPECT_EQ(st.peakLive, sched == Schedule::kGPipe ? M : std::min(M, P - s));
    const int links = (s > 0) + (s < P - 1);
    EXPECT_EQ(st.bytesSent, int64_t(links) * M * kB * kT * kC * int64_t(sizeof(double)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PipelineRun,
    ::testing::Values(std::make_tuple(Schedule::kGPipe, 2, 1), std::make_tuple(Schedule::kGPipe, 2, 4),
                      std::make_tuple(Schedule::k1F1B, 2, 4), std::make_tuple(Schedule::k1F1B, 3, 5),
                      std::make_tuple(Schedule::kGPipe, 4, 3), std::make_tuple(Schedule::k1F1B, 4, 8),
                      std::make_tuple(Schedule::k1F1B, 4, 2)),
    [](const ::testing::TestParamInfo<std::tuple<Schedule, int, int>>& info) {
      return std::string(bt::scheduleName(std::get<0>(info.param))) + "_P" +
             std::to_string(std::get<1>(info.param)) + "_M" + std::to_string(std::get<2>(info.param));
    });

/// Records the hook calls of one stage.
class RecordingDp : public bt::DataParallel<double> {
 public:
  std::string name() const override { return "record"; }
  void beginStep() override {}
  void preForward(int l) override { log.push_back("pf" + std::to_string(l)); ++open[l]; }
  void postForward(int l) override { log.push_back("qf" + std::to_string(l)); --open[l]; }
  void preBackward(int l) override { log.push_back("pb" + std::to_string(l)); ++open[l]; }
  void postBackward(int l, bool lastMicro) override {
    log.push_back("qb" + std::to_string(l));
    --open[l];
    if (lastMicro) ++lastCount[l];
    ++backwards[l];
    if (lastMicro && backwards[l] != micros) lateLast = true;
  }
  double finishStep() override { return 0; }
  bt::StateBytes stateBytes() const override { return {}; }
  int64_t heldBytes() const override { return 0; }
  const bt::CommStats& commStats() const override { return stats; }
  bt::AdamW<double>& optimizer() override { return opt; }
  std::vector<bt::StateSlice<double>> stateSlices(bool) override { return {}; }
  void afterLoad() override {}
  bt::CommStats stats;
  bt::AdamW<double> opt{bt::AdamWConfig{}, 0};
  std::vector<std::string> log;
  std::map<int, int> open, lastCount, backwards;
  int micros = 0;
  bool lateLast = false;
};

TEST(PipelineHooks, EveryLayerSeesMForwardsAndBackwardsAndOneLastMicro) {
  for (Schedule sched : {Schedule::kGPipe, Schedule::k1F1B}) {
    const int M = 3;
    auto model = tp_test::makeFakeModel<double>(kV, kC, 2, 1);
    std::vector<bt::Layer<double>*> layers;
    for (auto& l : model) layers.push_back(l.get());
    RecordingDp dp;
    dp.micros = M;
    bt::Pipeline<double>::Options opt;
    opt.schedule = sched;
    opt.micros = M;
    opt.actShape = {kB, kT, kC};
    bt::Pipeline<double> pipe(opt, layers, 0, nullptr, 0, 1, &dp);
    Batch b = makeBatch(M, 3);
    std::vector<double> losses;
    pipe.run(b.micros, 1.0 / M, &losses);
    EXPECT_EQ(losses.size(), size_t(M));
    EXPECT_EQ(dp.log.size(), size_t(4 * 4 * M));
    EXPECT_EQ(dp.log.front(), "pf0");
    EXPECT_EQ(dp.log.back(), "qb0");
    EXPECT_FALSE(dp.lateLast);
    for (int l = 0; l < 4; ++l) {
      EXPECT_EQ(dp.open[l], 0) << l;
      EXPECT_EQ(dp.lastCount[l], 1) << l;
      EXPECT_EQ(dp.backwards[l], M) << l;
    }
    // Forward-only evaluation: pre/post forward hooks only.
    dp.log.clear();
    losses.clear();
    pipe.evaluate(b.micros, &losses);
    EXPECT_EQ(losses.size(), size_t(M));
    EXPECT_EQ(dp.log.size(), size_t(2 * 4 * M));
  }
}

TEST(PipelineErrors, WrongMicrobatchCountAndMissingComm) {
  auto model = tp_test::makeFakeModel<double>(kV, kC, 1, 1);
  std::vector<bt::Layer<double>*> layers;
  for (auto& l : model) layers.push_back(l.get());
  bt::Pipeline<double>::Options opt;
  opt.micros = 2;
  opt.actShape = {kB, kT, kC};
  EXPECT_THROW(bt::Pipeline<double>(opt, layers, 0, nullptr, 0, 2, nullptr), std::invalid_argument);
  EXPECT_THROW(bt::Pipeline<double>(opt, {}, 0, nullptr, 0, 1, nullptr), std::invalid_argument);
  bt::Pipeline<double> pipe(opt, layers, 0, nullptr, 0, 1, nullptr);
  Batch b = makeBatch(3, 1);
  std::vector<double> losses;
  EXPECT_THROW(pipe.run(b.micros, 1.0, &losses), std::invalid_argument);
}

}  // namespace
