// NetRegistry: which network carries inter-host traffic (NCCL_NET, NCCL_NET_PLUGIN,
// NCCL_IB_DISABLE), external plugins of our own loaded by path (v11 as is, v8 through
// the adapter), fallbacks with a reason, and the Socket net through its table.
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/config/error.h"
#include "transports/net/net_registry.h"

namespace braid {
namespace {

std::string plugin(const char* variant) {
  return std::string(BRAID_TEST_PLUGIN_DIR) + "/libnccl-net-" + variant + ".so";
}

/// Sets environment variables for one test and restores them after.
class EnvGuard {
 public:
  void set(const char* name, const std::string& value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old ? old : "", old != nullptr});
    setenv(name, value.c_str(), 1);
  }
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->had) setenv(it->name.c_str(), it->value.c_str(), 1);
      else unsetenv(it->name.c_str());
    }
  }

 private:
  struct Saved {
    std::string name, value;
    bool had;
  };
  std::vector<Saved> saved_;
};

/// Moves `sizes` messages from a sender to a receiver comm of `net`, in one thread
/// (every call is non-blocking), and checks every byte.
void roundTrip(const Net& net, const std::vector<size_t>& sizes) {
  const ncclNet_v11_t* t = net.table;
  unsigned char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(t->listen(net.ctx, 0, handle, &listenComm), ncclSuccess);
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  ncclNetDeviceHandle_v11_t* dh = nullptr;
  for (int i = 0; i < 200000 && (!sendComm || !recvComm); ++i) {
    if (!sendComm) {
      ASSERT_EQ(t->connect(net.ctx, 0, handle, &sendComm, &dh), ncclSuccess);
    }
    if (!recvComm) {
      ASSERT_EQ(t->accept(listenComm, &recvComm, &dh), ncclSuccess);
    }
  }
  ASSERT_TRUE(sendComm && recvComm) << "connect/accept never completed";
  for (size_t n : sizes) {
    std::vector<unsigned char> out(n), in(n + 100, 0xee);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(i * 7 + n);
    void *smh = nullptr, *rmh = nullptr;
    ASSERT_EQ(t->regMr(sendComm, out.data(), out.size() + 1, NCCL_PTR_HOST, &smh), ncclSuccess);
    ASSERT_EQ(t->regMr(recvComm, in.data(), in.size(), NCCL_PTR_HOST, &rmh), ncclSuccess);
    void* buf = in.data();
    size_t cap = in.size();
    int tag = 0;
    void *sreq = nullptr, *rreq = nullptr;
    for (int i = 0; i < 100000 && !rreq; ++i)
      ASSERT_EQ(t->irecv(recvComm, 1, &buf, &cap, &tag, &rmh, nullptr, &rreq), ncclSuccess);
    for (int i = 0; i < 100000 && !sreq; ++i)
      ASSERT_EQ(t->isend(sendComm, out.data(), n, 0, smh, nullptr, &sreq), ncclSuccess);
    ASSERT_TRUE(sreq && rreq);
    int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
    for (int i = 0; i < 10000000 && !(sdone && rdone); ++i) {
      if (!sdone) {
      ASSERT_EQ(t->test(sreq, &sdone, &ssize), ncclSuccess);
    }
      if (!rdone) {
      ASSERT_EQ(t->test(rreq, &rdone, &rsize), ncclSuccess);
    }
    }
    ASSERT_TRUE(sdone && rdone) << n << " bytes never arrived";
    EXPECT_EQ(rsize, int(n));
    if (n) {
      EXPECT_EQ(std::memcmp(in.data(), out.data(), n), 0) << n << " bytes";
    }
    EXPECT_EQ(in[n], 0xee) << "wrote past the message";
    t->deregMr(sendComm, smh);
    t->deregMr(recvComm, rmh);
  }
  EXPECT_EQ(t->closeSend(sendComm), ncclSuccess);
  EXPECT_EQ(t->closeRecv(recvComm), ncclSuccess);
  EXPECT_EQ(t->closeListen(listenComm), ncclSuccess);
}

