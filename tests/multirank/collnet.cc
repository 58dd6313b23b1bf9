// In-network reduction end to end: forked processes playing nodes (NCCL_HOSTID per
// node), the braid-switch binary as the aggregation switch on loopback, CollNet set up
// at init (NCCL_COLLNET_ENABLE=1, BRAID_SWITCH) and the CollNet algorithms forced with
// NCCL_ALGO. Every type and op, in and out of place, all-reduce (chain and direct),
// all-gather and reduce-scatter, on 2x2, 4x1 and 3x2 nodes; a setup that cannot reach a
// switch falls back with a warning; a killed head and a killed switch make every other
// rank fail with an error instead of hanging. Each run reads the ranks' INFO logs to
// prove CollNet (not a fallback) ran. (Suite "CollNetProcs": forked processes, which the
// TSan run leaves to ASan.)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/multirank/data.h"
#include "tests/multirank/harness.h"

// Re-reads NCCL_DEBUG* (nccl.h declares it only with NCCL_OS_LINUX; Braid exports it).
#undef ncclResetDebugInit
extern "C" void ncclResetDebugInit(void);

extern char** environ;

namespace mr {
namespace {

/// The braid-switch binary as a child process listening on loopback.
class SwitchProcess {
 public:
  /// `secretFile`: admit only the job secret in it (--secret-file).
  explicit SwitchProcess(const std::string& secretFile = "") {
    int fds[2];
    if (pipe(fds) != 0) return;
    // posix_spawn, not fork: no code of ours runs in the child before exec (after a
    // fork of this threaded process, a lock another thread held, ThreadSanitizer's
    // among them, could stay locked in the child forever).
    std::vector<std::string> args = {BRAID_SWITCH_BIN, "--listen", "127.0.0.1:0", "--quiet"};
    if (!secretFile.empty()) {
      args.push_back("--secret-file");
      args.push_back(secretFile);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    if (posix_spawn(&pid_, BRAID_SWITCH_BIN, &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    char line[256];
    const std::string tag = "listening on ";
    while (out && fgets(line, sizeof line, out)) {
      const std::string s = line;
      const size_t at = s.find(tag);
      if (at == std::string::npos) continue;
      address_ = s.substr(at + tag.size());
      while (!address_.empty() && (address_.back() == '\n' || address_.back() == ' '))
        address_.pop_back();
      break;
    }
    if (out) fclose(out);  // later lines go nowhere (--quiet prints few)
  }
  ~SwitchProcess() { stop(SIGKILL); }
  const std::string& address() const { return address_; }
  /// Sends `sig` and reaps; returns the wait status (-1 if already gone).
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs body on nodes x per processes, rank r on node r / per, with CollNet enabled
/// through `sw`; each rank logs (INFO, INIT and TUNING) to logDir/rank<r>.log.
std::vector<RankOutcome> runNodes(int nodes, int per, const std::string& sw,
                                  const std::string& algo, const std::string& logDir,
                                  const RankBody& body, RunOptions opts = RunOptions(),
                                  std::vector<std::pair<std::string, std::string>> extra = {}) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"NCCL_COLLNET_ENABLE", "1"}, {"BRAID_SWITCH", sw}, {"NCCL_ALGO", algo},
      {"BRAID_TIMEOUT_MS", "30000"}, {"BRAID_SWITCH_TIMEOUT_MS", "20000"},
      {"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT,TUNING"}};
  for (auto& e : extra) env.push_back(e);
  ScopedEnv scoped(env);
  opts.createComm = false;
  return run(
      Launch::kProcesses, nodes * per,
      [&](ncclComm_t& comm, int rank, int n) {
        const std::string host = "collnet-node-" + std::to_string(rank / per);
        setenv("NCCL_HOSTID", host.c_str(), 1);  // this child only
        const std::string log = logDir + "/rank" + std::to_string(rank) + ".log";
        setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
        ncclResetDebugInit();  // the parent's logger settings came along with fork()
        MR_NCCL_OK(ncclCommInitRank(&comm, n, sharedId(), rank));
        body(comm, rank, n);
      },
      opts);
}

class CollNetProcs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/braid-collnet-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_FALSE(sw_.address().empty()) << "braid-switch did not start (" BRAID_SWITCH_BIN ")";
  }
  void TearDown() override {
    if (!dir_.empty()) (void)!system(("rm -rf " + dir_).c_str());
  }
  /// Every rank's log shows CollNet set up and `algo` chosen for some call.
  void expectCollNetUsed(int n, const std::string& algo) {
    for (int r = 0; r < n; ++r) {
      const std::string log = readFile(dir_ + "/rank" + std::to_string(r) + ".log");
      EXPECT_NE(log.find("CollNet BraidSwitch"), std::string::npos)
          << "rank " << r << " did not set up CollNet:\n" << log.substr(0, 3000);
      EXPECT_NE(log.find(": " + algo + "/"), std::string::npos)
          << "rank " << r << " never ran " << algo << ":\n" << log.substr(0, 3000);
    }
  }
  SwitchProcess sw_;
  std::string dir_;
};

/// Element i of rank r's input: small integers, so every op is exact in every type.
double inputAt(int r, size_t i) { return double((r + i) % 3 + 1); }

/// All-reduce of every type and op (PreMulSum too), in and out of place.
void allReduceEveryTypeAndOp(ncclComm_t comm, int rank, int n, size_t count) {
  for (ncclDataType_t t : allTypes()) {
    if (typeSize(t) == 1 && isFloat(t)) continue;  // fp8: too narrow for these sums
    for (int o = 0; o < 6; ++o) {
      for (bool inPlace : {false, true}) {
        TypedBuffer in(t, count), out(t, count);
        for (size_t i = 0; i < count; ++i) in.set(i, inputAt(rank, i));
        ncclRedOp_t op = ncclRedOp_t(o);
        if (o == 5) {  // PreMulSum by 2
          TypedBuffer scalar(t, 1);
          scalar.set(0, 2);
          MR_NCCL_OK(ncclRedOpCreatePreMulSum(&op, scalar.data(), t, ncclScalarHostImmediate,
                                              comm));
        }
        void* dst = inPlace ? in.data() : out.data();
        MR_NCCL_OK(ncclAllReduce(in.data(), dst, count, t, op, comm, nullptr));
        if (o == 5) MR_NCCL_OK(ncclRedOpDestroy(op, comm));
        const TypedBuffer& res = inPlace ? in : out;
        auto want = [&](size_t i) {
          double acc = o == 1 ? 1 : o == 3 ? 1e9 : 0;
          for (int q = 0; q < n; ++q) {
            const double v = inputAt(q, i);
            if (o == 0 || o == 4) acc += v;
            else if (o == 1) acc *= v;
            else if (o == 2) acc = std::max(acc, v);
            else if (o == 3) acc = std::min(acc, v);
            else acc += 2 * v;
          }
          if (o == 4) acc = isFloat(t) ? acc / n : std::floor(acc / n);
          return acc;
        };
        size_t bad = 0;
        for (size_t i = 0; i < count; ++i) {
          const double got = res.get(i), w = want(i);
          const double tol = isFloat(t) ? std::fabs(w) * 1e-2 : 0;
          if (std::fabs(got - w) > tol && bad++ < 3)
            ADD_FAILURE() << typeName(t) << " op " << o << (inPlace ? " in place" : "")
                          << " [" << i << "] got " << got << " want " << w;
        }
        ASSERT_EQ(bad, 0u) << typeName(t) << " op " << o;
        EXPECT_TRUE(in.guardsIntact());
        EXPECT_TRUE(out.guardsIntact());
      }
    }
  }
}

void allGatherAndReduceScatter(ncclComm_t comm, int rank, int n, size_t count) {
  for (ncclDataType_t t : {ncclFloat32, ncclInt32, ncclBfloat16}) {
    TypedBuffer send(t, count), gathered(t, count * size_t(n));
    for (size_t i = 0; i < count; ++i) send.set(i, inputAt(rank, i));
    MR_NCCL_OK(ncclAllGather(send.data(), gathered.data(), count, t, comm, nullptr));
    EXPECT_TRUE(checkElements("all-gather", count * size_t(n), [&](size_t i, double* g, double* w) {
      *g = gathered.get(i);
      *w = inputAt(int(i / count), i % count);
    }));
    TypedBuffer full(t, count * size_t(n)), mine(t, count);
    for (size_t i = 0; i < count * size_t(n); ++i) full.set(i, inputAt(rank, i));
    MR_NCCL_OK(ncclReduceScatter(full.data(), mine.data(), count, t, ncclSum, comm, nullptr));
    EXPECT_TRUE(checkElements("reduce-scatter", count, [&](size_t i, double* g, double* w) {
      *g = mine.get(i);
      *w = 0;
      for (int q = 0; q < n; ++q) *w += inputAt(q, size_t(rank) * count + i);
    }));
    // In place: recv is the rank's block of the send buffer.
    MR_NCCL_OK(ncclReduceScatter(full.data(), full.at(size_t(rank) * count), count, t, ncclMax,
                                 comm, nullptr));
    EXPECT_TRUE(checkElements("reduce-scatter in place", count, [&](size_t i, double* g, double* w) {
      *g = full.get(size_t(rank) * count + i);
      *w = 0;
      for (int q = 0; q < n; ++q) *w = std::max(*w, inputAt(q, size_t(rank) * count + i));
    }));
  }
}

const char* kAllCollNet = "allreduce:collnet_chain;allgather:collnet;reducescatter:collnet";

TEST_F(CollNetProcs, ChainEveryTypeAndOpOnTwoNodesOfTwo) {
  runNodes(2, 2, sw_.address(), kAllCollNet, dir_, [](ncclComm_t& comm, int rank, int n) {
    allReduceEveryTypeAndOp(comm, rank, n, 1031);
    allGatherAndReduceScatter(comm, rank, n, 777);
  });
  expectCollNetUsed(4, "collnet_chain");
  expectCollNetUsed(4, "collnet");
}

TEST_F(CollNetProcs, DirectOnFourNodesOfOne) {
  runNodes(4, 1, sw_.address(), "allreduce:collnet_direct;allgather:collnet;reducescatter:collnet",
           dir_, [](ncclComm_t& comm, int rank, int n) {
             allReduceEveryTypeAndOp(comm, rank, n, 517);
             allGatherAndReduceScatter(comm, rank, n, 1000);
           });
  expectCollNetUsed(4, "collnet_direct");
}

TEST_F(CollNetProcs, BothAllReducesOnThreeNodesOfTwoWithSmallFifos) {
  for (const char* algo : {"collnet_chain", "collnet_direct"}) {
    runNodes(3, 2, sw_.address(), std::string("allreduce:") + algo, dir_,
             [](ncclComm_t& comm, int rank, int n) {
               for (size_t count : {size_t(1), size_t(7), size_t(100003)}) {
                 TypedBuffer in(ncclFloat32, count), out(ncclFloat32, count);
                 for (size_t i = 0; i < count; ++i) in.set(i, inputAt(rank, i));
                 MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum,
                                          comm, nullptr));
                 EXPECT_TRUE(checkElements("sum", count, [&](size_t i, double* g, double* w) {
                   *g = out.get(i);
                   *w = 0;
                   for (int q = 0; q < n; ++q) *w += inputAt(q, i);
                 }));
               }
             },
             RunOptions(), smallFifoEnv("auto"));
    expectCollNetUsed(6, algo);
  }
}

