// One-sided operations (NCCL 2.30): ncclPutSignal / ncclSignal / ncclWaitSignal on
// windows from ncclCommWindowRegister, ncclWinGetUserPtr, and the device-API host
// functions (include/braid/nccl_device_host.h), over every rank layout:
//   threads (ncclCommInitAll, ncclCommInitRank): the local path (memcpy)
//   processes on one host: process_vm_writev + shared counters (the cma path)
//   processes as different hosts (NCCL_HOSTID per rank) and BRAID_TRANSPORT=socket:
//   the target's progress agent over TCP
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "braid/nccl_device_host.h"
#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

enum class Layout { kInitAll, kThreads, kProcShm, kProcHosts, kProcSocket };

const char* layoutName(Layout l) {
  switch (l) {
    case Layout::kInitAll: return "InitAll";
    case Layout::kThreads: return "Threads";
    case Layout::kProcShm: return "ProcessesOneHost";
    case Layout::kProcHosts: return "ProcessesManyHosts";
    case Layout::kProcSocket: return "ProcessesSocket";
  }
  return "?";
}

bool isProcesses(Layout l) { return l != Layout::kInitAll && l != Layout::kThreads; }

using Body = std::function<void(ncclComm_t& comm, int rank, int n)>;

/// Runs body on n ranks laid out as `l`. kProcHosts gives every rank its own NCCL_HOSTID
/// (each plays a separate node), so no two ranks share memory.
std::vector<RankOutcome> runLayout(Layout l, int n, const Body& body,
                                   RunOptions opts = RunOptions()) {
  std::vector<std::pair<std::string, std::string>> env = {{"BRAID_TIMEOUT_MS", "30000"}};
  if (l == Layout::kProcSocket) env.push_back({"BRAID_TRANSPORT", "socket"});
  ScopedEnv scoped(env);
  if (l == Layout::kInitAll)
    return run(Launch::kInitAll, n, body, opts);
  if (l == Layout::kThreads)
    return run(Launch::kThreads, n, body, opts);
  if (l != Layout::kProcHosts)
    return run(Launch::kProcesses, n, body,
               opts);
  opts.createComm = false;
  return run(
      Launch::kProcesses, n,
      [&](ncclComm_t& comm, int rank, int nn) {
        const std::string host = "rma-node-" + std::to_string(rank);
        setenv("NCCL_HOSTID", host.c_str(), 1);  // this child only
        MR_NCCL_OK(ncclCommInitRank(&comm, nn, sharedId(), rank));
        body(comm, rank, nn);
      },
      opts);
}

/// A window of `count` floats on every rank, filled with `fill`.
struct Window {
  std::vector<float> buf;
  ncclWindow_t win = nullptr;
  ncclComm_t comm = nullptr;
  Window(ncclComm_t c, size_t count, float fill) : buf(count, fill), comm(c) {
    ncclResult_t r = ncclCommWindowRegister(c, buf.data(), count * sizeof(float), &win, 0);
    EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(c);
  }
  ~Window() {
    if (win) {
      EXPECT_EQ(ncclCommWindowDeregister(comm, win), ncclSuccess) << ncclGetLastError(comm);
    }
  }
};

float val(int from, int to, size_t i, int round) {
  return float(from * 1000 + to * 100 + int(i % 97) + round * 10000);
}

class Rma : public ::testing::TestWithParam<Layout> {};

