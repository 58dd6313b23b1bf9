// Bootstrap with ranks as threads: unique ids, joining, messages, failures.
#include "src/bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "tests/bootstrap/harness.h"

namespace braid {
namespace {

using testing_bs::nowMs;
using testing_bs::RankResult;
using testing_bs::runThreads;
using testing_bs::ScopedEnv;

BootstrapOptions testOptions(int timeoutMs = 20000) {
  BootstrapOptions o;
  o.timeoutMs = timeoutMs;
  return o;
}

std::string allErrors(const std::vector<RankResult>& r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i].res != ncclSuccess) s += "rank " + std::to_string(i) + ": " + r[i].error + "\n";
  return s;
}

void expectAllOk(const std::vector<RankResult>& r) {
  for (const RankResult& x : r) EXPECT_EQ(x.res, ncclSuccess) << allErrors(r);
}

// ---- unique ids ------------------------------------------------------------------------

TEST(UniqueId, RoundTripAndFreshSecrets) {
  ScopedEnv env("NCCL_COMM_ID", nullptr);
  ncclUniqueId a, b;
  ASSERT_EQ(bootstrapGetUniqueId(&a), ncclSuccess);
  ASSERT_EQ(bootstrapGetUniqueId(&b), ncclSuccess);
  UniqueIdInfo ia, ib;
  ASSERT_EQ(bootstrapDecodeId(a, &ia), ncclSuccess);
  ASSERT_EQ(bootstrapDecodeId(b, &ib), ncclSuccess);
  EXPECT_FALSE(ia.fromEnv);
  EXPECT_NE(ia.secret, ib.secret);
  EXPECT_STRNE(ia.rootAddr, ib.rootAddr);  // two roots, two ports
  SockAddr root;
  ASSERT_TRUE(SockAddr::parse(ia.rootAddr, &root)) << ia.rootAddr;
  EXPECT_GT(root.port(), 0);

  ncclUniqueId c;
  bootstrapEncodeId(ia, &c);
  EXPECT_EQ(memcmp(&a, &c, sizeof(a)), 0);
}

TEST(UniqueId, RejectsGarbage) {
  ncclUniqueId id;
  memset(&id, 0x5a, sizeof(id));
  UniqueIdInfo info;
  EXPECT_EQ(bootstrapDecodeId(id, &info), ncclInvalidArgument);
  EXPECT_NE(std::string(lastError(nullptr)).find("ncclUniqueId is not a Braid unique id (bad magic"),
            std::string::npos)
      << lastError(nullptr);
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::create(id, 0, 1, testOptions(), &b), ncclInvalidArgument);
  EXPECT_EQ(b, nullptr);
}

TEST(UniqueId, FromCommIdIsDeterministicAndStartsNothing) {
  ScopedEnv env("NCCL_COMM_ID", "127.0.0.1:29500");
  int roots = bootstrapRootsRunning();
  ncclUniqueId a, b;
  ASSERT_EQ(bootstrapGetUniqueId(&a), ncclSuccess);
  ASSERT_EQ(bootstrapGetUniqueId(&b), ncclSuccess);
  EXPECT_EQ(memcmp(&a, &b, sizeof(a)), 0);
  EXPECT_EQ(bootstrapRootsRunning(), roots);
  UniqueIdInfo info;
  ASSERT_EQ(bootstrapDecodeId(a, &info), ncclSuccess);
  EXPECT_TRUE(info.fromEnv);
  EXPECT_STREQ(info.rootAddr, "127.0.0.1:29500");
  EXPECT_EQ(info.secret, bootstrapSecretFromString("127.0.0.1:29500"));
}

TEST(UniqueId, BadCommIdIsInvalidArgument) {
  ScopedEnv env("NCCL_COMM_ID", "not-an-address");
  ncclUniqueId id;
  EXPECT_EQ(bootstrapGetUniqueId(&id), ncclInvalidArgument);
  EXPECT_NE(std::string(lastError(nullptr)).find("NCCL_COMM_ID='not-an-address'"),
            std::string::npos);
}

TEST(Bootstrap, RejectsBadRankArguments) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::create(id, 2, 2, testOptions(), &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::create(id, -1, 2, testOptions(), &b), ncclInvalidArgument);
  EXPECT_EQ(Bootstrap::create(id, 0, 0, testOptions(), &b), ncclInvalidArgument);
}

