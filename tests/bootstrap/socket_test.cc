// Socket and SockAddr: parsing, deadlines, retries, abort, interface selection.
#include "src/net/socket.h"

#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "tests/bootstrap/harness.h"

namespace braid {
namespace {

using testing_bs::nowMs;
using testing_bs::ScopedEnv;

TEST(SockAddr, ParsesIpv4AndPrints) {
  SockAddr a;
  ASSERT_TRUE(SockAddr::parse("10.1.2.3:4567", &a));
  EXPECT_EQ(a.ss.ss_family, AF_INET);
  EXPECT_EQ(a.port(), 4567);
  EXPECT_EQ(a.toString(), "10.1.2.3:4567");
  a.setPort(80);
  EXPECT_EQ(a.toString(), "10.1.2.3:80");
}

TEST(SockAddr, ParsesIpv6InBrackets) {
  SockAddr a;
  ASSERT_TRUE(SockAddr::parse("[::1]:9000", &a));
  EXPECT_EQ(a.ss.ss_family, AF_INET6);
  EXPECT_EQ(a.port(), 9000);
  EXPECT_EQ(a.toString(), "[::1]:9000");
  ASSERT_TRUE(SockAddr::parse("[fd00::2]:1", &a));
  EXPECT_EQ(a.toString(), "[fd00::2]:1");
}

TEST(SockAddr, ResolvesHostNames) {
  SockAddr a;
  ASSERT_TRUE(SockAddr::parse("localhost:1234", &a));
  EXPECT_EQ(a.port(), 1234);
  // localhost resolves to loopback, IPv4 preferred.
  EXPECT_TRUE(a.toString() == "127.0.0.1:1234" || a.toString() == "[::1]:1234") << a.toString();
}

TEST(SockAddr, RejectsMalformed) {
  SockAddr a;
  for (const char* bad : {"", "1.2.3.4", "1.2.3.4:", ":80", "1.2.3.4:99999", "1.2.3.4:8x",
                          "::1:80", "[::1]80", "[::1", "no.such.host.invalid:80"})
    EXPECT_FALSE(SockAddr::parse(bad, &a)) << bad;
}

// A listener on 127.0.0.1 with an OS-chosen port.
Socket listenLoopback(SockAddr* bound) {
  SockAddr a;
  EXPECT_TRUE(SockAddr::parse("127.0.0.1:0", &a));
  Socket l;
  EXPECT_EQ(l.listen(a, bound), ncclSuccess);
  return l;
}

TEST(Socket, ListenConnectSendRecv) {
  SockAddr bound;
  Socket l = listenLoopback(&bound);
  ASSERT_TRUE(l.valid());
  EXPECT_GT(bound.port(), 0);
  Socket c;
  ASSERT_EQ(c.connect(bound, 2000, nullptr), ncclSuccess);
  Socket s;
  ASSERT_EQ(l.accept(&s, 2000, nullptr), ncclSuccess);
  std::vector<char> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 7);
  std::thread t([&] { EXPECT_EQ(c.sendAll(big.data(), big.size(), 5000, nullptr), ncclSuccess); });
  std::vector<char> got(big.size());
  ASSERT_EQ(s.recvAll(got.data(), got.size(), 5000, nullptr), ncclSuccess);
  t.join();
  EXPECT_EQ(got, big);
  EXPECT_EQ(c.peerAddress(), bound.toString());
}

TEST(Socket, MoveKeepsOneOwner) {
  SockAddr bound;
  Socket l = listenLoopback(&bound);
  int fd = l.fd();
  Socket m(std::move(l));
  EXPECT_FALSE(l.valid());
  EXPECT_EQ(m.fd(), fd);
  Socket n;
  n = std::move(m);
  EXPECT_EQ(n.fd(), fd);
  EXPECT_FALSE(m.valid());
}

TEST(Socket, ConnectRetriesUntilListenerAppears) {
  int port = testing_bs::freeLoopbackPort();
  SockAddr a;
  ASSERT_TRUE(SockAddr::parse("127.0.0.1:" + std::to_string(port), &a));
  Socket late;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(late.listen(a, nullptr), ncclSuccess);
  });
  Socket c;
  EXPECT_EQ(c.connect(a, 5000, nullptr), ncclSuccess);
  t.join();
}

