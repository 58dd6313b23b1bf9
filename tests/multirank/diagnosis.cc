// Failures that explain themselves: the flight recorder (files written on a timeout, a
// dead peer, SIGUSR1 and braidCommDumpFlightRecord, then read by the braid-doctor
// binary) and BRAID_CHECK's collective mismatch detection (every rank fails with
// ncclInvalidUsage naming the ranks and both calls; the communicator stays usable).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

/// A fresh directory for one test's flight records.
std::string freshDir(const char* test) {
  char tmpl[128];
  snprintf(tmpl, sizeof(tmpl), "/tmp/braid-fr-test-%s-XXXXXX", test);
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

std::vector<std::string> recordFiles(const std::string& dir) {
  std::vector<std::string> out;
  const std::string cmd = "ls " + dir + "/braid-fr-*.json 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512];
  while (fgets(line, sizeof(line), p)) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    out.push_back(s);
  }
  pclose(p);
  return out;
}

/// braid-doctor's output on `dir` (and its exit status).
std::string doctor(const std::string& dir, int* status = nullptr) {
  const std::string cmd = std::string(BRAID_DOCTOR_BIN) + " " + dir + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void removeDir(const std::string& dir) {
  if (dir.rfind("/tmp/braid-fr-test-", 0) != 0) return;
  for (const std::string& f : recordFiles(dir)) unlink(f.c_str());
  rmdir(dir.c_str());
}

// Rank 3 skips the second all-reduce: the others stall in it, time out, and write their
// records; braid-doctor names rank 3 as the one that never called collective #1.
TEST(FlightRecorderProcs, DoctorNamesTheRankThatNeverCalled) {
  const std::string dir = freshDir("skip");
  ASSERT_FALSE(dir.empty());
  ScopedEnv env({{"BRAID_TIMEOUT_MS", "1500"},
                 {"BRAID_PEER_CHECK_MS", "100"},
                 {"BRAID_FLIGHT_RECORDER_DIR", dir.c_str()}});
  RunOptions opts;
  opts.watchdogSeconds = 90;
  run(Launch::kProcesses, 4,
      [&dir](ncclComm_t& comm, int rank, int) {
        std::vector<float> buf(1024, 1.0f);
        MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm,
                                 nullptr));
        if (rank == 3) {
          // Stay alive (not a dead peer) until the others have given up and written
          // their records, then dump.
          const auto t0 = std::chrono::steady_clock::now();
          while (recordFiles(dir).size() < 3 && secondsSince(t0) < 45)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          MR_NCCL_OK(braidCommDumpFlightRecord(comm, nullptr));
          EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
          comm = nullptr;
          return;
        }
        const ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), 77, ncclFloat, ncclMax,
                                             comm, nullptr);
        EXPECT_EQ(r, ncclSystemError) << ncclGetLastError(comm);
        EXPECT_TRUE(mentions(ncclGetLastError(comm), "BRAID_TIMEOUT_MS"));
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        comm = nullptr;
      },
      opts);
  EXPECT_EQ(recordFiles(dir).size(), 4u);
  // One rank's file: the JSON says what it was doing.
  const std::string rank0 = readFile(recordFiles(dir).front());
  EXPECT_NE(rank0.find("\"reason\":\"timeout\""), std::string::npos) << rank0;
  EXPECT_NE(rank0.find("\"state\":\"failed\""), std::string::npos) << rank0;
  EXPECT_NE(rank0.find("\"waiting_on\""), std::string::npos) << rank0;
  int status = -1;
  const std::string d = doctor(dir, &status);
  EXPECT_EQ(status, 0) << d;
  EXPECT_NE(d.find("rank 3 never called it"), std::string::npos) << d;
  EXPECT_NE(d.find("oldest unfinished collective: #1 ncclAllReduce(count 77, float, max)"),
            std::string::npos) << d;
  EXPECT_NE(d.find("=> rank 3 did not call collective #1"), std::string::npos) << d;
  EXPECT_NE(d.find("waiting on rank"), std::string::npos) << d;
  removeDir(dir);
}