// ---- whole jobs as threads ---------------------------------------------------------------

class BootstrapThreads : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapThreads, FullExercise) {
  const int n = GetParam();
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  auto r = runThreads(n, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, n, testOptions(), &b));
    if (b->rank() != rank || b->nranks() != n) return ncclInternalError;
    if (strlen(b->localIp()) == 0) return ncclInternalError;
    return testing_bs::exerciseRank(b.get(), unsigned(rank * 7919 + n));
  });
  expectAllOk(r);
}

TEST_P(BootstrapThreads, AllGatherSizes) {
  const int n = GetParam();
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  auto r = runThreads(n, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, n, testOptions(), &b));
    for (size_t bytes : {size_t(0), size_t(1), size_t(13), size_t(4096), size_t(300000)}) {
      std::vector<char> data(bytes * size_t(n), 0);
      auto mine = testing_bs::pattern(rank, -1, uint32_t(bytes), bytes);
      std::copy(mine.begin(), mine.end(), data.begin() + long(bytes) * rank);
      BRAID_CHECK(b->allGather(data.data(), bytes));
      for (int p = 0; p < n; ++p) {
        auto want = testing_bs::pattern(p, -1, uint32_t(bytes), bytes);
        if (!std::equal(want.begin(), want.end(), data.begin() + long(bytes) * p))
          return setError(ncclInternalError, nullptr, "allGather %zu: block %d wrong on rank %d",
                          bytes, p, rank);
      }
    }
    return ncclSuccess;
  });
  expectAllOk(r);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapThreads, ::testing::Values(1, 2, 3, 8));

TEST(Bootstrap, LargeMessagesBothWaysDoNotDeadlock) {
  // Both ranks send 16 MiB to each other before receiving: far more than socket buffers.
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  const size_t bytes = 16u << 20;
  auto r = runThreads(3, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, 3, testOptions(), &b));
    for (int p = 0; p < 3; ++p)
      if (p != rank) {
        auto msg = testing_bs::pattern(rank, p, 5, bytes);
        BRAID_CHECK(b->send(p, 5, msg.data(), bytes));
      }
    for (int p = 0; p < 3; ++p)
      if (p != rank) {
        std::vector<char> got(bytes);
        BRAID_CHECK(b->recv(p, 5, got.data(), bytes));
        if (got != testing_bs::pattern(p, rank, 5, bytes)) return ncclInternalError;
      }
    return b->barrier();
  });
  expectAllOk(r);
}

TEST(Bootstrap, ManyJobsConcurrentlyOneThreadEach) {
  // Four 2-rank jobs at once in one process: objects must not interfere.
  const int jobs = 4;
  std::vector<ncclUniqueId> ids(jobs);
  for (auto& id : ids) ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  auto r = runThreads(jobs * 2, [&](int t) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(ids[size_t(t / 2)], t % 2, 2, testOptions(), &b));
    return testing_bs::exerciseRank(b.get(), unsigned(t));
  });
  expectAllOk(r);
}

TEST(Bootstrap, OneThreadAlternatesBetweenJobs) {
  // Two 2-rank jobs; thread t is rank t of both and interleaves their operations in the
  // same order on both threads (what a core with several communicators per thread does).
  ncclUniqueId idA, idB;
  ASSERT_EQ(bootstrapGetUniqueId(&idA), ncclSuccess);
  ASSERT_EQ(bootstrapGetUniqueId(&idB), ncclSuccess);
  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> a, b;
    BRAID_CHECK(Bootstrap::create(idA, rank, 2, testOptions(), &a));
    BRAID_CHECK(Bootstrap::create(idB, rank, 2, testOptions(), &b));
    for (int i = 0; i < 20; ++i) {
      int va[2] = {rank * 10 + i, 0}, vb[2] = {rank * 100 + i, 0};
      if (rank == 1) va[1] = va[0], va[0] = 0, vb[1] = vb[0], vb[0] = 0;
      BRAID_CHECK(a->allGather(va, sizeof(int)));
      BRAID_CHECK(b->allGather(vb, sizeof(int)));
      if (va[0] != i || va[1] != 10 + i || vb[0] != i || vb[1] != 100 + i)
        return setError(ncclInternalError, nullptr, "rank %d iteration %d: mixed up", rank, i);
      BRAID_CHECK(b->send(1 - rank, 4, &i, sizeof(i)));
      BRAID_CHECK(a->barrier());
      int got = -1;
      BRAID_CHECK(b->recv(1 - rank, 4, &got, sizeof(got)));
      if (got != i) return ncclInternalError;
    }
    return ncclSuccess;
  });
  expectAllOk(r);
}