TEST_F(CollNetProcs, SuspendAndResumeKeepTheSwitch) {
  runNodes(2, 1, sw_.address(), "allreduce:collnet_direct", dir_,
           [](ncclComm_t& comm, int rank, int) {
             std::vector<float> in(50000, float(rank + 1)), out(50000, 0);
             for (int round = 0; round < 2; ++round) {
               MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum,
                                        comm, nullptr));
               EXPECT_EQ(out[49999], 3.0f) << "round " << round;
               // Dropping the dynamic buffers must leave the switch connections usable.
               MR_NCCL_OK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
               MR_NCCL_OK(ncclCommResume(comm));
             }
           });
  expectCollNetUsed(2, "collnet_direct");
}

// A switch that admits one job only: the secret `braid-info --job-secret` derives from
// NCCL_COMM_ID is the job's, so that job is admitted and any other falls back.
TEST_F(CollNetProcs, SecretFileAdmitsTheJobOfNcclCommId) {
  // A free port for the job's root.
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(s);
  const std::string commId = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::string secret;
  {
    ScopedEnv env({{"NCCL_COMM_ID", commId.c_str()}});
    FILE* p = popen(BRAID_INFO_BIN " --job-secret", "r");
    ASSERT_NE(p, nullptr);
    char line[64] = {};
    if (fgets(line, sizeof line, p)) secret = line;
    ASSERT_EQ(pclose(p), 0) << "braid-info --job-secret failed";
  }
  ASSERT_EQ(secret.rfind("0x", 0), 0u) << secret;
  for (bool right : {true, false}) {
    const std::string file = dir_ + (right ? "/secret" : "/other");
    std::ofstream(file) << (right ? secret : std::string("0x1234\n"));
    SwitchProcess sw(file);
    ASSERT_FALSE(sw.address().empty());
    runNodes(2, 1, sw.address(), "allreduce:collnet_chain", dir_,
             [](ncclComm_t& comm, int rank, int) {
               std::vector<float> in(1000, float(rank + 1)), out(1000, 0);
               MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32,
                                        ncclSum, comm, nullptr));
               EXPECT_EQ(out[999], 3.0f);
             },
             RunOptions(), {{"NCCL_COMM_ID", commId}, {"BRAID_SWITCH_TIMEOUT_MS", "3000"}});
    const std::string log = readFile(dir_ + "/rank0.log");
    if (right)
      expectCollNetUsed(2, "collnet_chain");
    else
      EXPECT_NE(log.find("CollNet setup failed"), std::string::npos) << log.substr(0, 3000);
  }
}

