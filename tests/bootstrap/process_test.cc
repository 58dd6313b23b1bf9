// Bootstrap with ranks as processes: the test binary re-executes itself as
//   bootstrap_test --bootstrap-rank <id-hex | env> <rank> <nranks> <timeoutMs>
// ("env": the child makes the id itself from NCCL_COMM_ID). Also holds main() and the
// shared exercise every rank runs, in threads and in processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/unique_id.h"
#include "src/net/socket.h"
#include "tests/bootstrap/harness.h"

extern char** environ;

namespace braid {
namespace testing_bs {

int freeLoopbackPort() {
  SockAddr a, bound;
  SockAddr::parse("127.0.0.1:0", &a);
  Socket s;
  if (s.listen(a, &bound) != ncclSuccess) return -1;
  return bound.port();  // closed on return; SO_REUSEADDR lets the next user bind it
}

ncclResult_t exerciseRank(Bootstrap* b, unsigned seed) {
  const int me = b->rank(), n = b->nranks();
  // 1. allGather of a few ints per rank.
  std::vector<int> table(size_t(n) * 3, -1);
  table[size_t(me) * 3 + 0] = me;
  table[size_t(me) * 3 + 1] = me * me;
  table[size_t(me) * 3 + 2] = 12345;
  BRAID_CHECK(b->allGather(table.data(), 3 * sizeof(int)));
  for (int p = 0; p < n; ++p)
    if (table[size_t(p) * 3] != p || table[size_t(p) * 3 + 1] != p * p ||
        table[size_t(p) * 3 + 2] != 12345)
      return setError(ncclInternalError, nullptr, "rank %d: allGather block %d wrong", me, p);
  // 2. barriers.
  for (int i = 0; i < 3; ++i) BRAID_CHECK(b->barrier());
  // 3. tagged messages to every rank (itself included), sent and received in shuffled orders.
  const uint32_t kTags = 6;
  std::vector<std::pair<int, uint32_t>> sends, recvs;
  for (int p = 0; p < n; ++p)
    for (uint32_t t = 0; t < kTags; ++t) {
      sends.push_back({p, t});
      recvs.push_back({p, t});
    }
  std::mt19937 rng(seed);
  std::shuffle(sends.begin(), sends.end(), rng);
  std::shuffle(recvs.begin(), recvs.end(), rng);
  auto size = [](int from, int to, uint32_t tag) { return size_t(tag * 37 + unsigned(from) * 5 + unsigned(to)); };
  for (auto& s : sends) {
    auto msg = pattern(me, s.first, s.second, size(me, s.first, s.second));
    BRAID_CHECK(b->send(s.first, s.second, msg.data(), msg.size()));
  }
  for (auto& r : recvs) {
    std::vector<char> got(size(r.first, me, r.second));
    BRAID_CHECK(b->recv(r.first, r.second, got.data(), got.size()));
    if (got != pattern(r.first, me, r.second, got.size()))
      return setError(ncclInternalError, nullptr, "rank %d: message from %d tag %u corrupt", me,
                      r.first, r.second);
  }
  // 4. the same tag twice in a row from one peer arrives in order.
  if (n > 1) {
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    for (int i = 0; i < 5; ++i) BRAID_CHECK(b->send(next, 100, &i, sizeof(i)));
    for (int i = 0; i < 5; ++i) {
      int v = -1;
      BRAID_CHECK(b->recv(prev, 100, &v, sizeof(v)));
      if (v != i) return setError(ncclInternalError, nullptr, "rank %d: order %d != %d", me, v, i);
    }
  }
  return b->barrier();
}

namespace {

std::string toHex(const ncclUniqueId& id) {
  std::string s;
  char buf[3];
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    snprintf(buf, sizeof(buf), "%02x", unsigned(static_cast<unsigned char>(id.internal[i])));
    s += buf;
  }
  return s;
}

bool fromHex(const std::string& s, ncclUniqueId* id) {
  if (s.size() != 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i)
    id->internal[i] = char(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return true;
}

// The child's side: join, run the exercise, report.
int rankMain(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s --bootstrap-rank <id-hex|env> <rank> <nranks> <timeoutMs>\n", argv[0]);
    return 2;
  }
  ncclUniqueId id;
  if (std::string(argv[2]) == "env") {
    if (bootstrapGetUniqueId(&id) != ncclSuccess) return 3;
  } else if (!fromHex(argv[2], &id)) {
    return 2;
  }
  const int rank = atoi(argv[3]), nranks = atoi(argv[4]);
  BootstrapOptions o;
  o.timeoutMs = atoi(argv[5]);
  std::unique_ptr<Bootstrap> b;
  ncclResult_t res = Bootstrap::create(id, rank, nranks, o, &b);
  if (res == ncclSuccess) res = exerciseRank(b.get(), unsigned(rank + 1000));
  if (res != ncclSuccess) {
    fprintf(stderr, "bootstrap child rank %d failed (%d): %s\n", rank, int(res), lastError(nullptr));
    return 1;
  }
  return 0;
}

std::string selfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

// Spawns one child rank; extraEnv ("NAME=value") is added to our environment.
pid_t spawnRank(const std::string& id, int rank, int nranks, int timeoutMs,
                const std::string& extraEnv = "") {
  std::string exe = selfExe();
  std::vector<std::string> args = {exe, "--bootstrap-rank", id, std::to_string(rank),
                                   std::to_string(nranks), std::to_string(timeoutMs)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  std::vector<std::string> envStore;
  std::string extraName = extraEnv.substr(0, extraEnv.find('=') + 1);
  for (char** e = environ; *e; ++e)
    if (extraName.empty() || strncmp(*e, extraName.c_str(), extraName.size()) != 0)
      envStore.push_back(*e);
  if (!extraEnv.empty()) envStore.push_back(extraEnv);
  std::vector<char*> envp;
  for (auto& e : envStore) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  return pid;
}

// Waits for a child; kills it after timeoutMs. Returns its exit code (-1: killed/failed).
int waitChild(pid_t pid, int timeoutMs) {
  int64_t end = nowMs() + timeoutMs;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0) return -1;
    if (nowMs() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(BootstrapProcesses, ChildrenJoinParentRoot) {
  ScopedEnv env("NCCL_COMM_ID", nullptr);
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);  // the root runs in this process
  const int n = 3;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) pids.push_back(spawnRank(toHex(id), r, n, 20000));
  for (int r = 0; r < n; ++r) {
    ASSERT_GT(pids[size_t(r)], 0);
    EXPECT_EQ(waitChild(pids[size_t(r)], 30000), 0) << "rank " << r;
  }
}

TEST(BootstrapProcesses, ThreadAndProcessesInOneJob) {
  ScopedEnv env("NCCL_COMM_ID", nullptr);
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  const int n = 4;
  std::vector<pid_t> pids;
  for (int r = 1; r < n; ++r) pids.push_back(spawnRank(toHex(id), r, n, 20000));
  BootstrapOptions o;
  o.timeoutMs = 20000;
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(Bootstrap::create(id, 0, n, o, &b), ncclSuccess) << lastError(nullptr);
  EXPECT_EQ(exerciseRank(b.get(), 1000), ncclSuccess) << lastError(nullptr);
  for (size_t i = 0; i < pids.size(); ++i) EXPECT_EQ(waitChild(pids[i], 30000), 0) << "rank " << i + 1;
}

TEST(BootstrapProcesses, CommIdFromEnvironment) {
  int port = freeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string env = "NCCL_COMM_ID=127.0.0.1:" + std::to_string(port);
  const int n = 3;
  std::vector<pid_t> pids;
  // Ranks 1 and 2 first: they retry until rank 0 has started the root.
  for (int r = 1; r < n; ++r) pids.push_back(spawnRank("env", r, n, 20000, env));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pids.push_back(spawnRank("env", 0, n, 20000, env));
  for (size_t i = 0; i < pids.size(); ++i) {
    ASSERT_GT(pids[i], 0);
    EXPECT_EQ(waitChild(pids[i], 30000), 0) << "child " << i;
  }
}

TEST(BootstrapProcesses, CommIdRootAddressInUseIsReported) {
  // Rank 0 must listen on NCCL_COMM_ID's address; if it cannot, it says so.
  SockAddr a, bound;
  ASSERT_TRUE(SockAddr::parse("127.0.0.1:0", &a));
  Socket squatter;
  ASSERT_EQ(squatter.listen(a, &bound), ncclSuccess);
  ScopedEnv env("NCCL_COMM_ID", bound.toString().c_str());
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  BootstrapOptions o;
  o.timeoutMs = 2000;
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::create(id, 0, 2, o, &b), ncclSystemError);
  std::string msg = lastError(nullptr);
  EXPECT_NE(msg.find("cannot bind to " + bound.toString()), std::string::npos) << msg;
}

TEST(BootstrapProcesses, KilledRankMakesOthersFailFast) {
  // Rank 2 never runs (its process is killed before joining): ranks 0 and 1 time out
  // within their own bound instead of hanging.
  ScopedEnv env("NCCL_COMM_ID", nullptr);
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  pid_t victim = spawnRank(toHex(id), 2, 3, 20000);
  ASSERT_GT(victim, 0);
  kill(victim, SIGKILL);
  waitChild(victim, 5000);
  int64_t t0 = nowMs();
  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    BootstrapOptions o;
    o.timeoutMs = 500;
    std::unique_ptr<Bootstrap> b;
    return Bootstrap::create(id, rank, 3, o, &b);
  });
  EXPECT_LT(nowMs() - t0, 5000);
  EXPECT_NE(r[0].res, ncclSuccess);
  EXPECT_NE(r[1].res, ncclSuccess);
  UniqueIdInfo info;
  ASSERT_EQ(bootstrapDecodeId(id, &info), ncclSuccess);
  EXPECT_TRUE(rootGone(info.rootAddr, 3000)) << "the root did not exit";
}

}  // namespace
}  // namespace testing_bs
}  // namespace braid

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--bootstrap-rank")
    return braid::testing_bs::rankMain(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