TEST(Bootstrap, SizeMismatchIsReported) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, 2, testOptions(), &b));
    char buf[8] = {};
    if (rank == 0) {
      BRAID_CHECK(b->send(1, 3, buf, 4));
      return b->barrier();
    }
    ncclResult_t res = b->recv(0, 3, buf, 8);
    std::string msg = lastError(nullptr);
    BRAID_CHECK(b->barrier());
    if (res != ncclInternalError || msg.find("got 4 bytes from rank 0 (tag 3)") == std::string::npos)
      return setError(ncclInternalError, nullptr, "unexpected: %d %s", int(res), msg.c_str());
    return ncclSuccess;
  });
  expectAllOk(r);
}

// ---- failures ------------------------------------------------------------------------------

TEST(Bootstrap, WrongSecretFailsPromptlyAndRealJobSurvives) {
  ncclUniqueId real, other;
  ASSERT_EQ(bootstrapGetUniqueId(&real), ncclSuccess);
  ASSERT_EQ(bootstrapGetUniqueId(&other), ncclSuccess);
  UniqueIdInfo ri, oi;
  ASSERT_EQ(bootstrapDecodeId(real, &ri), ncclSuccess);
  ASSERT_EQ(bootstrapDecodeId(other, &oi), ncclSuccess);
  // Another job's id pointing at our root (e.g. a reused port): its secret differs.
  UniqueIdInfo forged = ri;
  forged.secret = oi.secret;
  ncclUniqueId stranger;
  bootstrapEncodeId(forged, &stranger);

  auto bad = runThreads(1, [&](int) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    int64_t t0 = nowMs();
    ncclResult_t res = Bootstrap::create(stranger, 0, 2, testOptions(), &b);
    if (nowMs() - t0 > 5000) return setError(ncclInternalError, nullptr, "not prompt");
    return res;
  });
  EXPECT_EQ(bad[0].res, ncclInvalidArgument);
  EXPECT_NE(bad[0].error.find("ncclCommInitRank: the unique id belongs to another job (secret mismatch)"),
            std::string::npos)
      << bad[0].error;

  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(real, rank, 2, testOptions(), &b));
    return testing_bs::exerciseRank(b.get(), unsigned(rank));
  });
  expectAllOk(r);
}

TEST(Bootstrap, InconsistentNranksAndDuplicateRanksAreReported) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  ncclResult_t okRes = ncclInternalError;
  std::string okErr;
  // Rank 0 (nranks 2) joins first and waits for a correct rank 1.
  std::thread good0([&] {
    std::unique_ptr<Bootstrap> b;
    okRes = Bootstrap::create(id, 0, 2, testOptions(), &b);
    if (okRes == ncclSuccess) okRes = b->barrier();
    if (okRes != ncclSuccess) okErr = lastError(nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto wrongN = runThreads(1, [&](int) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    return Bootstrap::create(id, 1, 3, testOptions(), &b);
  });
  EXPECT_EQ(wrongN[0].res, ncclInvalidArgument);
  EXPECT_NE(wrongN[0].error.find("nranks=3"), std::string::npos) << wrongN[0].error;
  auto dup = runThreads(1, [&](int) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    return Bootstrap::create(id, 0, 2, testOptions(), &b);
  });
  EXPECT_EQ(dup[0].res, ncclInvalidArgument);
  EXPECT_NE(dup[0].error.find("rank 0 joined twice"), std::string::npos) << dup[0].error;
  auto good1 = runThreads(1, [&](int) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, 1, 2, testOptions(), &b));
    return b->barrier();
  });
  good0.join();
  EXPECT_EQ(good1[0].res, ncclSuccess) << good1[0].error;
  EXPECT_EQ(okRes, ncclSuccess) << okErr;
}

