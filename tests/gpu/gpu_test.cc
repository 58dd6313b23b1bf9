// braid_gpu_test: collectives on device buffers, run when a CUDA device is usable (every
// test skips, saying why, otherwise). Ranks are worker processes (this binary re-executed,
// see worker.h) on one GPU, or threads of one worker process:
//   Gpu/GpuMatrixProcesses.*  every collective x 12 types x every op x in/out-of-place x
//                             counts, 1..4 ranks as processes
//   Gpu/GpuMatrixThreads.*    the same with 2 and 4 ranks as threads of one process
//   GpuGraph.*             an all-reduce captured in a CUDA Graph, launched 3 times
//   GpuGroup.*             a group of several ops: checked, and one kernel when captured
//   GpuCheck.*             BRAID_CHECK=1: a mismatched count fails every rank, then works
//   GpuFault.KilledRank    SIGKILL of one rank during a large all-reduce loop: the
//                          survivor's ncclCommGetAsyncError reports it, ncclCommAbort returns
//
// Besides GoogleTest's flags the binary takes:
//   --braid-gpu-worker ...  (internal) run as a worker
//   --host-selfcheck        check the harness itself on host memory (no GPU needed): the
//                           matrix passes on the host executor and a corrupted element fails
//   --has-device            exit 0 when a CUDA device is usable, else print why and exit 1
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "tests/gpu/harness.h"
#include "tests/gpu/matrix.h"
#include "tests/gpu/worker.h"