// A rank killed in a collective: the survivors fail (dead peer), write their records,
// and braid-doctor says which rank left none.
TEST(FlightRecorderProcs, DoctorNamesTheDeadRank) {
  const std::string dir = freshDir("dead");
  ASSERT_FALSE(dir.empty());
  ScopedEnv env({{"BRAID_TIMEOUT_MS", "20000"},
                 {"BRAID_PEER_CHECK_MS", "100"},
                 {"BRAID_FLIGHT_RECORDER_DIR", dir.c_str()}});
  RunOptions opts;
  opts.watchdogSeconds = 60;
  opts.failOnSignal = false;
  run(Launch::kProcesses, 3,
      [](ncclComm_t& comm, int rank, int) {
        std::vector<float> buf(1 << 16, 1.0f);
        MR_NCCL_OK(ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclFloat, 0, comm, nullptr));
        if (rank == 2) raise(SIGKILL);
        const ncclResult_t r =
            ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, comm, nullptr);
        EXPECT_NE(r, ncclSuccess);
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        comm = nullptr;
      },
      opts);
  EXPECT_EQ(recordFiles(dir).size(), 2u);
  const std::string d = doctor(dir);
  EXPECT_NE(d.find("rank 2: no record"), std::string::npos) << d;
  EXPECT_NE(d.find("=> rank 2 left no record"), std::string::npos) << d;
  removeDir(dir);
}

// SIGUSR1 makes a live process write every communicator's record, and the explicit
// call writes where it is told; with the recorder off the call says so.
TEST(FlightRecorderProcs, SignalAndApiDumps) {
  const std::string dir = freshDir("signal");
  ASSERT_FALSE(dir.empty());
  ScopedEnv env({{"BRAID_FLIGHT_RECORDER_DIR", dir.c_str()}});
  run(Launch::kProcesses, 2, [&dir](ncclComm_t& comm, int rank, int) {
    std::vector<int> buf(8, rank);
    for (int i = 0; i < 3; ++i)
      MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), 8, ncclInt32, ncclSum, comm, nullptr));
    raise(SIGUSR1);  // the dumper thread writes the file
    bool found = false;
    for (int i = 0; i < 200 && !found; ++i) {
      for (const std::string& f : recordFiles(dir))
        found |= f.find("-rank" + std::to_string(rank) + ".json") != std::string::npos;
      if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(found) << "no record for rank " << rank << " in " << dir << " after SIGUSR1";
    const std::string own = dir + "/api-rank" + std::to_string(rank) + ".json";
    MR_NCCL_OK(braidCommDumpFlightRecord(comm, own.c_str()));
    const std::string text = readFile(own);
    EXPECT_NE(text.find("\"reason\":\"api\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"collectives_issued\":3"), std::string::npos) << text;
    EXPECT_EQ(braidCommDumpFlightRecord(comm, "/nonexistent-dir/x/y.json"), ncclSystemError);
    unlink(own.c_str());
  });
  const std::string d = doctor(dir);
  EXPECT_NE(d.find("every recorded collective finished (last: #2)"), std::string::npos) << d;
  removeDir(dir);

  ScopedEnv off({{"BRAID_FLIGHT_RECORDER", "0"}});
  run(Launch::kThreads, 2, [](ncclComm_t& comm, int, int) {
    EXPECT_EQ(braidCommDumpFlightRecord(comm, nullptr), ncclInvalidUsage);
    EXPECT_TRUE(mentions(ncclGetLastError(comm), "BRAID_FLIGHT_RECORDER=0"));
  });
}