TEST(Bootstrap, MissingRankTimesOutInBoundedTime) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  int64_t t0 = nowMs();
  // nranks 3, rank 2 never shows up.
  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    return Bootstrap::create(id, rank, 3, testOptions(rank == 0 ? 400 : 1500), &b);
  });
  int64_t took = nowMs() - t0;
  EXPECT_LT(took, 5000);
  // Rank 0 times out itself; rank 1 is told by the root that rank 0 left (or times out).
  EXPECT_EQ(r[0].res, ncclSystemError);
  EXPECT_NE(r[0].error.find("rank 0 of 3: not every rank joined"), std::string::npos) << r[0].error;
  EXPECT_NE(r[0].error.find("within 400 ms"), std::string::npos) << r[0].error;
  EXPECT_EQ(r[1].res, ncclSystemError);
  EXPECT_NE(r[1].error.find("missing rank(s) 2"), std::string::npos) << r[1].error;
  UniqueIdInfo info;
  ASSERT_EQ(bootstrapDecodeId(id, &info), ncclSuccess);
  EXPECT_TRUE(testing_bs::rootGone(info.rootAddr, 3000)) << "the root did not exit";
}

TEST(Bootstrap, RootGivesUpAndExitsAfterItsTimeout) {
  ncclUniqueId id;
  {
    ScopedEnv env("BRAID_BOOTSTRAP_TIMEOUT_MS", "300");
    ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  }
  UniqueIdInfo info;
  ASSERT_EQ(bootstrapDecodeId(id, &info), ncclSuccess);
  EXPECT_TRUE(testing_bs::rootGone(info.rootAddr, 3000)) << "root at " << info.rootAddr
                                                         << " still listening";
  // Nobody listens there any more: a rank fails to connect within its timeout.
  std::unique_ptr<Bootstrap> b;
  int64_t t0 = nowMs();
  EXPECT_EQ(Bootstrap::create(id, 0, 2, testOptions(300), &b), ncclSystemError);
  EXPECT_LT(nowMs() - t0, 3000);
  EXPECT_NE(std::string(lastError(nullptr)).find("timed out after 300 ms"), std::string::npos)
      << lastError(nullptr);
}

TEST(Bootstrap, RecvTimeoutNamesPeerAndTag) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, 2, testOptions(300), &b));
    if (rank == 0) {
      char c;
      int64_t t0 = nowMs();
      ncclResult_t res = b->recv(1, 7, &c, 1);
      std::string msg = lastError(nullptr);
      if (nowMs() - t0 > 2000) return setError(ncclInternalError, nullptr, "recv took too long");
      if (res != ncclSystemError ||
          msg.find("bootstrap: no message from rank 1 (tag 7) after 300 ms") == std::string::npos)
        return setError(ncclInternalError, nullptr, "unexpected: %d %s", int(res), msg.c_str());
    }
    // Keep rank 1 alive until rank 0 timed out, without a message.
    std::this_thread::sleep_for(std::chrono::milliseconds(rank == 1 ? 600 : 0));
    return ncclSuccess;
  });
  expectAllOk(r);
}

TEST(Bootstrap, AbortFlagUnblocksRecv) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  std::atomic<bool> abort{false};
  std::atomic<bool> done{false};
  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    BootstrapOptions o = testOptions(60000);
    o.abortFlag = &abort;
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, 2, o, &b));
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      abort = true;
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return ncclSuccess;
    }
    char c;
    int64_t t0 = nowMs();
    ncclResult_t res = b->recv(1, 9, &c, 1);
    int64_t took = nowMs() - t0;
    std::string msg = lastError(nullptr);
    done = true;
    if (res == ncclSuccess || took > 1500 || msg.find("aborted") == std::string::npos)
      return setError(ncclInternalError, nullptr, "abort: res %d after %lld ms: %s", int(res),
                      static_cast<long long>(took), msg.c_str());
    return ncclSuccess;
  });
  expectAllOk(r);
}

TEST(Bootstrap, PeerThatLeftFailsRecvPromptly) {
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  std::atomic<bool> gone{false};
  auto r = runThreads(2, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, 2, testOptions(20000), &b));
    char c = 'x';
    if (rank == 1) {
      BRAID_CHECK(b->send(0, 1, &c, 1));
      b.reset();
      gone = true;
      return ncclSuccess;
    }
    while (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    BRAID_CHECK(b->recv(1, 1, &c, 1));  // sent before leaving: still delivered
    int64_t t0 = nowMs();
    ncclResult_t res = b->recv(1, 2, &c, 1);
    std::string msg = lastError(nullptr);
    if (res != ncclRemoteError || nowMs() - t0 > 2000 ||
        msg.find("rank 1 closed its connection") == std::string::npos)
      return setError(ncclInternalError, nullptr, "unexpected: %d %s", int(res), msg.c_str());
    return ncclSuccess;
  });
  expectAllOk(r);
}