// Rank 0 puts to rank 1, which waits and puts back: several rounds, each checked.
TEST_P(Rma, PingPong) {
  runLayout(GetParam(), 2, [](ncclComm_t& comm, int rank, int) {
    const size_t count = 70001;  // odd, over a megabit
    Window w(comm, count, -1.0f);
    std::vector<float> src(count);
    const int other = 1 - rank;
    ncclWaitSignalDesc_t d = {1, other, 0, 0};
    for (int round = 0; round < 5; ++round) {
      for (size_t i = 0; i < count; ++i) src[i] = val(rank, other, i, round);
      if (rank == 1) {
        MR_NCCL_OK(ncclWaitSignal(1, &d, comm, nullptr));
        for (size_t i = 0; i < count; i += 37)
          ASSERT_EQ(w.buf[i], val(0, 1, i, round)) << "round " << round << " element " << i;
        ASSERT_EQ(w.buf[count - 1], val(0, 1, count - 1, round));
      }
      MR_NCCL_OK(ncclPutSignal(src.data(), count, ncclFloat32, other, w.win, 0, 0, 0, 0, comm,
                               nullptr));
      if (rank == 0) {
        MR_NCCL_OK(ncclWaitSignal(1, &d, comm, nullptr));
        for (size_t i = 0; i < count; i += 37)
          ASSERT_EQ(w.buf[i], val(1, 0, i, round)) << "round " << round << " element " << i;
      }
    }
  });
}

// All-to-all as grouped puts to every rank (self included) then one wait on all peers.
TEST_P(Rma, GroupedAllToAll) {
  const int n = isProcesses(GetParam()) ? 3 : 4;
  runLayout(GetParam(), n, [](ncclComm_t& comm, int rank, int nn) {
    const size_t count = 1531;
    Window w(comm, count * size_t(nn), -1.0f);
    std::vector<float> src(count * size_t(nn));
    std::vector<ncclWaitSignalDesc_t> descs;
    for (int p = 0; p < nn; ++p) descs.push_back({1, p, 0, 0});
    for (int round = 0; round < 3; ++round) {
      for (int p = 0; p < nn; ++p)
        for (size_t i = 0; i < count; ++i) src[size_t(p) * count + i] = val(rank, p, i, round);
      MR_NCCL_OK(ncclGroupStart());
      for (int p = 0; p < nn; ++p)
        MR_NCCL_OK(ncclPutSignal(src.data() + size_t(p) * count, count, ncclFloat32, p, w.win,
                                 size_t(rank) * count * sizeof(float), 0, 0, 0, comm, nullptr));
      MR_NCCL_OK(ncclWaitSignal(nn, descs.data(), comm, nullptr));
      MR_NCCL_OK(ncclGroupEnd());
      for (int p = 0; p < nn; ++p)
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(w.buf[size_t(p) * count + i], val(p, rank, i, round))
              << "round " << round << " from rank " << p << " element " << i;
      // Nobody may overwrite this round's data before everyone checked it.
      MR_NCCL_OK(ncclGroupStart());
      for (int p = 0; p < nn; ++p) MR_NCCL_OK(ncclSignal(p, 0, 0, 0, comm, nullptr));
      MR_NCCL_OK(ncclWaitSignal(nn, descs.data(), comm, nullptr));
      MR_NCCL_OK(ncclGroupEnd());
    }
  });
}

// Signals only, as a barrier: nobody leaves round k before everyone entered it.
TEST_P(Rma, SignalBarrier) {
  const Layout l = GetParam();
  const int n = 3;
  runLayout(l, n, [](ncclComm_t& comm, int rank, int nn) {
    Window w(comm, 16, 0.0f);  // sets up the one-sided state
    // Every rank's progress goes into its window slot 0; after the barrier of round k
    // each rank reads the others' progress through a put (processes cannot share memory).
    std::vector<ncclWaitSignalDesc_t> all;
    for (int p = 0; p < nn; ++p)
      if (p != rank) all.push_back({1, p, 0, 0});
    for (int round = 1; round <= 20; ++round) {
      if (rank == round % nn) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      float mine = float(round);
      // Announce the round to everyone (slot = my rank), then barrier.
      MR_NCCL_OK(ncclGroupStart());
      for (int p = 0; p < nn; ++p)
        if (p != rank)
          MR_NCCL_OK(ncclPutSignal(&mine, 1, ncclFloat32, p, w.win, size_t(rank) * sizeof(float),
                                   0, 0, 0, comm, nullptr));
      MR_NCCL_OK(ncclGroupEnd());
      MR_NCCL_OK(ncclWaitSignal(int(all.size()), all.data(), comm, nullptr));
      for (int p = 0; p < nn; ++p)
        if (p != rank) {
          ASSERT_GE(w.buf[size_t(p)], float(round)) << "rank " << p;
        }
      // Signal-only barrier: everyone has read this round before anyone writes again.
      MR_NCCL_OK(ncclGroupStart());
      for (int p = 0; p < nn; ++p)
        if (p != rank) MR_NCCL_OK(ncclSignal(p, 0, 0, 0, comm, nullptr));
      MR_NCCL_OK(ncclGroupEnd());
      MR_NCCL_OK(ncclWaitSignal(int(all.size()), all.data(), comm, nullptr));
    }
  });
}

