// braid-switch faults: admission (a wrong job secret, a switch with --secret-file),
// bad input from raw sockets (garbage, short or absurd hellos, invalid operations),
// a member process killed while its group has an operation in flight (the survivors
// get an error naming it, another job on the same switch goes on), a member closing
// during an operation, and groups freed after clean closes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "src/net/socket.h"
#include "src/tools/switch_server/switch_server.h"
#include "transports/collnet_switch/wire.h"
#include "tests/switch/harness.h"

namespace {

using namespace switchtest;

braid::SwitchOptions options(int timeoutMs) {
  braid::SwitchOptions o;
  o.timeoutMs = timeoutMs;
  return o;
}

/// One all-reduce of `count` int32 (sum) on every member, checked; returns success.
void checkedAllReduce(std::vector<Member>& m, size_t count, uint64_t seed) {
  const int n = int(m.size());
  runThreads(n, [&](int r) {
    std::vector<int32_t> send(count), recv(count, -1), want(count);
    fillInput(ncclInt32, seed, r, send.data(), count);
    reference(ncclInt32, ncclSum, seed, flatOrder(n), 0, count, want.data());
    void* req = nullptr;
    ASSERT_EQ(net()->iallreduce(m[size_t(r)].coll, send.data(), recv.data(), count, ncclInt32,
                                ncclSum, nullptr, nullptr, &req),
              ncclSuccess);
    int size = -1;
    ASSERT_EQ(waitRequest(req, &size), ncclSuccess) << allWarnings();
    EXPECT_EQ(size_t(size), count * 4);
    EXPECT_TRUE(recv == want) << "rank " << r << " seed " << seed;
  });
}

// ---- admission ----------------------------------------------------------------------------

TEST(SwitchFaults, WrongSecretIsRefused) {
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", options(1500));
  ASSERT_FALSE(addr.empty());
  Watchdog wd(60, "wrong secret");
  auto m = prepare({addr, addr}, 4000, 0xAAAA);
  braid::switchCollNetSetJobSecret(m[1].ctx, 0xBBBB);
  ncclResult_t r0 = ncclSuccess;
  std::thread t0([&] { r0 = connectMember(m, 0); });
  ASSERT_TRUE(pollUntil([&] { return server.groupCount() == 1; }, 10000));
  const ncclResult_t r1 = connectMember(m, 1);
  EXPECT_NE(r1, ncclSuccess);
  EXPECT_NE(findWarn({"rank 1", "refused", "job secret differs"}), "") << allWarnings();
  t0.join();  // rank 0 waits for a rank 1 that never comes: the switch gives up
  EXPECT_NE(r0, ncclSuccess);
  EXPECT_NE(findWarn({"rank 0", "timed out", "waiting for ranks 1"}), "") << allWarnings();
  EXPECT_TRUE(pollUntil([&] { return server.groupCount() == 0; }, 5000));
  closeAll(m);
}

TEST(SwitchFaults, SecretFileSwitchAdmitsOnlyItsSecret) {
  braid::SwitchOptions o = options(5000);
  o.requireSecret = true;
  o.secret = 42;
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", o);
  ASSERT_FALSE(addr.empty());
  Watchdog wd(60, "secret file");
  auto good = prepare({addr, addr}, 4100, 42);
  connectAll(good);
  checkedAllReduce(good, 1000, 1);
  closeAll(good);
  auto bad = prepare({addr}, 4101, 43);
  EXPECT_EQ(connectMember(bad, 0), ncclRemoteError);
  EXPECT_NE(findWarn({"refused", "not admitted"}), "") << allWarnings();
  closeAll(bad);
  EXPECT_TRUE(pollUntil([&] { return server.groupCount() == 0; }, 5000));
}

// ---- bad input ----------------------------------------------------------------------------

/// Connects a raw socket to the switch, sends `bytes`, and returns the kind of the first
/// frame the switch answers (0 if it only closed), with its payload in *text.
uint32_t rawExchange(const std::string& addr, const std::string& bytes, std::string* text) {
  braid::SockAddr sa;
  EXPECT_TRUE(braid::SockAddr::parse(addr, &sa));
  braid::Socket s;
  EXPECT_EQ(s.connect(sa, 5000, nullptr), ncclSuccess);
  ::send(s.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  braid::wire::FrameHeader h{};
  if (s.recvAll(&h, sizeof h, 5000, nullptr) != ncclSuccess) return 0;
  text->assign(h.len < 4096 ? h.len : 0, '\0');
  if (!text->empty()) {
    EXPECT_EQ(s.recvAll(&(*text)[0], text->size(), 5000, nullptr), ncclSuccess);
  }
  return h.kind;
}

braid::Hello validHello(uint32_t nranks, uint32_t rank, uint64_t group) {
  braid::Hello h;
  h.msg.magic = braid::wire::kMagic;
  h.msg.version = braid::wire::kVersion;
  h.msg.groupId = group;
  h.msg.nranks = nranks;
  h.msg.rank = rank;
  h.msg.nleaves = 1;
  h.leafOf.assign(nranks, 0);
  return h;
}

TEST(SwitchFaults, BadInputIsRefusedAndTheSwitchGoesOn) {
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", options(3000));
  ASSERT_FALSE(addr.empty());
  Watchdog wd(60, "bad input");
  std::string text;
  // A frame far too large to be a hello.
  braid::wire::FrameHeader huge{braid::wire::kHello, 0xFFFFFFFFu, 0};
  EXPECT_EQ(rawExchange(addr, std::string(reinterpret_cast<char*>(&huge), sizeof huge), &text),
            braid::wire::kRefuse);
  EXPECT_NE(text.find("not a braid-switch hello"), std::string::npos) << text;
  // Short hello.
  braid::wire::FrameHeader shortHello{braid::wire::kHello, 10, 0};
  EXPECT_EQ(rawExchange(addr, std::string(reinterpret_cast<char*>(&shortHello), sizeof shortHello) +
                                  std::string(10, 'x'), &text),
            braid::wire::kRefuse);
  // Wrong magic.
  braid::Hello h = validHello(2, 0, 77);
  h.msg.magic ^= 1;
  EXPECT_EQ(rawExchange(addr, h.encode(), &text), braid::wire::kRefuse);
  EXPECT_NE(text.find("wrong magic"), std::string::npos) << text;
  // Absurd sizes and layouts.
  h = validHello(2, 0, 77);
  h.msg.nranks = 1u << 30;
  EXPECT_EQ(rawExchange(addr, h.encode(), &text), braid::wire::kRefuse);
  h = validHello(3, 5, 77);
  EXPECT_EQ(rawExchange(addr, h.encode(), &text), braid::wire::kRefuse);
  h = validHello(3, 0, 77);
  h.leafOf = {1, 0, 0};
  EXPECT_EQ(rawExchange(addr, h.encode(), &text), braid::wire::kRefuse);
  EXPECT_NE(text.find("layout"), std::string::npos) << text;
  h = validHello(2, 0, 77);
  h.msg.nleaves = 2;
  h.leafOf = {0, 1};  // two switches, but this one has no parent
  EXPECT_EQ(rawExchange(addr, h.encode(), &text), braid::wire::kRefuse);
  EXPECT_NE(text.find("no --parent"), std::string::npos) << text;
  // Garbage.
  std::string garbage(1000, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = char(mix(i) >> 7);
  EXPECT_NE(rawExchange(addr, garbage, &text), braid::wire::kWelcome);
  // A one-member group that posts invalid operations: its group fails, with a reason.
  for (int variant = 0; variant < 3; ++variant) {
    braid::Hello one = validHello(1, 0, 900 + uint64_t(variant));
    braid::wire::OpDesc d{};
    if (variant == 0) d.coll = 99;
    if (variant == 1) {
      d.coll = braid::wire::kAllReduce;
      d.dtype = ncclFloat32;
      d.redop = ncclSum;
      d.count = uint64_t(1) << 40;
    }
    if (variant == 2) {
      d.coll = braid::wire::kAllGather;
      d.bytesPerRank = 100;
      d.windowOffset = 50;
      d.windowBytes = 100;  // past the end of 1 x 100 bytes
    }
    braid::SockAddr sa;
    ASSERT_TRUE(braid::SockAddr::parse(addr, &sa));
    braid::Socket s;
    ASSERT_EQ(s.connect(sa, 5000, nullptr), ncclSuccess);
    std::string bytes = one.encode() + braid::encodeFrame(braid::wire::kOp, 0, &d, sizeof d);
    ASSERT_EQ(s.sendAll(bytes.data(), bytes.size(), 5000, nullptr), ncclSuccess);
    braid::wire::FrameHeader f{};
    ASSERT_EQ(s.recvAll(&f, sizeof f, 5000, nullptr), ncclSuccess);
    EXPECT_EQ(f.kind, braid::wire::kWelcome);
    ASSERT_EQ(s.recvAll(&f, sizeof f, 5000, nullptr), ncclSuccess);
    EXPECT_EQ(f.kind, braid::wire::kFail) << "variant " << variant;
    std::string why(f.len, '\0');
    ASSERT_EQ(s.recvAll(&why[0], why.size(), 5000, nullptr), ncclSuccess);
    EXPECT_NE(why.find("invalid operation"), std::string::npos) << why;
  }
  // A connection that says nothing and one that closes half-way through a hello.
  {
    braid::SockAddr sa;
    ASSERT_TRUE(braid::SockAddr::parse(addr, &sa));
    braid::Socket quiet, half;
    ASSERT_EQ(quiet.connect(sa, 5000, nullptr), ncclSuccess);
    ASSERT_EQ(half.connect(sa, 5000, nullptr), ncclSuccess);
    std::string bytes = validHello(2, 0, 78).encode();
    ASSERT_EQ(half.sendAll(bytes.data(), 20, 5000, nullptr), ncclSuccess);
    half.close();
    // Meanwhile a real group works.
    auto m = prepare({addr, addr}, 4200, 5);
    connectAll(m);
    checkedAllReduce(m, 100000, 2);
    closeAll(m);
  }
  EXPECT_TRUE(pollUntil([&] { return server.groupCount() == 0; }, 5000));
  // The silent connection is dropped after the hello timeout (3 s), the rest at once.
  EXPECT_TRUE(pollUntil([&] { return server.connectionCount() == 0; }, 10000))
      << server.connectionCount() << " connections left";
}

// ---- members going away -------------------------------------------------------------------

TEST(SwitchFaults, KilledMemberFailsItsGroupWhileAnotherJobGoesOn) {
  // The member to kill is a child process, forked before any thread of this test.
  int toChild[2], fromChild[2];
  ASSERT_EQ(pipe(toChild), 0);
  ASSERT_EQ(pipe(fromChild), 0);
  struct Setup {
    char addr[64];
    char handles[3][NCCL_NET_HANDLE_MAXSIZE];
  };
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Setup s;
    size_t got = 0;
    while (got < sizeof s) {
      ssize_t k = read(toChild[0], reinterpret_cast<char*>(&s) + got, sizeof s - got);
      if (k <= 0) _exit(10);
      got += size_t(k);
    }
    setenv("BRAID_SWITCH", s.addr, 1);
    void *ctx = nullptr, *listen = nullptr, *coll = nullptr;
    char own[NCCL_NET_HANDLE_MAXSIZE];
    if (net()->init(&ctx, 5000, nullptr) != ncclSuccess) _exit(11);
    braid::switchCollNetSetJobSecret(ctx, 0xC0FFEE);
    if (net()->listen(ctx, 0, own, &listen) != ncclSuccess) _exit(12);
    void* handles[3] = {s.handles[0], s.handles[1], s.handles[2]};
    if (net()->connect(handles, 3, 2, listen, &coll) != ncclSuccess) _exit(13);
    char ok = 1;
    if (write(fromChild[1], &ok, 1) != 1) _exit(14);
    for (;;) pause();  // posts nothing: the group's operation waits for this member
  }
  close(toChild[0]);
  close(fromChild[1]);

  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", options(20000));
  ASSERT_FALSE(addr.empty());
  Watchdog wd(90, "killed member");
  auto a = prepare({addr, addr, addr}, 5000, 0xC0FFEE);  // job A: ranks 0, 1 here, 2 the child
  auto b = prepare({addr, addr}, 6000, 0xBEEF);           // job B
  Setup s{};
  std::snprintf(s.addr, sizeof s.addr, "%s", addr.c_str());
  for (int r = 0; r < 3; ++r) std::memcpy(s.handles[r], a[size_t(r)].handle, NCCL_NET_HANDLE_MAXSIZE);
  ASSERT_EQ(write(toChild[1], &s, sizeof s), ssize_t(sizeof s));

  connectAll(b);
  checkedAllReduce(b, 1000, 10);
  std::vector<ncclResult_t> conn(2, ncclInternalError);
  runThreads(2, [&](int r) { conn[size_t(r)] = connectMember(a, r); });
  ASSERT_EQ(conn[0], ncclSuccess) << allWarnings();
  ASSERT_EQ(conn[1], ncclSuccess);
  char ok = 0;
  ASSERT_EQ(read(fromChild[0], &ok, 1), 1);
  EXPECT_EQ(server.groupCount(), 2);

  // Job A's survivors start an all-reduce that needs rank 2; job B keeps working while
  // rank 2 is killed.
  std::atomic<int> posted{0};
  std::atomic<bool> aFailed{false};
  std::vector<ncclResult_t> aResult(2, ncclSuccess);
  std::thread jobA([&] {
    runThreads(2, [&](int r) {
      std::vector<float> send(1000, 1.0f), recv(1000);
      void* req = nullptr;
      ASSERT_EQ(net()->iallreduce(a[size_t(r)].coll, send.data(), recv.data(), 1000, ncclFloat32,
                                  ncclSum, nullptr, nullptr, &req),
                ncclSuccess);
      ++posted;
      int size = -1;
      aResult[size_t(r)] = waitRequest(req, &size, 10000);
    });
    aFailed = true;
  });
  ASSERT_TRUE(pollUntil([&] { return posted == 2; }, 10000));
  checkedAllReduce(b, 1000, 11);
  const auto killedAt = std::chrono::steady_clock::now();
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  uint64_t seed = 12;
  while (!aFailed) checkedAllReduce(b, 5000, seed++);
  jobA.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count();
  EXPECT_LT(secs, 5.0) << "the survivors learnt of the death only after " << secs << " s";
  for (int r = 0; r < 2; ++r) EXPECT_EQ(aResult[size_t(r)], ncclRemoteError) << "rank " << r;
  EXPECT_NE(findWarn({"rank 2 went away"}), "") << allWarnings();
  // Later operations on job A fail at once; job B still works.
  std::vector<float> x(10, 1.0f);
  void* req = nullptr;
  EXPECT_NE(net()->iallreduce(a[0].coll, x.data(), x.data(), 10, ncclFloat32, ncclSum, nullptr,
                              nullptr, &req),
            ncclSuccess);
  for (int i = 0; i < 5; ++i) checkedAllReduce(b, 300000, 100 + uint64_t(i));
  closeAll(a);
  closeAll(b);
  EXPECT_TRUE(pollUntil([&] { return server.groupCount() == 0; }, 5000))
      << server.groupCount() << " groups left";
  close(toChild[1]);
  close(fromChild[0]);
}

TEST(SwitchFaults, CloseDuringAnOperationFailsTheOthers) {
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", options(10000));
  ASSERT_FALSE(addr.empty());
  Watchdog wd(60, "close during an operation");
  auto m = prepare({addr, addr, addr}, 7000, 3);
  connectAll(m);
  checkedAllReduce(m, 10, 1);
  // Ranks 0 and 1 post; rank 2 closes instead.
  std::vector<std::vector<double>> bufs(2, std::vector<double>(100000, 2.0));
  std::vector<void*> reqs(2);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(net()->iallreduce(m[size_t(r)].coll, bufs[size_t(r)].data(), bufs[size_t(r)].data(),
                                100000, ncclFloat64, ncclMax, nullptr, nullptr, &reqs[size_t(r)]),
              ncclSuccess);
  // Let rank 0's operation reach the switch before rank 2 leaves.
  int done = 0, size = 0;
  EXPECT_EQ(net()->test(reqs[0], &done, &size), ncclSuccess);
  EXPECT_EQ(net()->closeColl(m[2].coll), ncclSuccess);
  m[2].coll = nullptr;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(waitRequest(reqs[size_t(r)], &size, 10000), ncclRemoteError) << "rank " << r;
  }
  EXPECT_NE(findWarn({"rank 2"}), "") << allWarnings();
  closeAll(m);
  EXPECT_TRUE(pollUntil([&] { return server.groupCount() == 0; }, 5000));
}

}  // namespace
