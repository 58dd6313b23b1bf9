// The "X" test plugin (tests/net/plugins/xnet.c) on its own: dlopen the built libraries
// (libnccl-net-x.so exports ncclNetPlugin_v11, libnccl-net-x8.so ncclNetPlugin_v8) and
// drive their tables directly, in one thread, interleaving calls (all of them are
// non-blocking). Proves the plugin is a working TCP net before Braid loads it by
// NCCL_NET_PLUGIN in the end-to-end tests; also checks the broken and failinit builds.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "braid/net_plugin.h"

namespace {

// ---- a logger that records every line -------------------------------------------

struct LogLine {
  ncclDebugLogLevel level;
  unsigned long flags;
  std::string text;
};
std::mutex gLogMutex;
std::vector<LogLine> gLog;

void recordLog(ncclDebugLogLevel level, unsigned long flags, const char*, int,
               const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gLogMutex);
  gLog.push_back({level, flags, buf});
}

void clearLog() {
  std::lock_guard<std::mutex> lock(gLogMutex);
  gLog.clear();
}

// The last recorded line at `level` containing `part`, or "" if none.
std::string findLog(ncclDebugLogLevel level, const char* part) {
  std::lock_guard<std::mutex> lock(gLogMutex);
  for (auto it = gLog.rbegin(); it != gLog.rend(); ++it)
    if (it->level == level && it->text.find(part) != std::string::npos) return it->text;
  return "";
}

// The subsystem flags of the last line at `level` containing `part` (0 if none).
unsigned long findLogFlags(ncclDebugLogLevel level, const char* part) {
  std::lock_guard<std::mutex> lock(gLogMutex);
  for (auto it = gLog.rbegin(); it != gLog.rend(); ++it)
    if (it->level == level && it->text.find(part) != std::string::npos) return it->flags;
  return 0;
}

// ---- the plugin's handle, as xnet.c lays it out (the test needs address and port) ----

struct HandleView {
  uint32_t magic;
  uint32_t addr;  // network byte order
  uint16_t port;  // network byte order
  uint16_t pad0;
  uint32_t pad1;
  uint64_t token;
};

using Clock = std::chrono::steady_clock;
Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

std::string libPath(const std::string& name) {
  return std::string(BRAID_TEST_PLUGIN_DIR) + "/libnccl-net-" + name + ".so";
}

// ---- one loaded plugin, v11 or v8, behind one set of calls --------------------------

struct XNet {
  void* lib = nullptr;
  const ncclNet_v11_t* v11 = nullptr;
  const ncclNet_v8_t* v8 = nullptr;
  void* ctx = nullptr;

  ncclResult_t init() {
    if (v11) {
      ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return v11->init(&ctx, 1234, &config, recordLog, nullptr);
    }
    return v8->init(recordLog);
  }
  ncclResult_t listen(void* handle, void** lc) {
    return v11 ? v11->listen(ctx, 0, handle, lc) : v8->listen(0, handle, lc);
  }
  ncclResult_t connect(void* handle, void** sc) {
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    return v11 ? v11->connect(ctx, 0, handle, sc, &dev) : v8->connect(0, handle, sc, &dev);
  }
  ncclResult_t accept(void* lc, void** rc) {
    ncclNetDeviceHandle_v8_t* dev = nullptr;
    return v11 ? v11->accept(lc, rc, &dev) : v8->accept(lc, rc, &dev);
  }
  ncclResult_t isend(void* sc, void* data, size_t size, void** req) {
    if (v11) return v11->isend(sc, data, size, 0, nullptr, nullptr, req);
    return v8->isend(sc, data, int(size), 0, nullptr, req);
  }
  ncclResult_t irecv(void* rc, void* data, size_t size, void** req) {
    int tag = 0;
    void* mh = nullptr;
    if (v11) return v11->irecv(rc, 1, &data, &size, &tag, &mh, nullptr, req);
    int isize = int(size);
    return v8->irecv(rc, 1, &data, &isize, &tag, &mh, req);
  }
  ncclResult_t test(void* req, int* done, int* size) {
    return v11 ? v11->test(req, done, size) : v8->test(req, done, size);
  }
  ncclResult_t closeSend(void* c) { return v11 ? v11->closeSend(c) : v8->closeSend(c); }
  ncclResult_t closeRecv(void* c) { return v11 ? v11->closeRecv(c) : v8->closeRecv(c); }
  ncclResult_t closeListen(void* c) { return v11 ? v11->closeListen(c) : v8->closeListen(c); }
};