// Puts at odd offsets and sizes touch exactly their bytes; opCnt > 1 waits for several.
TEST_P(Rma, OffsetsAndCounts) {
  runLayout(GetParam(), 2, [](ncclComm_t& comm, int rank, int) {
    const size_t bytes = 10007;
    std::vector<unsigned char> win(bytes, 0xEE);
    ncclWindow_t h = nullptr;
    MR_NCCL_OK(ncclCommWindowRegister(comm, win.data(), bytes, &h, 0));
    struct Piece {
      size_t off, len;
    } pieces[] = {{0, 1}, {1, 3}, {17, 1000}, {5000, 4999}, {bytes - 8, 8}, {4000, 0}};
    std::vector<unsigned char> src(bytes);
    for (size_t i = 0; i < bytes; ++i) src[i] = (unsigned char)(i * 7 + 3);
    if (rank == 0) {
      for (const Piece& p : pieces)
        MR_NCCL_OK(ncclPutSignal(src.data() + p.off, p.len, ncclUint8, 1, h, p.off, 0, 0, 0, comm,
                                 nullptr));
    } else {
      ncclWaitSignalDesc_t d = {int(sizeof pieces / sizeof pieces[0]), 0, 0, 0};
      MR_NCCL_OK(ncclWaitSignal(1, &d, comm, nullptr));
      std::vector<bool> written(bytes, false);
      for (const Piece& p : pieces)
        for (size_t i = p.off; i < p.off + p.len; ++i) written[i] = true;
      for (size_t i = 0; i < bytes; ++i)
        ASSERT_EQ(win[i], written[i] ? src[i] : 0xEE) << "byte " << i;
    }
    MR_NCCL_OK(ncclSignal(1 - rank, 0, 0, 0, comm, nullptr));  // done with each other's window
    ncclWaitSignalDesc_t d = {1, 1 - rank, 0, 0};
    MR_NCCL_OK(ncclWaitSignal(1, &d, comm, nullptr));
    MR_NCCL_OK(ncclCommWindowDeregister(comm, h));
  });
}