TEST(Socket, ConnectTimesOutWithClearMessage) {
  int port = testing_bs::freeLoopbackPort();
  SockAddr a;
  ASSERT_TRUE(SockAddr::parse("127.0.0.1:" + std::to_string(port), &a));
  Socket c;
  c.setLabel("bootstrap");
  int64_t t0 = nowMs();
  EXPECT_EQ(c.connect(a, 300, nullptr), ncclSystemError);
  int64_t took = nowMs() - t0;
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 2000);
  std::string msg = lastError(nullptr);
  EXPECT_NE(msg.find("bootstrap: connect to " + a.toString() + " timed out after 300 ms"),
            std::string::npos)
      << msg;
}

TEST(Socket, RecvTimesOut) {
  SockAddr bound;
  Socket l = listenLoopback(&bound);
  Socket c, s;
  ASSERT_EQ(c.connect(bound, 2000, nullptr), ncclSuccess);
  ASSERT_EQ(l.accept(&s, 2000, nullptr), ncclSuccess);
  char buf[8];
  int64_t t0 = nowMs();
  EXPECT_EQ(s.recvAll(buf, sizeof(buf), 200, nullptr), ncclSystemError);
  EXPECT_LT(nowMs() - t0, 2000);
  EXPECT_NE(std::string(lastError(nullptr)).find("timed out after 200 ms"), std::string::npos)
      << lastError(nullptr);
}

TEST(Socket, AcceptTimesOut) {
  SockAddr bound;
  Socket l = listenLoopback(&bound);
  Socket s;
  int64_t t0 = nowMs();
  EXPECT_EQ(l.accept(&s, 150, nullptr), ncclSystemError);
  EXPECT_GE(nowMs() - t0, 100);
  EXPECT_LT(nowMs() - t0, 2000);
}

TEST(Socket, AbortUnblocksRecvAndAccept) {
  SockAddr bound;
  Socket l = listenLoopback(&bound);
  Socket c, s;
  ASSERT_EQ(c.connect(bound, 2000, nullptr), ncclSuccess);
  ASSERT_EQ(l.accept(&s, 2000, nullptr), ncclSuccess);
  std::atomic<bool> abort{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    abort = true;
  });
  char buf[8];
  int64_t t0 = nowMs();
  EXPECT_EQ(s.recvAll(buf, sizeof(buf), -1, &abort), ncclSystemError);
  EXPECT_LT(nowMs() - t0, 1500);
  EXPECT_NE(std::string(lastError(nullptr)).find("aborted"), std::string::npos);
  Socket s2;
  t0 = nowMs();
  EXPECT_EQ(l.accept(&s2, -1, &abort), ncclSystemError);  // already set: returns at once
  EXPECT_LT(nowMs() - t0, 500);
  t.join();
}

TEST(Socket, PeerCloseIsRemoteError) {
  SockAddr bound;
  Socket l = listenLoopback(&bound);
  Socket c, s;
  ASSERT_EQ(c.connect(bound, 2000, nullptr), ncclSuccess);
  ASSERT_EQ(l.accept(&s, 2000, nullptr), ncclSuccess);
  ASSERT_EQ(c.sendAll("ab", 2, 1000, nullptr), ncclSuccess);
  c.close();
  char buf[4];
  EXPECT_EQ(s.recvAll(buf, sizeof(buf), 2000, nullptr), ncclRemoteError);
  EXPECT_NE(std::string(lastError(nullptr)).find("2 of 4 bytes"), std::string::npos)
      << lastError(nullptr);
}

