// Sharded checkpoints: save at step 10 with DP = 2, load with DP = 4, 2 and 1 (and with
// other strategies), train steps 11..20: the losses equal the uninterrupted run's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <mutex>
#include <unistd.h>

#include "tests/training_dist/strategies.h"
#include "tests/training_dist/toy.h"
#include "training/checkpoint/checkpoint.h"

namespace braid {
namespace train {
namespace {

constexpr int kSave = 10, kSteps = 20;

void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

std::string freshDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "braid_ckpt_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

/// Losses of steps [from, to) on n ranks with `kind`; saves after `saveAt` steps into
/// dir, or (from > 0) loads dir first.
std::vector<double> train(const std::string& kind, int n, int from, int to, const std::string& dir,
                          int saveAt = -1) {
  std::vector<double> losses;
  std::mutex mu;
  expectNoErrors(toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    toy::Config c;
    toy::Model<float> m(c);
    auto dp = toy::makeStrategy<float>(kind, pg, m.store, toy::testAdam());
    int start = from;
    if (from > 0) {
      const TrainState st = loadCheckpoint(dir, pg, m.store, *dp);
      EXPECT_EQ(st.step, from);
      EXPECT_EQ(st.dataPosition, from * c.batch);
      EXPECT_EQ(st.rngState, 77u);
      EXPECT_EQ(dp->optimizer().step(), from);
      start = int(st.step);
    }
    std::vector<double> mine;
    for (int s = start; s < to; ++s) {
      mine.push_back(toy::step(m, *dp, pg, s));
      if (s + 1 == saveAt) {
        TrainState st;
        st.step = s + 1;
        st.dataPosition = (s + 1) * c.batch;
        st.rngState = 77;
        st.losses = mine;
        saveCheckpoint(dir, pg, m.store, *dp, st);
      }
    }
    if (r == 0) {
      std::lock_guard<std::mutex> lock(mu);
      losses = mine;
    }
  }));
  return losses;
}

using Case = std::tuple<std::string, std::string, int>;  // saved by (dp=2), loaded by, dp

class Resume : public ::testing::TestWithParam<Case> {};

TEST_P(Resume, ReproducesUninterruptedLosses) {
  const std::string saver = std::get<0>(GetParam()), loader = std::get<1>(GetParam());
  const int n = std::get<2>(GetParam());
  const std::string dir = freshDir(saver + "_" + loader + std::to_string(n));
  const std::vector<double> full = train(saver, 2, 0, kSteps, dir, kSave);
  ASSERT_EQ(full.size(), size_t(kSteps));
  ASSERT_TRUE(checkpointExists(dir));
  EXPECT_TRUE(std::filesystem::exists(dir + "/shard-0-of-2.bin"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/shard-1-of-2.bin"));
  const std::vector<double> resumed = train(loader, n, kSave, kSteps, dir);
  ASSERT_EQ(resumed.size(), size_t(kSteps - kSave));
  for (int s = kSave; s < kSteps; ++s)
    EXPECT_NEAR(resumed[size_t(s - kSave)], full[size_t(s)], 1e-5 * full[size_t(s)]) << "step " << s + 1;
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Toy, Resume,
    ::testing::Values(Case{"ddp", "ddp", 4}, Case{"ddp", "ddp", 1}, Case{"ddp", "ddp", 2},
                      Case{"zero2", "zero1", 4}, Case{"zero1", "ddp", 1}, Case{"zero3", "zero3", 4},
                      Case{"zero3", "zero2", 1}, Case{"ddp", "zero3", 4}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::get<0>(i.param) + "_to_" + std::get<1>(i.param) + "_dp" + std::to_string(std::get<2>(i.param));
    });

TEST(Checkpoint, WithoutLoadingTheLossesDiffer) {  // the resume check can fail
  const std::string dir = freshDir("noload");
  const std::vector<double> full = train("ddp", 2, 0, kSteps, dir, kSave);
  toy::Config c;
  toy::Reference<float> fresh(c, toy::testAdam());
  EXPECT_GT(std::fabs(fresh.step(kSave) - full[kSave]), 1e-4);
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, MismatchedModelIsRejectedNamingTheParameter) {
  const std::string dir = freshDir("mismatch");
  train("ddp", 1, 0, 1, dir, 1);
  expectNoErrors(toy::runRanks(1, [&](int, ProcessGroup& pg) {
    toy::Config c;
    c.width = 12;  // different shapes
    toy::Model<float> m(c);
    Ddp<float> ddp(pg, m.store, toy::testAdam());
    try {
      loadCheckpoint(dir, pg, m.store, ddp);
      ADD_FAILURE() << "a checkpoint of another model loaded";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("manifest"), std::string::npos) << e.what();
    }
    EXPECT_THROW(loadCheckpoint(dir + "/nope", pg, m.store, ddp), std::runtime_error);
  }));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace train
}  // namespace braid
