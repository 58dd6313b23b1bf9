// Asynchronous checkpoints (training/checkpoint/async_checkpoint.h) and the elastic
// membership agreement (training/dist/elastic.h), on thread ranks:
//  - a checkpoint snapshotted at step 3 and written by the background thread only after
//    three more steps changed the live state has the same bytes, file for file, as a
//    synchronous saveCheckpoint at step 3; it is invisible until every rank's write is
//    done and committed;
//  - old checkpoints are pruned, temporary directories never look complete, a failed
//    write is dropped;
//  - after a member stops its heartbeat, the others agree on the same failed rank.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "tests/training_dist/strategies.h"
#include "tests/training_dist/toy.h"
#include "training/checkpoint/async_checkpoint.h"
#include "training/checkpoint/checkpoint.h"
#include "training/dist/elastic.h"

namespace braid {
namespace train {
namespace {

namespace fs = std::filesystem;

std::string freshDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "braid_async_" + name + "_" + std::to_string(::getpid());
  fs::remove_all(d);
  return d;
}

/// name -> bytes of every regular file in dir.
std::map<std::string, std::string> filesOf(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out[e.path().filename().string()] = ss.str();
  }
  return out;
}

void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

/// A one-shot gate the writer threads wait on.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

class AsyncVsSync : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(AsyncVsSync, SameFilesAsSynchronousSave) {
  const std::string kind = std::get<0>(GetParam());
  const bool async = std::get<1>(GetParam());
  const std::string syncDir = freshDir("sync_" + kind), root = freshDir("root_" + kind);
  constexpr int kRanks = 2;
  Gate gate;
  int64_t visibleWhilePending = -2;
  expectNoErrors(toy::runRanks(kRanks, [&](int r, ProcessGroup& pg) {
    toy::Config c;
    toy::Model<float> m(c);
    auto dp = toy::makeStrategy<float>(kind, pg, m.store, toy::testAdam());
    for (int s = 0; s < 3; ++s) toy::step(m, *dp, pg, s);
    TrainState st;
    st.step = 3;
    st.dataPosition = 3;
    st.losses = {1.0, 2.0, 3.0};
    saveCheckpoint(syncDir, pg, m.store, *dp, st, "tp0-pp0");
    AsyncCheckpointer ck(root, &pg, 0, async);
    auto snap = std::make_shared<CheckpointSnapshot<float>>(snapshotCheckpoint(pg, m.store, *dp, st, "tp0-pp0"));
    ck.save(3, [snap, &gate, async](const std::string& dir) {
      if (async) gate.wait();  // written only after the live state moved on
      writeCheckpointShard(dir, *snap);
      writeCheckpointManifest(dir, *snap);
    });
    for (int s = 3; s < 6; ++s) {  // training continues while the checkpoint is pending
      ck.poll();
      toy::step(m, *dp, pg, s);
    }
    if (async) {
      EXPECT_TRUE(ck.pending());
      pg.allReduceScalar(0.0);
      if (r == 0) visibleWhilePending = latestCheckpoint(root);
      pg.allReduceScalar(0.0);
      gate.release();
    }
    ck.finish();
    EXPECT_FALSE(ck.pending());
    EXPECT_EQ(ck.lastCommitted(), 3);
    EXPECT_GT(ck.writeSeconds(), 0.0);
  }));
  if (async) {
    EXPECT_EQ(visibleWhilePending, -1) << "a checkpoint was visible before every write was done";
  }
  std::string dir;
  ASSERT_EQ(latestCheckpoint(root, &dir), 3);
  EXPECT_EQ(dir, checkpointStepDir(root, 3));
  const auto want = filesOf(syncDir), got = filesOf(dir);
  ASSERT_EQ(want.size(), 3u);  // manifest + 2 shards
  ASSERT_EQ(got.size(), want.size());
  for (const auto& kv : want) {
    ASSERT_TRUE(got.count(kv.first)) << kv.first << " missing from the async checkpoint";
    EXPECT_TRUE(got.at(kv.first) == kv.second) << kv.first << " differs (" << got.at(kv.first).size()
                                               << " vs " << kv.second.size() << " bytes)";
  }
  fs::remove_all(syncDir);
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Toy, AsyncVsSync,
                         ::testing::Combine(::testing::Values("ddp", "zero3"), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, bool>>& i) {
                           return std::get<0>(i.param) + (std::get<1>(i.param) ? "_async" : "_sync");
                         });

// Four checkpoints with keep = 2, writers slower than the steps: every one commits, the
// newest two stay, a stale temporary directory goes.
TEST(AsyncCheckpoint, KeepsTheNewestAndNoTemporaries) {
  const std::string root = freshDir("keep");
  fs::create_directories(checkpointStepDir(root, 2) + ".tmp-e7");  // stale: removed
  std::vector<int> committed(2, 0);
  expectNoErrors(toy::runRanks(2, [&](int r, ProcessGroup& pg) {
    AsyncCheckpointer ck(root, &pg, 2, true);
    for (int s = 1; s <= 4; ++s) {
      ck.save(s, [s, r](const std::string& dir) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        std::ofstream out(dir + "/f" + std::to_string(r));
        out << s;
        if (!out.flush()) throw std::runtime_error("cannot write in " + dir);
      });
    }
    ck.finish();
    committed[size_t(r)] = ck.committed();
  }));
  EXPECT_EQ(committed, (std::vector<int>{4, 4}));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000003", "step-00000004"}));
  fs::create_directories(checkpointStepDir(root, 9) + ".tmp-e1");  // half-written
  EXPECT_EQ(latestCheckpoint(root), 4);
  fs::remove_all(root);
}