TEST(Socket, TryIoIsNonBlocking) {
  SockAddr bound;
  Socket l = listenLoopback(&bound);
  Socket c, s;
  ASSERT_EQ(c.connect(bound, 2000, nullptr), ncclSuccess);
  ASSERT_EQ(l.accept(&s, 2000, nullptr), ncclSuccess);
  char buf[4];
  EXPECT_EQ(s.tryRecv(buf, sizeof(buf)), 0);  // nothing there: would block
  EXPECT_EQ(c.trySend("xyz", 3), 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(s.tryRecv(buf, sizeof(buf)), 3);
  c.close();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(s.tryRecv(buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ECONNRESET);
}

bool haveIpv6Loopback() {
  SockAddr a;
  SockAddr::parse("[::1]:0", &a);
  Socket l;
  return l.listen(a, nullptr) == ncclSuccess;
}

TEST(Socket, Ipv6Loopback) {
  if (!haveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  SockAddr a, bound;
  ASSERT_TRUE(SockAddr::parse("[::1]:0", &a));
  Socket l;
  ASSERT_EQ(l.listen(a, &bound), ncclSuccess);
  EXPECT_EQ(bound.toString().rfind("[::1]:", 0), 0u) << bound.toString();
  Socket c, s;
  ASSERT_EQ(c.connect(bound, 2000, nullptr), ncclSuccess);
  ASSERT_EQ(l.accept(&s, 2000, nullptr), ncclSuccess);
  int v = 42, w = 0;
  ASSERT_EQ(c.sendAll(&v, sizeof(v), 1000, nullptr), ncclSuccess);
  ASSERT_EQ(s.recvAll(&w, sizeof(w), 1000, nullptr), ncclSuccess);
  EXPECT_EQ(w, 42);
}

bool hasUpNonLoopbackIpv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
        !(i->ifa_flags & IFF_LOOPBACK) && strncmp(i->ifa_name, "docker", 6) != 0)
      found = true;
  freeifaddrs(list);
  return found;
}

TEST(PickLocalAddress, DefaultAvoidsLoopbackWhenPossible) {
  ScopedEnv env("NCCL_SOCKET_IFNAME", nullptr);
  SockAddr a;
  std::string ifname;
  ASSERT_EQ(pickLocalAddress(&a, &ifname), ncclSuccess);
  EXPECT_EQ(a.port(), 0);
  EXPECT_FALSE(ifname.empty());
  if (hasUpNonLoopbackIpv4()) {
    EXPECT_EQ(a.ss.ss_family, AF_INET);
    EXPECT_NE(ifname, "lo");
    EXPECT_NE(ifname.rfind("docker", 0), 0u);
  } else {
    EXPECT_EQ(a.toString(), "127.0.0.1:0");
  }
  Socket l;  // and the address is usable
  EXPECT_EQ(l.listen(a, nullptr), ncclSuccess);
}

TEST(PickLocalAddress, PrefixExactAndExclude) {
  SockAddr a;
  std::string ifname;
  {
    ScopedEnv env("NCCL_SOCKET_IFNAME", "lo");
    ASSERT_EQ(pickLocalAddress(&a, &ifname), ncclSuccess);
    EXPECT_EQ(ifname, "lo");
    EXPECT_EQ(a.toString(), "127.0.0.1:0");
  }
  {
    ScopedEnv env("NCCL_SOCKET_IFNAME", "=lo");
    ASSERT_EQ(pickLocalAddress(&a, &ifname), ncclSuccess);
    EXPECT_EQ(ifname, "lo");
  }
  {
    ScopedEnv env("NCCL_SOCKET_IFNAME", "=l");  // exact: "l" is not "lo"
    EXPECT_NE(pickLocalAddress(&a, &ifname), ncclSuccess);
  }
  {
    ScopedEnv env("NCCL_SOCKET_IFNAME", "nosuchif0,alsonot");
    EXPECT_EQ(pickLocalAddress(&a, &ifname), ncclSystemError);
    std::string msg = lastError(nullptr);
    EXPECT_NE(msg.find("NCCL_SOCKET_IFNAME='nosuchif0,alsonot'"), std::string::npos) << msg;
  }
  if (hasUpNonLoopbackIpv4()) {
    ScopedEnv env("NCCL_SOCKET_IFNAME", "^lo,docker");
    ASSERT_EQ(pickLocalAddress(&a, &ifname), ncclSuccess);
    EXPECT_NE(ifname, "lo");
    EXPECT_NE(ifname.rfind("docker", 0), 0u);
  }
}

}  // namespace
}  // namespace braid