TEST_F(CollNetProcs, NoSwitchFallsBackWithAWarning) {
  // A port nobody listens on (bound, never listened: connects are refused), so every
  // rank falls back.
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string nowhere = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  runNodes(2, 1, nowhere, "allreduce:collnet_chain", dir_,
           [](ncclComm_t& comm, int rank, int n) {
             std::vector<float> in(1000, float(rank + 1)), out(1000, 0);
             MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum,
                                      comm, nullptr));
             EXPECT_EQ(out[999], 3.0f);
           },
           RunOptions(), {{"BRAID_SWITCH_TIMEOUT_MS", "3000"}});
  close(holder);
  for (int r = 0; r < 2; ++r) {
    const std::string log = readFile(dir_ + "/rank" + std::to_string(r) + ".log");
    EXPECT_NE(log.find("CollNet setup failed"), std::string::npos) << log.substr(0, 3000);
    EXPECT_EQ(log.find("CollNet BraidSwitch,"), std::string::npos) << log.substr(0, 3000);
  }
}

// Thread ranks of one process (one node: NCCL_COLLNET_NODE_THRESHOLD=1, every switch
// group has one member) still go through the switch process: the ports, the proxy
// thread and the braid-switch client run beside the executors (the TSan run covers this).
TEST(CollNetThreads, OneNodeThroughTheSwitch) {
  SwitchProcess sw;
  ASSERT_FALSE(sw.address().empty());
  char tmpl[] = "/tmp/braid-collnet-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string log = std::string(tmpl) + "/threads.log";
  {
    ScopedEnv env({{"NCCL_COLLNET_ENABLE", "1"}, {"NCCL_COLLNET_NODE_THRESHOLD", "1"},
                   {"BRAID_SWITCH", sw.address().c_str()},
                   {"NCCL_ALGO", "allreduce:collnet_direct;allgather:collnet;reducescatter:collnet"},
                   {"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT"},
                   {"NCCL_DEBUG_FILE", log.c_str()}});
    ncclResetDebugInit();
    run(Launch::kThreads, 3, [](ncclComm_t& comm, int rank, int n) {
      allReduceEveryTypeAndOp(comm, rank, n, 333);
      allGatherAndReduceScatter(comm, rank, n, 4097);
    });
  }
  ncclResetDebugInit();  // back to the environment without the file
  EXPECT_NE(readFile(log).find("CollNet BraidSwitch"), std::string::npos) << readFile(log);
  (void)!system(("rm -rf " + std::string(tmpl)).c_str());
  EXPECT_EQ(sw.stop(SIGTERM), 0) << "braid-switch did not exit cleanly on SIGTERM";
}