namespace braid_gpu {
namespace {

constexpr int kMatrixTimeoutMs = 240000;
constexpr int kScenarioTimeoutMs = 120000;

std::vector<std::vector<std::string>> rankArgs(
    const std::string& mode, int nranks,
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::vector<std::string>> all;
  for (int r = 0; r < nranks; ++r) {
    auto kv = extra;
    kv.emplace_back("nranks", std::to_string(nranks));
    kv.emplace_back("rank", std::to_string(r));
    all.push_back(workerArgs(mode, kv));
  }
  return all;
}

std::vector<std::vector<std::string>> threadArgs(
    const std::string& mode, int nthreads,
    const std::vector<std::pair<std::string, std::string>>& extra) {
  auto kv = extra;
  kv.emplace_back("threads", std::to_string(nthreads));
  return {workerArgs(mode, kv)};
}

std::vector<Coll> allColls() {
  std::vector<Coll> v;
  for (int i = 0; i < kNumColls; ++i) v.push_back(static_cast<Coll>(i));
  return v;
}

using MatrixParam = std::tuple<int, Coll>;

std::string matrixName(const testing::TestParamInfo<MatrixParam>& info) {
  return std::string(collName(std::get<1>(info.param))) + "_" +
         std::to_string(std::get<0>(info.param)) + "ranks";
}

class GpuMatrixProcesses : public testing::TestWithParam<MatrixParam> {};
class GpuMatrixThreads : public testing::TestWithParam<MatrixParam> {};

TEST_P(GpuMatrixProcesses, AllTypesOpsPlacements) {
  BRAID_GPU_REQUIRE_DEVICE();
  const int n = std::get<0>(GetParam());
  const Coll c = std::get<1>(GetParam());
  std::string report;
  EXPECT_TRUE(runWorkers(rankArgs("matrix", n, {{"coll", collName(c)}}), kMatrixTimeoutMs, &report))
      << report;
}

TEST_P(GpuMatrixThreads, AllTypesOpsPlacements) {
  BRAID_GPU_REQUIRE_DEVICE();
  const int n = std::get<0>(GetParam());
  const Coll c = std::get<1>(GetParam());
  std::string report;
  EXPECT_TRUE(
      runWorkers(threadArgs("matrix", n, {{"coll", collName(c)}}), kMatrixTimeoutMs, &report))
      << report;
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuMatrixProcesses,
                         testing::Combine(testing::Values(1, 2, 3, 4),
                                          testing::ValuesIn(allColls())),
                         matrixName);
INSTANTIATE_TEST_SUITE_P(Gpu, GpuMatrixThreads,
                         testing::Combine(testing::Values(2, 4), testing::ValuesIn(allColls())),
                         matrixName);

TEST(GpuGraph, OneRank) {
  BRAID_GPU_REQUIRE_DEVICE();
  std::string report;
  EXPECT_TRUE(runWorkers(rankArgs("graph", 1, {}), kScenarioTimeoutMs, &report)) << report;
}

TEST(GpuGraph, TwoProcesses) {
  BRAID_GPU_REQUIRE_DEVICE();
  std::string report;
  EXPECT_TRUE(runWorkers(rankArgs("graph", 2, {}), kScenarioTimeoutMs, &report)) << report;
}

TEST(GpuGraph, TwoThreads) {
  BRAID_GPU_REQUIRE_DEVICE();
  std::string report;
  EXPECT_TRUE(runWorkers(threadArgs("graph", 2, {}), kScenarioTimeoutMs, &report)) << report;
}

TEST(GpuGroup, TwoProcessesOneLaunch) {
  BRAID_GPU_REQUIRE_DEVICE();
  std::string report;
  EXPECT_TRUE(runWorkers(rankArgs("group", 2, {}), kScenarioTimeoutMs, &report)) << report;
}

TEST(GpuGroup, ThreeThreadsOneLaunch) {
  BRAID_GPU_REQUIRE_DEVICE();
  std::string report;
  EXPECT_TRUE(runWorkers(threadArgs("group", 3, {}), kScenarioTimeoutMs, &report)) << report;
}

// BRAID_CHECK on the CUDA path: the fingerprints go through the host before the ops are
// enqueued on their streams (the workers inherit the variable).
TEST(GpuCheck, MismatchOnDeviceBuffers) {
  BRAID_GPU_REQUIRE_DEVICE();
  setenv("BRAID_CHECK", "1", 1);
  std::string report;
  EXPECT_TRUE(runWorkers(rankArgs("mismatch", 2, {}), kScenarioTimeoutMs, &report)) << report;
  EXPECT_TRUE(runWorkers(threadArgs("mismatch", 3, {}), kScenarioTimeoutMs, &report)) << report;
  unsetenv("BRAID_CHECK");
}

TEST(GpuFault, AbortWithDeviceWorkInFlightAfterNonblockingInit) {
  BRAID_GPU_REQUIRE_DEVICE();
  std::string report;
  EXPECT_TRUE(runWorkers(rankArgs("abort", 2, {}), kScenarioTimeoutMs, &report)) << report;
}

TEST(GpuFault, KilledRankIsReportedAndAbortReturns) {
  BRAID_GPU_REQUIRE_DEVICE();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  WorkerSet set;
  std::string error;
  ASSERT_TRUE(set.start(rankArgs("killed", 2, {}), &id, &error)) << error;
  // Both ranks are in the loop (3 all-reduces done) before the victim dies.
  const bool ready0 = set.waitStatus(0, 90000);
  const bool ready1 = ready0 && set.waitStatus(1, 90000);
  if (!ready0 || !ready1) {
    std::string report;
    set.waitAll(1000, &report);
    FAIL() << "the ranks never completed 3 all-reduces\n" << report << set.log(0) << set.log(1);
  }
  // An error before the kill would be a false alarm: rank 0 must still be looping.
  EXPECT_TRUE(set.running(0)) << "rank 0 ended before its peer was killed\n" << set.log(0);
  set.kill(1, SIGKILL);
  std::string report;
  // 30 s to notice, plus the abort.
  EXPECT_TRUE(set.wait(0, 60000, &report)) << report;
  EXPECT_NE(set.log(0).find("async error"), std::string::npos) << set.log(0);
  EXPECT_NE(set.log(0).find("ncclCommAbort returned"), std::string::npos) << set.log(0);
  std::printf("%s", set.log(0).c_str());
  EXPECT_TRUE(set.waitAll(10000, &report)) << report;
}

/// --host-selfcheck: the matrix on host buffers (host executor) must pass, and with a
/// corrupted element must fail with a FAIL line. Returns the exit status.
int hostSelfCheck() {
  int failures = 0;
  auto expect = [&](bool cond, const std::string& what, const std::string& report) {
    std::printf("%s: %s\n", cond ? "ok  " : "FAIL", what.c_str());
    if (!cond) {
      std::printf("%s\n", report.c_str());
      ++failures;
    }
    std::fflush(stdout);
  };
  for (Coll c : allColls()) {
    std::string report;
    const bool ok =
        runWorkers(rankArgs("matrix", 2, {{"coll", collName(c)}, {"host", "1"}}), 120000, &report);
    expect(ok, std::string("host matrix, 2 processes: ") + collName(c), report);
  }
  {
    std::string report;
    const bool ok = runWorkers(
        threadArgs("matrix", 3, {{"coll", "reducescatter"}, {"host", "1"}, {"small", "1"}}), 120000,
        &report);
    expect(ok, "host matrix, 3 threads: reducescatter (small)", report);
  }
  for (const char* c : {"allreduce", "alltoall", "gather"}) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      expect(false, "ncclGetUniqueId", ncclGetLastError(nullptr));
      continue;
    }
    WorkerSet set;
    std::string error, report;
    const auto args =
        rankArgs("matrix", 2, {{"coll", c}, {"host", "1"}, {"small", "1"}, {"corrupt", "1"}});
    const bool started = set.start(args, &id, &error);
    const bool ok = started && set.waitAll(120000, &report);
    const std::string log = set.size() > 0 ? set.log(0) : std::string();
    expect(started && !ok && log.find("FAIL rank 0") != std::string::npos,
           std::string("a corrupted element is reported: ") + c, error + report + log);
  }
  {
    // The BRAID_CHECK scenario's own checks, on host buffers.
    setenv("BRAID_CHECK", "1", 1);
    std::string report;
    const bool ok = runWorkers(rankArgs("mismatch", 2, {{"host", "1"}}), 120000, &report);
    unsetenv("BRAID_CHECK");
    expect(ok, "host mismatch scenario, 2 processes (BRAID_CHECK=1)", report);
  }
  std::printf("host self-check: %s\n", failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace braid_gpu

int main(int argc, char** argv) {
  // A worker that died must not take the parent with it through a broken id pipe.
  signal(SIGPIPE, SIG_IGN);
  if (argc > 1 && std::strcmp(argv[1], braid_gpu::kWorkerFlag) == 0) {
    return braid_gpu::workerMain(argc - 2, argv + 2);
  }
  if (argc > 1 && std::strcmp(argv[1], "--host-selfcheck") == 0) {
    return braid_gpu::hostSelfCheck();
  }
  if (argc > 1 && std::strcmp(argv[1], "--has-device") == 0) {
    const std::string why = braid_gpu::noDeviceReason();
    if (why.empty()) return 0;
    std::printf("no CUDA device: %s\n", why.c_str());
    return 1;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