// BRAID_CHECK=1: rank 2 passes another count; every rank fails with ncclInvalidUsage
// naming the ranks and both calls, and the next (matching) collective works.
void mismatchCase(Launch how) {
  ScopedEnv env({{"BRAID_CHECK", "1"}, {"BRAID_TIMEOUT_MS", "20000"}});
  run(how, 4, [](ncclComm_t& comm, int rank, int nranks) {
    std::vector<float> buf(4096, 1.0f);
    MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), 100, ncclFloat, ncclSum, comm, nullptr));
    const size_t count = rank == 2 ? 1000 : 1024;
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), count, ncclFloat, ncclSum, comm,
                                   nullptr);
    EXPECT_EQ(r, ncclInvalidUsage);
    const std::string text = ncclGetLastError(comm);
    EXPECT_TRUE(mentions(text.c_str(), "collective mismatch"));
    EXPECT_TRUE(mentions(text.c_str(), "at collective #1: ranks 0,1,3 called "
                                       "ncclAllReduce(count 1024, float, sum) but rank 2 called "
                                       "ncclAllReduce(count 1000, float, sum)"));
    // A different collective altogether, inside a group with a matching one.
    MR_NCCL_OK(ncclGroupStart());
    MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), 8, ncclFloat, ncclSum, comm, nullptr));
    if (rank == 0)
      MR_NCCL_OK(ncclBroadcast(buf.data(), buf.data(), 8, ncclFloat, 0, comm, nullptr));
    else
      MR_NCCL_OK(ncclReduce(buf.data(), buf.data(), 8, ncclFloat, ncclSum, 0, comm, nullptr));
    r = ncclGroupEnd();
    EXPECT_EQ(r, ncclInvalidUsage);
    EXPECT_TRUE(mentions(ncclGetLastError(comm),
                         "at collective #3: ranks 1-3 called ncclReduce(count 8, float, sum, "
                         "root 0) but rank 0 called ncclBroadcast(count 8, float, root 0)"));
    // The communicator is still good: the mismatched work ran nowhere.
    std::fill(buf.begin(), buf.end(), float(rank + 1));
    MR_NCCL_OK(ncclAllReduce(buf.data(), buf.data(), 4096, ncclFloat, ncclSum, comm, nullptr));
    EXPECT_EQ(buf[4095], float(nranks * (nranks + 1) / 2));
    ncclResult_t async = ncclInternalError;
    MR_NCCL_OK(ncclCommGetAsyncError(comm, &async));
    EXPECT_EQ(async, ncclSuccess);
  });
}

TEST(CollectiveCheck, MismatchFailsEveryRankThreads) { mismatchCase(Launch::kThreads); }
TEST(CollectiveCheck, MismatchFailsEveryRankInitAll) { mismatchCase(Launch::kInitAll); }
TEST(CollectiveCheck, MismatchFailsEveryRankProcesses) { mismatchCase(Launch::kProcesses); }

// Root and op are compared only where they matter: an all-gather passes whatever root.
TEST(CollectiveCheck, MatchingCallsRunAndCheckOnlyWhatMatters) {
  ScopedEnv env({{"BRAID_CHECK", "1"}});
  run(Launch::kThreads, 3, [](ncclComm_t& comm, int rank, int nranks) {
    std::vector<int> in(16, rank), out(16 * size_t(nranks), -1);
    for (int i = 0; i < 20; ++i)
      MR_NCCL_OK(ncclAllGather(in.data(), out.data(), 16, ncclInt32, comm, nullptr));
    for (int r = 0; r < nranks; ++r) EXPECT_EQ(out[size_t(r) * 16], r);
    // Sends and receives are not compared (peers need not match every rank's calls).
    MR_NCCL_OK(ncclGroupStart());
    MR_NCCL_OK(ncclSend(in.data(), 16, ncclInt32, (rank + 1) % nranks, comm, nullptr));
    MR_NCCL_OK(ncclRecv(out.data(), 16, ncclInt32, (rank + nranks - 1) % nranks, comm, nullptr));
    MR_NCCL_OK(ncclGroupEnd());
    EXPECT_EQ(out[0], (rank + nranks - 1) % nranks);
  });
}

}  // namespace
}  // namespace mr