TEST(Bootstrap, PeerConnectionWithWrongSecretIsIgnored) {
  // Rank 1 is played by the test with raw sockets: it joins through the root, learns rank
  // 0's listen address, then first connects presenting a wrong secret (ignored) and
  // then the right one (delivered).
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  UniqueIdInfo info;
  ASSERT_EQ(bootstrapDecodeId(id, &info), ncclSuccess);
  ncclResult_t res0 = ncclInternalError;
  std::string err0;
  int got = -1;
  std::thread rank0([&] {
    std::unique_ptr<Bootstrap> b;
    res0 = Bootstrap::create(id, 0, 2, testOptions(), &b);
    if (res0 == ncclSuccess) res0 = b->recv(1, 11, &got, sizeof(got));
    if (res0 != ncclSuccess) err0 = lastError(nullptr);
  });
  SockAddr rootAddr;
  ASSERT_TRUE(SockAddr::parse(info.rootAddr, &rootAddr));
  Socket root;
  ASSERT_EQ(root.connect(rootAddr, 5000, nullptr), ncclSuccess);
  wire::RootHello hello{};
  hello.magic = wire::kHelloMagic;
  hello.version = wire::kIdVersion;
  hello.secret = info.secret;
  hello.rank = 1;
  hello.nranks = 2;
  snprintf(hello.addr, sizeof(hello.addr), "127.0.0.1:1");  // never contacted
  ASSERT_EQ(root.sendAll(&hello, sizeof(hello), 5000, nullptr), ncclSuccess);
  wire::RootReply reply{};
  ASSERT_EQ(root.recvAll(&reply, sizeof(reply), 5000, nullptr), ncclSuccess);
  ASSERT_EQ(reply.status, wire::kOk);
  std::vector<char> table(reply.msgLen);
  ASSERT_EQ(root.recvAll(table.data(), table.size(), 5000, nullptr), ncclSuccess);
  SockAddr peer0;
  ASSERT_TRUE(SockAddr::parse(table.data(), &peer0)) << table.data();

  Socket intruder;
  ASSERT_EQ(intruder.connect(peer0, 5000, nullptr), ncclSuccess);
  int bogus = 666;
  wire::MsgHeader bad{info.secret ^ 1, 1, 11, sizeof(bogus)};
  ASSERT_EQ(intruder.sendAll(&bad, sizeof(bad), 5000, nullptr), ncclSuccess);
  ASSERT_EQ(intruder.sendAll(&bogus, sizeof(bogus), 5000, nullptr), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Socket honest;
  ASSERT_EQ(honest.connect(peer0, 5000, nullptr), ncclSuccess);
  int value = 42;
  wire::MsgHeader good{info.secret, 1, 11, sizeof(value)};
  ASSERT_EQ(honest.sendAll(&good, sizeof(good), 5000, nullptr), ncclSuccess);
  ASSERT_EQ(honest.sendAll(&value, sizeof(value), 5000, nullptr), ncclSuccess);
  rank0.join();
  EXPECT_EQ(res0, ncclSuccess) << err0;
  EXPECT_EQ(got, 42);
}

TEST(Bootstrap, NoFdOrThreadLeaks) {
  // Roots of earlier tests' unused ids may still run; the count must come back to this.
  int roots = bootstrapRootsRunning();
  int fds0 = testing_bs::countFds();
  ncclUniqueId id;
  ASSERT_EQ(bootstrapGetUniqueId(&id), ncclSuccess);
  expectAllOk(runThreads(8, [&](int rank) -> ncclResult_t {
    std::unique_ptr<Bootstrap> b;
    BRAID_CHECK(Bootstrap::create(id, rank, 8, testOptions(), &b));
    return testing_bs::exerciseRank(b.get(), unsigned(rank));
  }));
  EXPECT_TRUE(testing_bs::waitRootsAtMost(roots, 3000)) << "root thread did not exit";
  if (bootstrapRootsRunning() == roots)
    EXPECT_EQ(testing_bs::countFds(), fds0);
  else  // an older unused root timed out meanwhile and closed its listener
    EXPECT_LE(testing_bs::countFds(), fds0);
}

}  // namespace
}  // namespace braid