class XNetPlugin : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    clearLog();
    std::string path = libPath(GetParam());
    net.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(net.lib, nullptr) << dlerror();
    isV11 = std::string(GetParam()) == "x";
    if (isV11)
      net.v11 = static_cast<const ncclNet_v11_t*>(dlsym(net.lib, "ncclNetPlugin_v11"));
    else
      net.v8 = static_cast<const ncclNet_v8_t*>(dlsym(net.lib, "ncclNetPlugin_v8"));
    ASSERT_TRUE(net.v11 || net.v8) << "no table in " << path;
    ASSERT_EQ(net.init(), ncclSuccess);
  }

  // listen, then connect/accept until both sides have a comm.
  void connectPair(void** lc, void** sc, void** rc) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    ASSERT_EQ(net.listen(handle, lc), ncclSuccess);
    ASSERT_NE(*lc, nullptr);
    *sc = *rc = nullptr;
    auto end = after(10);
    while ((!*sc || !*rc) && Clock::now() < end) {
      if (!*sc) {
        ASSERT_EQ(net.connect(handle, sc), ncclSuccess);
      }
      if (!*rc) {
        ASSERT_EQ(net.accept(*lc, rc), ncclSuccess);
      }
    }
    ASSERT_NE(*sc, nullptr) << "connect never finished";
    ASSERT_NE(*rc, nullptr) << "accept never finished";
  }

  // Tests `req` until done or an error; returns the last result.
  ncclResult_t waitFor(void* req, int* size, double seconds = 10) {
    int done = 0;
    auto end = after(seconds);
    while (Clock::now() < end) {
      ncclResult_t res = net.test(req, &done, size);
      if (res != ncclSuccess || done) return res;
    }
    ADD_FAILURE() << "request never finished";
    return ncclInternalError;
  }

  XNet net;
  bool isV11 = false;
};

TEST_P(XNetPlugin, LoadsWithItsNameAndOneDevice) {
  // Each library exports exactly its own table.
  EXPECT_EQ(dlsym(net.lib, isV11 ? "ncclNetPlugin_v8" : "ncclNetPlugin_v11"), nullptr);
  EXPECT_STREQ(isV11 ? net.v11->name : net.v8->name, isV11 ? "X" : "X8");
  std::string want = std::string("X net plugin: init (version ") + (isV11 ? "11" : "8") + ")";
  {
    std::lock_guard<std::mutex> lock(gLogMutex);
    ASSERT_FALSE(gLog.empty());
    EXPECT_EQ(gLog.back().level, NCCL_LOG_INFO);
    EXPECT_EQ(gLog.back().flags, static_cast<unsigned long>(NCCL_NET | NCCL_INIT));
    EXPECT_EQ(gLog.back().text, want);
  }
  int ndev = 0;
  ASSERT_EQ(isV11 ? net.v11->devices(&ndev) : net.v8->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 1);
  if (isV11) {
    ncclNetProperties_v11_t p;
    memset(&p, 0xff, sizeof p);
    ASSERT_EQ(net.v11->getProperties(0, &p), ncclSuccess);
    EXPECT_STREQ(p.name, "xnet0");
    EXPECT_EQ(p.pciPath, nullptr);
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    EXPECT_EQ(p.speed, 10000);
    EXPECT_EQ(p.latency, 0.0f);
    EXPECT_EQ(p.maxComms, 65536);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.maxP2pBytes, size_t(1) << 30);
    EXPECT_EQ(p.maxCollBytes, size_t(1) << 30);
    EXPECT_EQ(p.maxMultiRequestSize, 1);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], 0);
    EXPECT_NE(net.v11->getProperties(1, &p), ncclSuccess);
    ncclNetVDeviceProps_v11_t vp{};
    int d = -1;
    EXPECT_EQ(net.v11->makeVDevice(&d, &vp), ncclInternalError);
    ncclNetAttr_v11_t attr{};
    EXPECT_EQ(net.v11->setNetAttr(net.ctx, &attr), ncclSuccess);
    EXPECT_EQ(net.v11->finalize(net.ctx), ncclSuccess);
  } else {
    ncclNetProperties_v8_t p;
    memset(&p, 0xff, sizeof p);
    ASSERT_EQ(net.v8->getProperties(0, &p), ncclSuccess);
    EXPECT_STREQ(p.name, "xnet0");
    EXPECT_EQ(p.pciPath, nullptr);
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    EXPECT_EQ(p.speed, 10000);
    EXPECT_EQ(p.maxComms, 65536);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_NE(net.v8->getProperties(1, &p), ncclSuccess);
  }
}