// ncclWinGetUserPtr and ncclGetPeerDevicePointer: this process's ranks are addressable,
// others are NULL (as NCCL answers for peers outside its load/store team).
TEST_P(Rma, UserAndPeerPointers) {
  const Layout l = GetParam();
  static std::vector<void*> bufs;  // the thread ranks' buffers (threads share it)
  bufs.assign(3, nullptr);
  runLayout(l, 3, [l](ncclComm_t& comm, int rank, int nn) {
    std::vector<float> a(100), b(50);
    bufs[size_t(rank)] = a.data();
    ncclWindow_t wa = nullptr, wb = nullptr;
    MR_NCCL_OK(ncclCommWindowRegister(comm, a.data(), a.size() * sizeof(float), &wa, 0));
    MR_NCCL_OK(ncclCommWindowRegister(comm, b.data(), b.size() * sizeof(float), &wb, 0));
    void* p = nullptr;
    MR_NCCL_OK(ncclWinGetUserPtr(comm, wa, &p));
    EXPECT_EQ(p, a.data());
    MR_NCCL_OK(ncclWinGetUserPtr(comm, wb, &p));
    EXPECT_EQ(p, b.data());
    EXPECT_EQ(ncclWinGetUserPtr(comm, wa, nullptr), ncclInvalidArgument);
    for (int q = 0; q < nn; ++q) {
      void* peer = reinterpret_cast<void*>(1);
      MR_NCCL_OK(ncclGetPeerDevicePointer(wa, 8, q, &peer));
      if (q == rank) {
        EXPECT_EQ(peer, static_cast<char*>(static_cast<void*>(a.data())) + 8);
      } else if (isProcesses(l)) {
        EXPECT_EQ(peer, nullptr) << "rank " << q << " is another process";
      } else {
        EXPECT_EQ(peer, static_cast<char*>(bufs[size_t(q)]) + 8) << "thread rank " << q;
      }
    }
    void* out = nullptr;
    EXPECT_EQ(ncclGetPeerDevicePointer(wa, 0, nn, &out), ncclInvalidArgument);
    EXPECT_EQ(ncclGetPeerDevicePointer(wa, 0, -1, &out), ncclInvalidArgument);
    EXPECT_EQ(ncclGetPeerDevicePointer(wa, 401, rank, &out), ncclInvalidArgument);
    EXPECT_EQ(ncclGetPeerDevicePointer(nullptr, 0, 0, &out), ncclInvalidArgument);
    MR_NCCL_OK(ncclGetLsaDevicePointer(wa, 0, 0, &out));
    EXPECT_NE(out, nullptr);
    EXPECT_EQ(ncclGetLsaDevicePointer(wa, 0, isProcesses(l) ? 1 : nn, &out), ncclInvalidArgument);
    out = reinterpret_cast<void*>(1);
    MR_NCCL_OK(ncclGetLsaMultimemDevicePointer(wa, 0, &out));
    EXPECT_EQ(out, nullptr);
    ncclMultimemHandle_t mm = {nullptr};
    EXPECT_EQ(ncclGetMultimemDevicePointer(wa, 0, mm, &out), ncclInvalidArgument);
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    MR_NCCL_OK(ncclCommQueryProperties(comm, &props));
    EXPECT_EQ(props.rank, rank);
    EXPECT_EQ(props.nRanks, nn);
    EXPECT_FALSE(props.deviceApiSupport);  // host buffers, no GPU
    EXPECT_FALSE(props.multimemSupport);
    EXPECT_TRUE(props.hostRmaSupport);
    EXPECT_EQ(props.nLsaTeams, isProcesses(l) ? nn : 1);
    // Teams: thread ranks of one process form one LSA team; processes one each.
    const int lsaSize = isProcesses(l) ? 1 : nn;
    const ncclTeam_t lsa = ncclTeamLsa(comm), world = ncclTeamWorld(comm),
                     rail = ncclTeamRail(comm);
    EXPECT_EQ(lsa.nRanks, lsaSize);
    EXPECT_EQ(lsa.rank, rank % lsaSize);
    EXPECT_EQ(world.nRanks, nn);
    EXPECT_EQ(world.rank, rank);
    EXPECT_EQ(rail.nRanks, nn / lsaSize);
    EXPECT_EQ(rail.stride, lsaSize);
    EXPECT_EQ(ncclTeamRankToWorld(comm, rail, 0), rank % lsaSize);
    EXPECT_EQ(ncclTeamRankToLsa(comm, lsa, 0), 0);
    // Requirements Braid cannot meet fail on the host, naming the field, before any
    // device work (no GPU here: then the missing device is the error).
    ncclDevComm_t devComm;
    std::memset(&devComm, 0, sizeof devComm);
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaMultimem = true;
    EXPECT_EQ(ncclDevCommCreate(comm, &reqs, &devComm), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("lsaMultimem"), std::string::npos)
        << ncclGetLastError(comm);
    reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.ginSignalCount = 4;
    EXPECT_EQ(ncclDevCommCreate(comm, &reqs, &devComm), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("ginSignalCount: that needs GIN"),
              std::string::npos) << ncclGetLastError(comm);
    reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.barrierCount = 2;  // a world barrier: only where the world is one LSA team
    if (lsaSize < nn) {
      EXPECT_EQ(ncclDevCommCreate(comm, &reqs, &devComm), ncclInvalidUsage);
      EXPECT_NE(std::string(ncclGetLastError(comm)).find("barrierCount"), std::string::npos)
          << ncclGetLastError(comm);
    }
    reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.magic = 0;
    EXPECT_EQ(ncclDevCommCreate(comm, &reqs, &devComm), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER"),
              std::string::npos) << ncclGetLastError(comm);
    reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 4;
    EXPECT_EQ(ncclDevCommCreate(comm, &reqs, &devComm), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("has no CUDA device"), std::string::npos)
        << ncclGetLastError(comm);
    EXPECT_EQ(ncclDevCommDestroy(comm, &devComm), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("not made by ncclDevCommCreate"),
              std::string::npos) << ncclGetLastError(comm);
    // Stale handle after deregistration.
    MR_NCCL_OK(ncclCommWindowDeregister(comm, wb));
    EXPECT_EQ(ncclWinGetUserPtr(comm, wb, &p), ncclInvalidArgument);
    EXPECT_EQ(ncclGetPeerDevicePointer(wb, 0, rank, &out), ncclInvalidArgument);
    MR_NCCL_OK(ncclCommWindowDeregister(comm, wa));
  });
}