/// A long all-reduce loop in which something dies; every rank left must fail fast.
/// A rank listed in `holdOn` keeps its failed communicator `holdSeconds` before aborting
/// (as an application deciding how to recover would); every rank must notice within
/// `bound` seconds.
/// All-reduces until one fails. At iteration 20 (the loop is running, CollNet set up):
/// rank `victim` kills itself, and rank 0 kills process `alsoKill` if given (the switch).
void loopUntilFailure(ncclComm_t& comm, int rank, int victim, std::vector<int> holdOn = {},
                      pid_t alsoKill = 0, int holdSeconds = 12, double bound = 10.0) {
  const size_t count = 1 << 18;
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  for (int it = 0; it < 100000; ++it) {
    if (rank == victim && it == 20) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        raise(SIGKILL);
      }).detach();
    }
    if (rank == 0 && alsoKill > 0 && it == 20) kill(alsoKill, SIGKILL);
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    if (r == ncclSuccess) continue;
    const double took = secondsSince(t0);
    EXPECT_TRUE(r == ncclRemoteError || r == ncclSystemError)
        << "rank " << rank << ": " << ncclGetErrorString(r) << " - " << ncclGetLastError(comm);
    EXPECT_LT(took, bound) << "rank " << rank << " took " << took << " s to notice: "
                           << ncclGetLastError(comm);
    for (int h : holdOn)
      if (h == rank) std::this_thread::sleep_for(std::chrono::seconds(holdSeconds));
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    comm = nullptr;
    return;
  }
  ADD_FAILURE() << "rank " << rank << ": every all-reduce succeeded";
}