// Rank 0 commits step s after the agreement all-reduce, when the other ranks may
// already be writing step s + 1: the commit's cleanup must leave that directory alone
// (and remove stale temporaries of steps up to s).
TEST(AsyncCheckpoint, CommitLeavesTheNextCheckpointAlone) {
  const std::string root = freshDir("next");
  const std::string next = checkpointStepDir(root, 2) + ".tmp-e0", stale = checkpointStepDir(root, 1) + ".tmp-e5";
  fs::create_directories(next);
  fs::create_directories(stale);
  std::ofstream(next + "/shard-1.bin.tmp") << "being written";
  expectNoErrors(toy::runRanks(1, [&](int, ProcessGroup& pg) {
    AsyncCheckpointer ck(root, &pg, 0, true);
    ck.save(1, [](const std::string& dir) { std::ofstream(dir + "/f") << 1; });
    ck.finish();
  }));
  EXPECT_TRUE(fs::exists(next + "/shard-1.bin.tmp")) << "the commit of step 1 deleted step 2's files";
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(checkpointStepDir(root, 1) + "/f"));
  fs::remove_all(root);
}

TEST(AsyncCheckpoint, AFailedWriteIsDropped) {
  const std::string root = freshDir("fail");
  expectNoErrors(toy::runRanks(2, [&](int r, ProcessGroup& pg) {
    AsyncCheckpointer ck(root, &pg, 0, true);
    ck.save(5, [r](const std::string&) {
      if (r == 1) throw std::runtime_error("disk full (test)");
    });
    ck.finish();
    EXPECT_EQ(ck.lastCommitted(), -1);
    ck.save(6, [](const std::string& dir) { std::ofstream(dir + "/f") << 6; });
    ck.finish();
    EXPECT_EQ(ck.lastCommitted(), 6);
  }));
  EXPECT_EQ(latestCheckpoint(root), 6);
  EXPECT_FALSE(fs::exists(checkpointStepDir(root, 5)));
  fs::remove_all(root);
}

// Three members; rank 2 stops its heartbeat (its process "died") and never reports.
// Ranks 0 and 1 (1 reporting late: still alive, it keeps beating) agree that rank 2
// failed, and hold identical decisions.
TEST(ElasticMembership, SurvivorsAgreeOnTheStoppedRank) {
  const std::string root = freshDir("members");
  ElasticConfig ec;
  ec.dir = root;
  // Margins of seconds: ranks are threads of one process here (no pid to check), and a
  // starved heartbeat thread on a loaded machine must not look like a dead rank.
  ec.heartbeatMs = 50;
  ec.deadAfterMs = 3000;
  ec.agreeTimeoutMs = 20000;
  std::vector<ElasticDecision> got(3);
  expectNoErrors(toy::runRanks(3, [&](int r, ProcessGroup& pg) {
    auto m = std::make_unique<ElasticMembership>(ec, pg);
    pg.allReduceScalar(0.0);
    if (r == 2) {
      m.reset();  // heartbeat stops
      return;
    }
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));
    got[size_t(r)] = m->agree();
    m->adopt(got[size_t(r)]);
    EXPECT_EQ(m->members(), (std::vector<int>{0, 1}));
  }));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[size_t(r)].failed, std::vector<int>{2}) << "rank " << r;
    EXPECT_EQ(got[size_t(r)].survivors, (std::vector<int>{0, 1})) << "rank " << r;
    EXPECT_EQ(got[size_t(r)].excludeCurrent, std::vector<int>{2}) << "rank " << r;
    EXPECT_EQ(got[size_t(r)].epoch, 1);
    EXPECT_NE(got[size_t(r)].why[2].find("heartbeat"), std::string::npos) << got[size_t(r)].why[2];
  }
  EXPECT_TRUE(got[0].coordinator);  // the lowest live rank decides
  EXPECT_FALSE(got[1].coordinator);
  fs::remove_all(root);
}

}  // namespace
}  // namespace train
}  // namespace braid