TEST_P(XNetPlugin, MessagesArriveInOrderWithTheirSizes) {
  void *lc, *sc, *rc;
  ASSERT_NO_FATAL_FAILURE(connectPair(&lc, &sc, &rc));

  const std::vector<size_t> sizes = {0, 1, 64 << 10, 4 << 20, 0, 1, 64 << 10, 4 << 20, 12345};
  std::vector<std::vector<unsigned char>> out(sizes.size()), in(sizes.size());
  std::vector<void*> sreq(sizes.size()), rreq(sizes.size());
  unsigned long long total = 0;
  for (size_t i = 0; i < sizes.size(); i++) {
    out[i].resize(sizes[i] + 1);  // +1: never a zero-sized buffer
    for (size_t k = 0; k < sizes[i]; k++) out[i][k] = (unsigned char)(i * 131 + k * 7 + k / 251);
    in[i].assign(sizes[i] + 4096, 0xee);  // posted buffers larger than the messages
    total += sizes[i];
  }
  // All sends in flight before any receive is posted, then all receives.
  for (size_t i = 0; i < sizes.size(); i++) {
    ASSERT_EQ(net.isend(sc, out[i].data(), sizes[i], &sreq[i]), ncclSuccess);
    ASSERT_NE(sreq[i], nullptr);
  }
  for (size_t i = 0; i < sizes.size(); i++) {
    ASSERT_EQ(net.irecv(rc, in[i].data(), in[i].size(), &rreq[i]), ncclSuccess);
    ASSERT_NE(rreq[i], nullptr);
  }
  std::vector<int> sdone(sizes.size()), rdone(sizes.size());
  std::vector<int> ssize(sizes.size(), -1), rsize(sizes.size(), -1);
  size_t left = 2 * sizes.size();
  auto end = after(30);
  while (left > 0 && Clock::now() < end) {
    for (size_t i = 0; i < sizes.size(); i++) {
      if (!sdone[i]) {
        ASSERT_EQ(net.test(sreq[i], &sdone[i], &ssize[i]), ncclSuccess);
        if (sdone[i]) left--;
      }
      if (!rdone[i]) {
        ASSERT_EQ(net.test(rreq[i], &rdone[i], &rsize[i]), ncclSuccess);
        if (rdone[i]) left--;
      }
    }
  }
  ASSERT_EQ(left, 0u) << "transfers never finished";
  for (size_t i = 0; i < sizes.size(); i++) {
    EXPECT_EQ(ssize[i], int(sizes[i])) << "send " << i;
    ASSERT_EQ(rsize[i], int(sizes[i])) << "receive " << i;
    EXPECT_EQ(memcmp(in[i].data(), out[i].data(), sizes[i]), 0) << "message " << i;
    EXPECT_EQ(in[i][sizes[i]], 0xee) << "wrote past message " << i;
  }

  EXPECT_EQ(net.closeSend(sc), ncclSuccess);
  EXPECT_EQ(net.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
  std::string closed = findLog(NCCL_LOG_INFO, "X net plugin: comm closed, ");
  unsigned long long sent = 0, received = 0;
  ASSERT_EQ(sscanf(closed.c_str(), "X net plugin: comm closed, %llu bytes sent, %llu received",
                   &sent, &received),
            2)
      << closed;
  EXPECT_GE(sent, total);
  EXPECT_GE(received, total);
  // NCCL_INIT too: the line shows under NCCL_DEBUG=INFO with the default subsystems.
  EXPECT_EQ(findLogFlags(NCCL_LOG_INFO, "comm closed"),
            static_cast<unsigned long>(NCCL_NET | NCCL_INIT));
}

TEST_P(XNetPlugin, HoldsAtMost32RequestsPerComm) {
  void *lc, *sc, *rc;
  ASSERT_NO_FATAL_FAILURE(connectPair(&lc, &sc, &rc));
  std::vector<unsigned char> out(32), in(32 * 2);
  std::vector<void*> sreq(32), rreq(32);
  for (int i = 0; i < 32; i++) {
    out[i] = (unsigned char)(i + 1);
    ASSERT_EQ(net.isend(sc, &out[i], 1, &sreq[i]), ncclSuccess);
    ASSERT_NE(sreq[i], nullptr) << i;
    ASSERT_EQ(net.irecv(rc, &in[2 * i], 2, &rreq[i]), ncclSuccess);
    ASSERT_NE(rreq[i], nullptr) << i;
  }
  unsigned char extra = 0;
  void* none = &extra;
  ASSERT_EQ(net.isend(sc, &extra, 1, &none), ncclSuccess);
  EXPECT_EQ(none, nullptr) << "a 33rd send was queued";
  none = &extra;
  ASSERT_EQ(net.irecv(rc, &extra, 1, &none), ncclSuccess);
  EXPECT_EQ(none, nullptr) << "a 33rd receive was queued";
  for (int i = 0; i < 32; i++) {
    int size = -1;
    ASSERT_EQ(waitFor(sreq[i], &size), ncclSuccess);
    EXPECT_EQ(size, 1);
    ASSERT_EQ(waitFor(rreq[i], &size), ncclSuccess);
    EXPECT_EQ(size, 1);
    EXPECT_EQ(in[2 * i], out[i]);
  }
  // Completed requests were freed: the queue takes new ones again.
  void* req = nullptr;
  ASSERT_EQ(net.isend(sc, &extra, 1, &req), ncclSuccess);
  ASSERT_NE(req, nullptr);
  ASSERT_EQ(waitFor(req, nullptr), ncclSuccess);
  EXPECT_EQ(net.closeSend(sc), ncclSuccess);
  EXPECT_EQ(net.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
}

TEST_P(XNetPlugin, MemoryAndMultiReceiveCalls) {
  void *lc, *sc, *rc;
  ASSERT_NO_FATAL_FAILURE(connectPair(&lc, &sc, &rc));
  char buf[64];
  void* mh = nullptr;
  void* req = &mh;
  size_t sizes[2] = {32, 32};
  int isizes[2] = {32, 32}, tags[2] = {0, 0};
  void* datas[2] = {buf, buf + 32};
  void* mhs[2] = {nullptr, nullptr};
  if (isV11) {
    ASSERT_EQ(net.v11->regMr(rc, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclSuccess);
    EXPECT_NE(mh, nullptr);
    EXPECT_EQ(net.v11->deregMr(rc, mh), ncclSuccess);
    EXPECT_EQ(net.v11->regMrDmaBuf(rc, buf, sizeof buf, NCCL_PTR_HOST, 0, -1, &mh),
              ncclInternalError);
    EXPECT_EQ(net.v11->iflush(rc, 1, datas, isizes, mhs, &req), ncclSuccess);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(net.v11->irecv(rc, 2, datas, sizes, tags, mhs, nullptr, &req), ncclInternalError);
  } else {
    ASSERT_EQ(net.v8->regMr(rc, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclSuccess);
    EXPECT_NE(mh, nullptr);
    EXPECT_EQ(net.v8->deregMr(rc, mh), ncclSuccess);
    EXPECT_EQ(net.v8->regMrDmaBuf(rc, buf, sizeof buf, NCCL_PTR_HOST, 0, -1, &mh),
              ncclInternalError);
    EXPECT_EQ(net.v8->iflush(rc, 1, datas, isizes, mhs, &req), ncclSuccess);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(net.v8->irecv(rc, 2, datas, isizes, tags, mhs, &req), ncclInternalError);
  }
  EXPECT_EQ(net.closeSend(sc), ncclSuccess);
  EXPECT_EQ(net.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
}

TEST_P(XNetPlugin, RejectsAWrongTokenAndKeepsListening) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  ASSERT_EQ(net.listen(handle, &lc), ncclSuccess);
  HandleView h;
  memcpy(&h, handle, sizeof h);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = h.addr;
  sa.sin_port = h.port;

  // An intruder with the wrong token, and one that hangs up before sending any.
  int bad = socket(AF_INET, SOCK_STREAM, 0), mute = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(bad, (sockaddr*)&sa, sizeof sa), 0) << strerror(errno);
  ASSERT_EQ(connect(mute, (sockaddr*)&sa, sizeof sa), 0) << strerror(errno);
  uint64_t wrong = h.token ^ 0x5a5a;
  ASSERT_EQ(write(bad, &wrong, sizeof wrong), ssize_t(sizeof wrong));
  close(mute);
  void* rc = nullptr;
  auto end = after(10);
  while (Clock::now() < end && (findLog(NCCL_LOG_WARN, "bad token").empty() ||
                                findLog(NCCL_LOG_WARN, "before sending its token").empty())) {
    ASSERT_EQ(net.accept(lc, &rc), ncclSuccess);
    ASSERT_EQ(rc, nullptr) << "accepted a connection with a wrong token";
  }
  EXPECT_EQ(findLog(NCCL_LOG_WARN, "bad token").rfind("X net plugin: rejected connection from ", 0),
            0u);
  EXPECT_FALSE(findLog(NCCL_LOG_WARN, "before sending its token").empty());
  // The rejected socket was closed by the plugin: reading it gives EOF (or a reset).
  char byte;
  EXPECT_LE(read(bad, &byte, 1), 0);
  close(bad);

  // A real connection still gets through the same listener.
  void* sc = nullptr;
  end = after(10);
  while ((!sc || !rc) && Clock::now() < end) {
    if (!sc) {
      ASSERT_EQ(net.connect(handle, &sc), ncclSuccess);
    }
    if (!rc) {
      ASSERT_EQ(net.accept(lc, &rc), ncclSuccess);
    }
  }
  ASSERT_NE(sc, nullptr);
  ASSERT_NE(rc, nullptr);
  EXPECT_EQ(net.closeSend(sc), ncclSuccess);
  EXPECT_EQ(net.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
}

TEST_P(XNetPlugin, SenderClosingMidStreamFailsTheReceive) {
  void *lc, *sc, *rc;
  ASSERT_NO_FATAL_FAILURE(connectPair(&lc, &sc, &rc));
  const size_t n = 64 << 20;  // more than the socket buffers hold
  std::vector<char> out(n, 'x'), in(n);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(net.isend(sc, out.data(), n, &sreq), ncclSuccess);
  ASSERT_EQ(net.irecv(rc, in.data(), n, &rreq), ncclSuccess);
  int done = 0, size = 0;
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(net.test(sreq, &done, &size), ncclSuccess);
    ASSERT_EQ(net.test(rreq, &done, &size), ncclSuccess);
  }
  ASSERT_EQ(done, 0) << "the whole message went through already";
  EXPECT_EQ(net.closeSend(sc), ncclSuccess);  // with the send still in flight
  EXPECT_EQ(waitFor(rreq, &size), ncclRemoteError);
  EXPECT_NE(findLog(NCCL_LOG_WARN, "X net plugin: connection with ").find("lost"),
            std::string::npos);
  // The comm stays failed.
  EXPECT_EQ(net.test(rreq, &done, &size), ncclRemoteError);
  EXPECT_EQ(net.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
}

TEST_P(XNetPlugin, ReceiverClosingMidStreamFailsTheSend) {
  void *lc, *sc, *rc;
  ASSERT_NO_FATAL_FAILURE(connectPair(&lc, &sc, &rc));
  const size_t n = 64 << 20;
  std::vector<char> out(n, 'y'), in(n);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(net.isend(sc, out.data(), n, &sreq), ncclSuccess);
  ASSERT_EQ(net.irecv(rc, in.data(), n, &rreq), ncclSuccess);
  int done = 0, size = 0;
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(net.test(sreq, &done, &size), ncclSuccess);
    ASSERT_EQ(net.test(rreq, &done, &size), ncclSuccess);
  }
  EXPECT_EQ(net.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(waitFor(sreq, &size), ncclRemoteError);
  EXPECT_FALSE(findLog(NCCL_LOG_WARN, "X net plugin: connection with ").empty());
  EXPECT_EQ(net.closeSend(sc), ncclSuccess);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
}

TEST_P(XNetPlugin, AMessageLargerThanThePostedBufferIsAnError) {
  void *lc, *sc, *rc;
  ASSERT_NO_FATAL_FAILURE(connectPair(&lc, &sc, &rc));
  char out[100] = {}, in[10];
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(net.isend(sc, out, sizeof out, &sreq), ncclSuccess);
  ASSERT_EQ(net.irecv(rc, in, sizeof in, &rreq), ncclSuccess);
  int size = 0;
  EXPECT_EQ(waitFor(sreq, &size), ncclSuccess);
  EXPECT_EQ(waitFor(rreq, &size), ncclInternalError);
  EXPECT_FALSE(findLog(NCCL_LOG_WARN, "only 10 posted").empty());
  EXPECT_EQ(net.closeSend(sc), ncclSuccess);
  EXPECT_EQ(net.closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
}

TEST_P(XNetPlugin, ConnectingToAClosedListenerFails) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  ASSERT_EQ(net.listen(handle, &lc), ncclSuccess);
  ASSERT_EQ(net.closeListen(lc), ncclSuccess);
  void* sc = nullptr;
  ncclResult_t res = ncclSuccess;
  auto end = after(10);
  while (res == ncclSuccess && !sc && Clock::now() < end) res = net.connect(handle, &sc);
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_EQ(sc, nullptr);
  EXPECT_FALSE(findLog(NCCL_LOG_WARN, "X net plugin: connect to ").empty());
}

TEST_P(XNetPlugin, XnetAddrChoosesTheListenAddress) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  setenv("XNET_ADDR", "127.0.0.1", 1);
  ncclResult_t res = net.listen(handle, &lc);
  unsetenv("XNET_ADDR");
  ASSERT_EQ(res, ncclSuccess);
  HandleView h;
  memcpy(&h, handle, sizeof h);
  EXPECT_EQ(h.addr, htonl(INADDR_LOOPBACK));
  EXPECT_NE(h.port, 0);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);

  setenv("XNET_ADDR", "not-an-address", 1);
  lc = nullptr;
  res = net.listen(handle, &lc);
  unsetenv("XNET_ADDR");
  EXPECT_EQ(res, ncclInvalidArgument);
  EXPECT_EQ(lc, nullptr);
  EXPECT_FALSE(findLog(NCCL_LOG_WARN, "XNET_ADDR=not-an-address").empty());

  // Unset: some IPv4 address of this machine (loopback when it has no other).
  lc = nullptr;
  ASSERT_EQ(net.listen(handle, &lc), ncclSuccess);
  memcpy(&h, handle, sizeof h);
  EXPECT_NE(h.addr, 0u);
  EXPECT_EQ(net.closeListen(lc), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Versions, XNetPlugin, ::testing::Values("x", "x8"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param[1] ? "V8" : "V11");
                         });

TEST(XNetPluginBuilds, BrokenExportsNoTable) {
  void* lib = dlopen(libPath("broken").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  EXPECT_NE(dlsym(lib, "xnetBrokenMarker"), nullptr);
  for (const char* sym : {"ncclNetPlugin_v8", "ncclNetPlugin_v9", "ncclNetPlugin_v10",
                          "ncclNetPlugin_v11", "ncclNetPlugin", "ncclCollNetPlugin_v11"})
    EXPECT_EQ(dlsym(lib, sym), nullptr) << sym;
}

TEST(XNetPluginBuilds, FailInitFailsInit) {
  clearLog();
  void* lib = dlopen(libPath("failinit").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto* net = static_cast<const ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
  ASSERT_NE(net, nullptr);
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  EXPECT_EQ(net->init(&ctx, 1, &config, recordLog, nullptr), ncclSystemError);
  EXPECT_FALSE(findLog(NCCL_LOG_WARN, "X net plugin: init fails").empty());
}

}  // namespace