TEST(NetRegistry, SocketIsTheNetOfLastResort) {
  EnvGuard env;
  env.set("NCCL_NET_PLUGIN", "none");
  env.set("NCCL_IB_DISABLE", "1");
  const Net* net = nullptr;
  ASSERT_EQ(NetRegistry::get().select("", &net), ncclSuccess);
  EXPECT_EQ(net->name, "Socket");
  EXPECT_FALSE(net->external);
  ASSERT_EQ(net->devices.size(), 1u);
  EXPECT_TRUE(net->devices[0].ptrSupport & NCCL_PTR_HOST);
  EXPECT_NE(net->ext.pollFd, nullptr) << "the Socket net offers its descriptors to the proxy";
  roundTrip(*net, {0, 1, 4096, 1 << 20, (8 << 20) + 3});
}

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

// A connect given up half-way (the listener never takes it) releases its socket through
// the Socket net's abandonConnect extension; NetConn calls it when it gives up.
TEST(NetRegistry, AbandonedSocketConnectReleasesItsSocket) {
  EnvGuard env;
  env.set("NCCL_NET_PLUGIN", "none");
  env.set("NCCL_SOCKET_IFNAME", "lo");
  const Net* net = nullptr;
  ASSERT_EQ(NetRegistry::get().select("Socket", &net), ncclSuccess);
  ASSERT_NE(net->ext.abandonConnect, nullptr);
  // A real handle, pointed at a listener whose backlog is full: the SYN goes
  // unanswered, so connect() stays in progress.
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(net->table->listen(net->ctx, 0, handle, &listenComm), ncclSuccess);
  int clog = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(clog, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(clog, 0), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(clog, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::vector<int> fillers;  // fill the accept queue (backlog 0 admits one)
  for (int i = 0; i < 2; ++i) {
    int f = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(f, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fillers.push_back(f);
  }
  usleep(100 * 1000);
  // The handle's address field (after magic and token) now names the clogged listener.
  const std::string addr = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::memset(handle + 16, 0, 80);
  std::memcpy(handle + 16, addr.c_str(), addr.size());
  const int before = openFds();
  void* comm = nullptr;
  ASSERT_EQ(net->table->connect(net->ctx, 0, handle, &comm, nullptr), ncclSuccess);
  if (comm) {
    net->table->closeSend(comm);
    GTEST_SKIP() << "the kernel completed the connect at once; nothing to abandon";
  }
  EXPECT_EQ(openFds(), before + 1) << "connect in progress holds one socket";
  net->ext.abandonConnect(handle);
  EXPECT_EQ(openFds(), before) << "abandonConnect closed it";
  net->ext.abandonConnect(handle);  // twice is harmless
  EXPECT_EQ(openFds(), before);
  for (int f : fillers) ::close(f);
  ::close(clog);
  net->table->closeListen(listenComm);
}

// What the net proxy's helpers rely on: errors of other comms' connections, recorded
// while an executor progresses them, do not replace that thread's last error.
TEST(NetRegistry, KeepThreadErrorRestoresTheLastError) {
  setError(ncclInvalidArgument, nullptr, "the caller's own error");
  {
    const KeepThreadError keep;
    noteError(ncclRemoteError, "another comm's net failed");
    EXPECT_STREQ(lastError(nullptr), "another comm's net failed");  // seen inside
    {
      const KeepThreadError nested;
      noteError(ncclSystemError, "and a second one");
    }
    EXPECT_STREQ(lastError(nullptr), "and a second one");  // nested scopes restore once
  }
  EXPECT_STREQ(lastError(nullptr), "the caller's own error");
  {
    const KeepThreadError keep;  // nothing failed: nothing to restore
  }
  EXPECT_STREQ(lastError(nullptr), "the caller's own error");
  noteError(ncclRemoteError, "outside any scope");
  EXPECT_STREQ(lastError(nullptr), "outside any scope");
}

TEST(NetRegistry, NamesAreCaseInsensitiveAndUnknownNamesFail) {
  EnvGuard env;
  env.set("NCCL_NET_PLUGIN", "none");
  const Net* net = nullptr;
  ASSERT_EQ(NetRegistry::get().select("sOcKeT", &net), ncclSuccess);
  EXPECT_EQ(net->name, "Socket");
  EXPECT_EQ(NetRegistry::get().select("Infiniband9", &net), ncclInvalidUsage);
  std::string msg = lastError(nullptr);
  EXPECT_NE(msg.find("'Infiniband9' cannot be used (no network has that name)"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("available: "), std::string::npos) << msg;
}

TEST(NetRegistry, IbDisabledIsNamedInTheError) {
  EnvGuard env;
  env.set("NCCL_NET_PLUGIN", "none");
  env.set("NCCL_IB_DISABLE", "1");
  const Net* net = nullptr;
  EXPECT_EQ(NetRegistry::get().select("IB", &net), ncclInvalidUsage);
  EXPECT_NE(std::string(lastError(nullptr)).find("disabled by NCCL_IB_DISABLE"),
            std::string::npos) << lastError(nullptr);
}

TEST(NetRegistry, AV11PluginByPathIsPreferredAndWorks) {
  EnvGuard env;
  env.set("NCCL_NET_PLUGIN", plugin("x"));
  const Net* net = nullptr;
  ASSERT_EQ(NetRegistry::get().select("", &net), ncclSuccess);
  EXPECT_EQ(net->name, "X");
  EXPECT_TRUE(net->external);
  EXPECT_EQ(net->abiVersion, 11);
  EXPECT_NE(net->library.find("libnccl-net-x.so"), std::string::npos) << net->library;
  roundTrip(*net, {0, 1, 65536, 3 << 20});
  // NCCL_NET picks another net although the plugin loads.
  const Net* sock = nullptr;
  ASSERT_EQ(NetRegistry::get().select("Socket", &sock), ncclSuccess);
  EXPECT_EQ(sock->name, "Socket");
}

/// The counters XColl (tests/net/plugins/xcoll.c) keeps of the calls made to it.
long xcollCount(int which) {
  void* lib = dlopen(plugin("x").c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return -1;
  auto* counts = static_cast<long*>(dlsym(lib, "xcollCounts"));
  const long v = counts ? __atomic_load_n(&counts[which], __ATOMIC_SEQ_CST) : -1;
  dlclose(lib);
  return v;
}
enum { kXcConnect = 2, kXcAllReduce = 4, kXcAllGather = 5, kXcReduceScatter = 6, kXcClose = 8 };

/// Two thread ranks run all-reduce, all-gather and reduce-scatter with `algo`; checked.
void runTwoRanks(const char* what) {
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << what << ": " << ncclGetLastError(nullptr);
  const size_t count = 100003;
  std::vector<float> in[2], out[2], gathered[2], part[2];
  for (int r = 0; r < 2; ++r) {
    in[r].assign(count * 2, float(r + 1));
    out[r].assign(count, 0);
    gathered[r].assign(count * 2, 0);
    part[r].assign(count, 0);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(in[r].data(), out[r].data(), count, ncclFloat32, ncclSum, comms[r],
                            nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllGather(in[r].data(), gathered[r].data(), count, ncclFloat32, comms[r],
                            nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclReduceScatter(in[r].data(), part[r].data(), count, ncclFloat32, ncclMax,
                                comms[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r][0], 3.0f) << what;
    EXPECT_EQ(out[r][count - 1], 3.0f) << what;
    EXPECT_EQ(gathered[r][0], 1.0f) << what;
    EXPECT_EQ(gathered[r][2 * count - 1], 2.0f) << what;
    EXPECT_EQ(part[r][count - 1], 2.0f) << what;
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

TEST(NetRegistry, APluginsCollNetTableIsLoadedAndDriven) {
  EnvGuard env;
  env.set("NCCL_NET_PLUGIN", plugin("x"));
  const Net* net = nullptr;
  ASSERT_EQ(NetRegistry::get().select("", &net), ncclSuccess);
  ASSERT_NE(net->collTable, nullptr) << "ncclCollNetPlugin_v11 not found in " << net->library;
  EXPECT_STREQ(net->collTable->name, "XColl");
  // One node of two thread ranks: XColl's groups have one member (it takes no more).
  env.set("NCCL_COLLNET_ENABLE", "1");
  env.set("NCCL_COLLNET_NODE_THRESHOLD", "1");
  env.set("NCCL_ALGO", "allreduce:collnet_chain;allgather:collnet;reducescatter:collnet");
  const long connects = xcollCount(kXcConnect), ars = xcollCount(kXcAllReduce);
  const long ags = xcollCount(kXcAllGather), rss = xcollCount(kXcReduceScatter);
  const long closes = xcollCount(kXcClose);
  runTwoRanks("XColl");
  EXPECT_GE(xcollCount(kXcConnect) - connects, 2) << "every rank connects a collComm";
  EXPECT_GT(xcollCount(kXcAllReduce), ars);
  EXPECT_GT(xcollCount(kXcAllGather), ags);
  EXPECT_GT(xcollCount(kXcReduceScatter), rss);
  EXPECT_EQ(xcollCount(kXcClose) - closes, xcollCount(kXcConnect) - connects)
      << "every collComm is closed at destroy";
  // No device: setup falls back (a warning), and the collectives still run.
  env.set("XCOLL_DEVICES", "0");
  const long before = xcollCount(kXcConnect);
  runTwoRanks("XColl without a device");
  EXPECT_EQ(xcollCount(kXcConnect), before);
}

TEST(NetRegistry, AV8PluginIsAdaptedToV11) {
  EnvGuard env;
  env.set("NCCL_NET_PLUGIN", plugin("x8"));
  const Net* net = nullptr;
  ASSERT_EQ(NetRegistry::get().select("", &net), ncclSuccess);
  EXPECT_EQ(net->name, "X8");
  EXPECT_EQ(net->abiVersion, 8);
  ASSERT_EQ(net->devices.size(), 1u);
  EXPECT_EQ(net->devices[0].vProps.ndevs, 1) << "v8 has no virtual devices: one per device";
  EXPECT_GT(net->devices[0].maxP2pBytes, 0u);
  roundTrip(*net, {0, 7, 65536, 2 << 20});
}

TEST(NetRegistry, BrokenPluginsFallBackWithAReason) {
  EnvGuard env;
  env.set("NCCL_IB_DISABLE", "1");
  const Net* net = nullptr;
  for (const char* variant : {"broken", "failinit"}) {
    env.set("NCCL_NET_PLUGIN", plugin(variant));
    ASSERT_EQ(NetRegistry::get().select("", &net), ncclSuccess) << variant;
    EXPECT_EQ(net->name, "Socket") << variant;
  }
  env.set("NCCL_NET_PLUGIN", "no-such-plugin-here");
  ASSERT_EQ(NetRegistry::get().select("", &net), ncclSuccess);
  EXPECT_EQ(net->name, "Socket");
  bool sawBroken = false, sawFailInit = false, sawMissing = false;
  // describe() reports the current NCCL_NET_PLUGIN's items with their reasons.
  for (const char* variant : {"broken", "failinit"}) {
    env.set("NCCL_NET_PLUGIN", plugin(variant));
    for (const auto& e : NetRegistry::get().describe()) {
      if (e.name.find("libnccl-net-broken.so") != std::string::npos)
        sawBroken = e.state.find("exports no ncclNetPlugin_v11") != std::string::npos;
      if (e.name.find("libnccl-net-failinit.so") != std::string::npos)
        sawFailInit = e.state.find("init() failed") != std::string::npos;
    }
  }
  env.set("NCCL_NET_PLUGIN", "no-such-plugin-here");
  for (const auto& e : NetRegistry::get().describe())
    if (e.name == "plugin no-such-plugin-here")
      sawMissing = e.state.find("libnccl-net-no-such-plugin-here.so") != std::string::npos;
  EXPECT_TRUE(sawBroken);
  EXPECT_TRUE(sawFailInit);
  EXPECT_TRUE(sawMissing) << "the reason lists the library names tried";
}

}  // namespace
}  // namespace braid