TEST_F(CollNetProcs, KilledHeadFailsTheOthers) {
  RunOptions opts;
  opts.failOnSignal = false;
  opts.watchdogSeconds = 90;
  // Rank 2 is node 1's local rank 0: the head of channel 0's chain.
  auto outcomes = runNodes(2, 2, sw_.address(), "allreduce:collnet_chain", dir_,
                           [](ncclComm_t& comm, int rank, int) { loopUntilFailure(comm, rank, 2); },
                           opts, {{"BRAID_PEER_CHECK_MS", "100"}});
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_EQ(outcomes[2].signal, SIGKILL);
  for (int r : {0, 1, 3})
    EXPECT_TRUE(outcomes[size_t(r)].exited && outcomes[size_t(r)].exitCode == 0)
        << "rank " << r << ":\n" << outcomes[size_t(r)].messages;
  // The switch survived and serves a new job.
  EXPECT_EQ(kill(sw_.pid(), 0), 0) << "the switch died with the job";
  runNodes(2, 1, sw_.address(), "allreduce:collnet_chain", dir_,
           [](ncclComm_t& comm, int rank, int) {
             std::vector<float> in(4096, float(rank + 1)), out(4096, 0);
             MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum,
                                      comm, nullptr));
             EXPECT_EQ(out[4095], 3.0f);
           });
  expectCollNetUsed(2, "collnet_chain");
}

TEST_F(CollNetProcs, KilledNonHeadFailsTheOtherNodesAtOnce) {
  // Rank 1 (node 0, not a head) dies; rank 0 notices through shm and keeps its failed
  // communicator open 5 s. Nodes 1's ranks wait on the switch for node 0's messages:
  // they must learn within the bound, 4 s (rank 0's failure closes its switch
  // connection, which fails the group), not when rank 0 aborts nor at BRAID_TIMEOUT_MS.
  RunOptions opts;
  opts.failOnSignal = false;
  opts.watchdogSeconds = 90;
  auto outcomes = runNodes(
      2, 2, sw_.address(), "allreduce:collnet_chain", dir_,
      [](ncclComm_t& comm, int rank, int) { loopUntilFailure(comm, rank, 1, {0}, 0, 5, 4.0); },
      opts,
      {{"BRAID_PEER_CHECK_MS", "100"}, {"BRAID_TIMEOUT_MS", "60000"}});
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_EQ(outcomes[1].signal, SIGKILL);
  for (int r : {0, 2, 3})
    EXPECT_TRUE(outcomes[size_t(r)].exited && outcomes[size_t(r)].exitCode == 0)
        << "rank " << r << ":\n" << outcomes[size_t(r)].messages;
}

TEST_F(CollNetProcs, KilledSwitchFailsEveryRank) {
  RunOptions opts;
  opts.failOnSignal = false;
  opts.watchdogSeconds = 90;
  // Killed from inside the loop (rank 0, at iteration 20), not after a fixed delay: on a
  // slow machine (sanitizers) a delay could end during init, and the ranks would then
  // fall back to point-to-point algorithms and never fail.
  const pid_t swPid = sw_.pid();
  auto outcomes = runNodes(2, 2, sw_.address(), "allreduce:collnet_chain", dir_,
                           [swPid](ncclComm_t& comm, int rank, int) {
                             loopUntilFailure(comm, rank, -1, {}, swPid);
                           },
                           opts);
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(outcomes[size_t(r)].exited && outcomes[size_t(r)].exitCode == 0)
        << "rank " << r << ":\n" << outcomes[size_t(r)].messages;
}

}  // namespace
}  // namespace mr