// A put and waits queued on a Braid host stream run in stream order.
TEST_P(Rma, HostStream) {
  runLayout(GetParam(), 2, [](ncclComm_t& comm, int rank, int) {
    braidHostStream_t hs = nullptr;
    MR_NCCL_OK(braidHostStreamCreate(&hs));
    const cudaStream_t s = braidHostStreamAsCuda(hs);
    const size_t count = 4096;
    Window w(comm, count, 0.0f);
    std::vector<float> src(count, float(rank + 7));
    ncclWaitSignalDesc_t d = {1, 1 - rank, 0, 0};
    MR_NCCL_OK(ncclPutSignal(src.data(), count, ncclFloat32, 1 - rank, w.win, 0, 0, 0, 0, comm, s));
    MR_NCCL_OK(ncclWaitSignal(1, &d, comm, s));
    MR_NCCL_OK(braidHostStreamSynchronize(hs));
    EXPECT_EQ(w.buf[0], float(1 - rank + 7));
    EXPECT_EQ(w.buf[count - 1], float(1 - rank + 7));
    MR_NCCL_OK(ncclSignal(1 - rank, 0, 0, 0, comm, s));  // both done reading
    MR_NCCL_OK(ncclWaitSignal(1, &d, comm, s));
    MR_NCCL_OK(braidHostStreamSynchronize(hs));
    MR_NCCL_OK(braidHostStreamDestroy(hs));
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, Rma,
                         ::testing::Values(Layout::kInitAll, Layout::kThreads, Layout::kProcShm,
                                           Layout::kProcHosts, Layout::kProcSocket),
                         [](const ::testing::TestParamInfo<Layout>& i) {
                           return std::string(layoutName(i.param));
                         });

// Argument checks (NCCL 2.30's rules), on 2 thread ranks.
TEST(RmaErrors, BadArguments) {
  run(Launch::kInitAll, 2, [](ncclComm_t& comm, int rank, int nn) {
    float x[8] = {};
    ncclWaitSignalDesc_t d = {1, 1 - rank, 0, 0};
    // Before any window: no one-sided state yet.
    EXPECT_EQ(ncclSignal(1 - rank, 0, 0, 0, comm, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("register a window first"),
              std::string::npos) << ncclGetLastError(comm);
    Window w(comm, 64, 0.0f);
    auto put = [&](const void* src, size_t count, int peer, ncclWindow_t win, size_t off,
                   int sig, int ctx, unsigned flags) {
      return ncclPutSignal(src, count, ncclFloat32, peer, win, off, sig, ctx, flags, comm,
                           nullptr);
    };
    EXPECT_EQ(put(x, 8, 1 - rank, w.win, 0, 1, 0, 0), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("signal index 1"), std::string::npos);
    EXPECT_EQ(put(x, 8, 1 - rank, w.win, 0, 0, 1, 0), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("context 1"), std::string::npos);
    EXPECT_EQ(put(x, 8, 1 - rank, w.win, 0, 0, 0, 4), ncclInvalidArgument);
    EXPECT_EQ(put(x, 8, nn, w.win, 0, 0, 0, 0), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("out of range"), std::string::npos);
    EXPECT_EQ(put(x, 8, -1, w.win, 0, 0, 0, 0), ncclInvalidArgument);
    EXPECT_EQ(put(x, 8, 1 - rank, nullptr, 0, 0, 0, 0), ncclInvalidArgument);
    // Not a window: a plain registration handle, a random pointer, a deregistered one.
    void* regHandle = nullptr;
    MR_NCCL_OK(ncclCommRegister(comm, x, sizeof x, &regHandle));
    EXPECT_EQ(put(x, 8, 1 - rank, reinterpret_cast<ncclWindow_t>(regHandle), 0, 0, 0, 0),
              ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("not a window"), std::string::npos);
    MR_NCCL_OK(ncclCommDeregister(comm, regHandle));
    EXPECT_EQ(put(x, 8, 1 - rank, reinterpret_cast<ncclWindow_t>(x), 0, 0, 0, 0),
              ncclInvalidArgument);
    std::vector<float> other(16);
    ncclWindow_t gone = nullptr;
    MR_NCCL_OK(ncclCommWindowRegister(comm, other.data(), 64, &gone, 0));
    MR_NCCL_OK(ncclCommWindowDeregister(comm, gone));
    EXPECT_EQ(put(x, 8, 1 - rank, gone, 0, 0, 0, 0), ncclInvalidArgument);
    // Out of the window, NULL source, bad type.
    EXPECT_EQ(put(x, 8, 1 - rank, w.win, 64 * 4 - 28, 0, 0, 0), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("do not fit"), std::string::npos);
    EXPECT_EQ(put(x, 1, 1 - rank, w.win, size_t(1) << 40, 0, 0, 0), ncclInvalidArgument);
    EXPECT_EQ(put(nullptr, 8, 1 - rank, w.win, 0, 0, 0, 0), ncclInvalidArgument);
    EXPECT_EQ(ncclPutSignal(x, 8, ncclDataType_t(99), 1 - rank, w.win, 0, 0, 0, 0, comm, nullptr),
              ncclInvalidArgument);
    // Signal and wait checks.
    EXPECT_EQ(ncclSignal(nn, 0, 0, 0, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclSignal(1 - rank, 2, 0, 0, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclSignal(1 - rank, 0, 3, 0, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclSignal(1 - rank, 0, 0, 1, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclWaitSignal(0, &d, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclWaitSignal(1, nullptr, comm, nullptr), ncclInvalidArgument);
    ncclWaitSignalDesc_t bad[] = {{0, 0, 0, 0}, {1, nn, 0, 0}, {1, 0, 1, 0}, {1, 0, 0, 1}};
    for (ncclWaitSignalDesc_t& b : bad)
      EXPECT_EQ(ncclWaitSignal(1, &b, comm, nullptr), ncclInvalidArgument)
          << b.opCnt << " " << b.peer << " " << b.sigIdx << " " << b.ctx;
    void* user = nullptr;
    EXPECT_EQ(ncclWinGetUserPtr(comm, reinterpret_cast<ncclWindow_t>(x), &user),
              ncclInvalidArgument);
    // A bad op inside a group fails the group's end; nothing ran.
    MR_NCCL_OK(ncclGroupStart());
    EXPECT_EQ(put(x, 8, 1 - rank, w.win, 0, 0, 7, 0), ncclInvalidArgument);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
    // Still usable: one good exchange.
    MR_NCCL_OK(put(x, 8, 1 - rank, w.win, 0, 0, 0, 0));
    MR_NCCL_OK(ncclWaitSignal(1, &d, comm, nullptr));
  });
}

// Window registration is collective; inside a group it completes at ncclGroupEnd, so
// one thread can register windows of several communicators.
TEST(RmaErrors, WindowsRegisteredInAGroupFromOneThread) {
  const int n = 3;
  std::vector<ncclComm_t> comms(n);
  MR_NCCL_OK(ncclCommInitAll(comms.data(), n, nullptr));
  std::vector<std::vector<int>> bufs(n, std::vector<int>(n, -1));
  std::vector<ncclWindow_t> wins(n);
  MR_NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    MR_NCCL_OK(ncclCommWindowRegister(comms[r], bufs[r].data(), n * sizeof(int), &wins[r], 0));
  MR_NCCL_OK(ncclGroupEnd());
  std::vector<int> vals(n);
  MR_NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    vals[r] = 100 + r;
    for (int p = 0; p < n; ++p)
      MR_NCCL_OK(ncclPutSignal(&vals[r], 1, ncclInt32, p, wins[r], r * sizeof(int), 0, 0, 0,
                               comms[r], nullptr));
  }
  for (int r = 0; r < n; ++r) {
    std::vector<ncclWaitSignalDesc_t> d;
    for (int p = 0; p < n; ++p) d.push_back({1, p, 0, 0});
    MR_NCCL_OK(ncclWaitSignal(n, d.data(), comms[r], nullptr));
  }
  MR_NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) EXPECT_EQ(bufs[r][p], 100 + p) << "rank " << r;
  for (int r = 0; r < n; ++r) {
    MR_NCCL_OK(ncclCommWindowDeregister(comms[r], wins[r]));
    MR_NCCL_OK(ncclCommDestroy(comms[r]));
  }
}

// Several windows of each communicator registered in one group (nccl-tests registers
// send and receive buffers so): ncclGroupEnd runs the exchanges concurrently, yet every
// rank must pair its i-th window with every peer's i-th. Each rank's windows have
// distinct sizes; a peer's part of window i must be that peer's buffer i, of size i.
TEST(RmaErrors, GroupedWindowsExchangeInCallOrder) {
  const int n = 3, kWins = 4;
  for (int round = 0; round < 10; ++round) {
    std::vector<ncclComm_t> comms(n);
    MR_NCCL_OK(ncclCommInitAll(comms.data(), n, nullptr));
    std::vector<std::vector<std::vector<char>>> bufs(n);
    std::vector<std::vector<ncclWindow_t>> wins(n, std::vector<ncclWindow_t>(kWins));
    MR_NCCL_OK(ncclGroupStart());
    for (int r = 0; r < n; ++r)
      for (int w = 0; w < kWins; ++w) {
        bufs[r].emplace_back(size_t(64 * (w + 1)));
        MR_NCCL_OK(ncclCommWindowRegister(comms[r], bufs[r][w].data(), bufs[r][w].size(),
                                          &wins[r][w], 0));
      }
    MR_NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < n; ++r)
      for (int w = 0; w < kWins; ++w)
        for (int p = 0; p < n; ++p) {
          void* peer = nullptr;
          const size_t last = bufs[p][w].size() - 1;
          ASSERT_EQ(ncclGetPeerDevicePointer(wins[r][w], last, p, &peer), ncclSuccess)
              << "round " << round << " rank " << r << " window " << w << " peer " << p << ": "
              << ncclGetLastError(comms[r]);
          EXPECT_EQ(peer, bufs[p][w].data() + last)
              << "round " << round << " rank " << r << " window " << w << " peer " << p;
        }
    for (int r = 0; r < n; ++r) {
      for (int w = 0; w < kWins; ++w) MR_NCCL_OK(ncclCommWindowDeregister(comms[r], wins[r][w]));
      MR_NCCL_OK(ncclCommDestroy(comms[r]));
    }
  }
}

// A rank waiting for signals from a peer that dies gets an error naming it, quickly;
// a peer that stays alive but never signals gives ncclSystemError at BRAID_TIMEOUT_MS.
class RmaFault : public ::testing::TestWithParam<Layout> {};

TEST_P(RmaFault, DeadPeerFailsTheWait) {
  ScopedEnv env({{"BRAID_PEER_CHECK_MS", "100"}});
  RunOptions opts;
  opts.watchdogSeconds = 90;
  opts.failOnSignal = false;
  auto outcomes = runLayout(
      GetParam(), 2,
      [](ncclComm_t& comm, int rank, int) {
        Window w(comm, 4, 0.0f);
        float one = 1;
        if (rank == 1) {
          // One put (the agent path then has a connection to lose), then die.
          MR_NCCL_OK(ncclPutSignal(&one, 1, ncclFloat32, 0, w.win, 0, 0, 0, 0, comm, nullptr));
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          raise(SIGKILL);
        }
        ncclWaitSignalDesc_t d = {2, 1, 0, 0};  // the second never comes
        const auto t0 = std::chrono::steady_clock::now();
        ncclResult_t r = ncclWaitSignal(1, &d, comm, nullptr);
        const double took = secondsSince(t0);
        EXPECT_EQ(r, ncclRemoteError) << ncclGetLastError(comm);
        EXPECT_LT(took, 10.0) << "BRAID_TIMEOUT_MS is 30 s: the death must be noticed sooner";
        EXPECT_NE(std::string(ncclGetLastError(comm)).find("rank 1"), std::string::npos)
            << ncclGetLastError(comm);
        EXPECT_EQ(w.buf[0], 1.0f);  // the put before the death arrived
        w.win = nullptr;            // the comm is failed: abort frees everything
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        comm = nullptr;
      },
      opts);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[1].signal, SIGKILL);
  EXPECT_TRUE(outcomes[0].exited && outcomes[0].exitCode == 0) << outcomes[0].messages;
}

INSTANTIATE_TEST_SUITE_P(Layouts, RmaFault,
                         ::testing::Values(Layout::kProcShm, Layout::kProcHosts),
                         [](const ::testing::TestParamInfo<Layout>& i) {
                           return std::string(layoutName(i.param));
                         });

TEST(RmaFault, SilentPeerTimesOut) {
  ScopedEnv env({{"BRAID_TIMEOUT_MS", "1500"}});
  run(Launch::kInitAll, 2, [](ncclComm_t& comm, int rank, int) {
    Window w(comm, 4, 0.0f);
    if (rank == 1) return;
    ncclWaitSignalDesc_t d = {1, 1, 0, 0};
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclWaitSignal(1, &d, comm, nullptr), ncclSystemError);
    const double took = secondsSince(t0);
    EXPECT_GE(took, 1.4);
    EXPECT_LT(took, 10.0);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("rank 1: 1"), std::string::npos)
        << ncclGetLastError(comm);
    w.win = nullptr;
  });
}

// ABI: the structs callers allocate have NVIDIA's layout (offsets from NCCL 2.30.7's
// nccl_device/core.h on x86-64 / aarch64 LP64).
TEST(DeviceApiAbi, StructLayouts) {
  EXPECT_EQ(sizeof(ncclDevCommRequirements_t), 96u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, resourceRequirementsList), 16u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, lsaMultimem), 32u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, barrierCount), 36u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, ginForceEnable), 56u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, ginContextCount), 60u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, ginConnectionType), 72u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, ginExclusiveContexts), 76u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, worldGinBarrierCount), 88u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, ginStrongSignalsRequired), 92u);
  EXPECT_EQ(offsetof(ncclDevCommRequirements_t, ginVaSignalsRequired), 93u);
  EXPECT_EQ(sizeof(ncclCommProperties_t), 56u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, rank), 16u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, deviceApiSupport), 32u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, ginType), 36u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, nLsaTeams), 40u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, hostRmaSupport), 44u);
  EXPECT_EQ(offsetof(ncclCommProperties_t, railedGinType), 48u);
  EXPECT_EQ(sizeof(ncclMultimemHandle_t), sizeof(void*));
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  EXPECT_EQ(reqs.size, sizeof reqs);
  EXPECT_EQ(reqs.magic, unsigned(NCCL_API_MAGIC));
  EXPECT_EQ(reqs.ginContextCount, 4);
  EXPECT_EQ(reqs.ginTrafficClass, NCCL_CONFIG_UNDEF_INT);
  EXPECT_TRUE(reqs.ginStrongSignalsRequired && reqs.ginVaSignalsRequired);
}

}  // namespace
}  // namespace mr
