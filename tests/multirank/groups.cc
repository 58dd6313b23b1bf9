// Group semantics: nesting, one thread driving many communicators, p2p posted in any
// order (with send-to-self and several messages per peer), collectives mixed with p2p,
// misuse, and ncclGroupSimulateEnd.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/multirank/data.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

double val(int r, int k, size_t i) { return double((r * 1000 + k * 100 + int64_t(i)) % 16777); }

/// Creates n communicators with ncclCommInitAll; destroys them at scope exit.
struct CommSet {
  explicit CommSet(int n) : comms(size_t(n), nullptr) {
    ncclResult_t r = ncclCommInitAll(comms.data(), n, nullptr);
    EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
  }
  ~CommSet() {
    for (ncclComm_t c : comms) {
      if (c) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
      }
    }
  }
  std::vector<ncclComm_t> comms;
};

TEST(Groups, EndWithoutStartIsInvalidUsage) {
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclGroupEnd"), std::string::npos)
      << ncclGetLastError(nullptr);
}

TEST(Groups, NestedGroupsRunAtOutermostEnd) {
  run(Launch::kInitAll, 3, [](ncclComm_t& comm, int rank, int n) {
    const size_t count = 5000;
    TypedBuffer send(ncclFloat32, count), recv(ncclFloat32, count);
    for (size_t i = 0; i < count; ++i) send.set(i, val(rank, 0, i));
    recv.fill(-1);
    MR_NCCL_OK(ncclGroupStart());
    MR_NCCL_OK(ncclGroupStart());
    MR_NCCL_OK(ncclGroupStart());
    MR_NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    MR_NCCL_OK(ncclGroupEnd());
    MR_NCCL_OK(ncclGroupEnd());
    // Still inside the outermost group: nothing may have run.
    EXPECT_EQ(recv.get(0), -1);
    EXPECT_EQ(recv.get(count - 1), -1);
    MR_NCCL_OK(ncclGroupEnd());
    EXPECT_TRUE(checkElements("nested allreduce", count, [&](size_t i, double* g, double* w) {
      *g = recv.get(i);
      *w = 0;
      for (int r = 0; r < n; ++r) *w += val(r, 0, i);
    }));
  });
}

// The single-thread idiom: one thread drives every rank's communicator in one group.
TEST(Groups, OneThreadDrivesManyCommsAndOps) {
  ScopedEnv env(smallFifoEnv("local"));
  const int n = 4;
  CommSet a(n), b(n);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const size_t count = 3001;  // several FIFOs' worth: the ranks must progress together
  std::vector<TypedBuffer> arSend, arRecv, agRecv, bcBuf;
  for (int r = 0; r < n; ++r) {
    arSend.emplace_back(ncclInt32, count);
    arRecv.emplace_back(ncclInt32, count);
    agRecv.emplace_back(ncclInt32, count * n);
    bcBuf.emplace_back(ncclInt32, count);
    for (size_t i = 0; i < count; ++i) {
      arSend[size_t(r)].set(i, val(r, 1, i));
      bcBuf[size_t(r)].set(i, r == 2 ? val(r, 2, i) : -5);
    }
  }
  MR_NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    MR_NCCL_OK(ncclAllReduce(arSend[size_t(r)].data(), arRecv[size_t(r)].data(), count, ncclInt32,
                             ncclSum, a.comms[size_t(r)], nullptr));
    MR_NCCL_OK(ncclAllGather(arSend[size_t(r)].data(), agRecv[size_t(r)].data(), count, ncclInt32,
                             b.comms[size_t(r)], nullptr));
    MR_NCCL_OK(ncclBcast(bcBuf[size_t(r)].data(), count, ncclInt32, 2, a.comms[size_t(r)],
                         nullptr));
  }
  MR_NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(checkElements("allreduce", count, [&](size_t i, double* g, double* w) {
      *g = arRecv[size_t(r)].get(i);
      *w = 0;
      for (int q = 0; q < n; ++q) *w += val(q, 1, i);
    }));
    EXPECT_TRUE(checkElements("allgather", count * n, [&](size_t j, double* g, double* w) {
      *g = agRecv[size_t(r)].get(j);
      *w = val(int(j / count), 1, j % count);
    }));
    EXPECT_TRUE(checkElements("bcast", count, [&](size_t i, double* g, double* w) {
      *g = bcBuf[size_t(r)].get(i);
      *w = val(2, 2, i);
    }));
  }
}

struct P2pMode {
  Launch launch;
  const char* transport;
};

class GroupP2p : public ::testing::TestWithParam<std::tuple<P2pMode, int>> {};

// Every rank sends kMsgs messages to every peer (itself included) and receives as many
// from each, posting all of them in one group in a rank-specific shuffled order; the
// messages of one (sender, receiver) pair must arrive in posting order. Messages are
// larger than the FIFO, so a wrong matching order would deadlock.
TEST_P(GroupP2p, ShuffledOrdersWithSelfAndRepeatedPeers) {
  const P2pMode mode = std::get<0>(GetParam());
  const int nranks = std::get<1>(GetParam());
  auto envVars = smallFifoEnv(mode.transport);
  envVars.push_back({"BRAID_TIMEOUT_MS", "30000"});
  ScopedEnv env(envVars);
  constexpr int kMsgs = 3;
  run(mode.launch, nranks, [](ncclComm_t& comm, int rank, int n) {
    const size_t count = 1500 + size_t(rank);  // > FIFO; differs per sender
    auto sendCount = [&](int from) { return 1500 + size_t(from); };
    std::vector<TypedBuffer> sends, recvs;
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < kMsgs; ++k) {
        sends.emplace_back(ncclInt32, count);
        for (size_t i = 0; i < count; ++i) sends.back().set(i, val(rank * 16 + p, k, i));
        recvs.emplace_back(ncclInt32, sendCount(p));
        recvs.back().fill(-1);
      }
    struct Post {
      bool send;
      int peer, k;
    };
    std::vector<Post> posts;
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < kMsgs; ++k) {
        posts.push_back({true, p, k});
        posts.push_back({false, p, k});
      }
    std::mt19937 rng(unsigned(rank) * 7919u + 17u);
    std::shuffle(posts.begin(), posts.end(), rng);
    if (rank % 2 == 1) std::reverse(posts.begin(), posts.end());
    // Number the messages of each (direction, peer) 0, 1, 2 in posting order, keeping
    // the shuffled interleaving across peers and directions.
    std::vector<int> nextK(size_t(2 * n), 0);
    for (Post& po : posts) po.k = nextK[size_t(po.peer * 2 + (po.send ? 1 : 0))]++;
    MR_NCCL_OK(ncclGroupStart());
    for (const Post& po : posts) {
      size_t idx = size_t(po.peer * kMsgs + po.k);
      if (po.send) {
        MR_NCCL_OK(ncclSend(sends[idx].data(), count, ncclInt32, po.peer, comm, nullptr));
      } else {
        MR_NCCL_OK(ncclRecv(recvs[idx].data(), sendCount(po.peer), ncclInt32, po.peer, comm,
                            nullptr));
      }
    }
    MR_NCCL_OK(ncclGroupEnd());
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < kMsgs; ++k) {
        const TypedBuffer& b = recvs[size_t(p * kMsgs + k)];
        EXPECT_TRUE(checkElements("message", sendCount(p), [&](size_t i, double* g, double* w) {
          *g = b.get(i);
          *w = val(p * 16 + rank, k, i);
        })) << "rank " << rank << " message " << k << " from rank " << p;
      }
  });
}

INSTANTIATE_TEST_SUITE_P(
    All, GroupP2p,
    ::testing::Combine(::testing::Values(P2pMode{Launch::kInitAll, "local"},
                                         P2pMode{Launch::kThreads, "shm"},
                                         P2pMode{Launch::kProcesses, "socket"}),
                       ::testing::Values(1, 2, 3, 5)),
    [](const ::testing::TestParamInfo<std::tuple<P2pMode, int>>& info) {
      const P2pMode m = std::get<0>(info.param);
      return std::string(launchName(m.launch)) + "_" + m.transport + "_" +
             std::to_string(std::get<1>(info.param)) + "ranks";
    });

TEST(Groups, CollectivesMixedWithP2p) {
  ScopedEnv env(smallFifoEnv("shm"));
  run(Launch::kThreads, 4, [](ncclComm_t& comm, int rank, int n) {
    const size_t count = 2000;
    TypedBuffer arIn(ncclInt32, count), arOut(ncclInt32, count), p2pIn(ncclInt32, count),
        p2pOut(ncclInt32, count), ag(ncclInt32, count * n);
    for (size_t i = 0; i < count; ++i) {
      arIn.set(i, val(rank, 3, i));
      p2pIn.set(i, val(rank, 4, i));
    }
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    MR_NCCL_OK(ncclGroupStart());
    MR_NCCL_OK(ncclAllReduce(arIn.data(), arOut.data(), count, ncclInt32, ncclSum, comm, nullptr));
    MR_NCCL_OK(ncclRecv(p2pOut.data(), count, ncclInt32, prev, comm, nullptr));
    MR_NCCL_OK(ncclSend(p2pIn.data(), count, ncclInt32, next, comm, nullptr));
    MR_NCCL_OK(ncclAllGather(p2pIn.data(), ag.data(), count, ncclInt32, comm, nullptr));
    MR_NCCL_OK(ncclGroupEnd());
    EXPECT_TRUE(checkElements("allreduce", count, [&](size_t i, double* g, double* w) {
      *g = arOut.get(i);
      *w = 0;
      for (int r = 0; r < n; ++r) *w += val(r, 3, i);
    }));
    EXPECT_TRUE(checkElements("recv", count, [&](size_t i, double* g, double* w) {
      *g = p2pOut.get(i);
      *w = val(prev, 4, i);
    }));
    EXPECT_TRUE(checkElements("allgather", count * n, [&](size_t j, double* g, double* w) {
      *g = ag.get(j);
      *w = val(int(j / count), 4, j % count);
    }));
  });
}

TEST(Groups, SimulateEndEstimatesWithoutRunning) {
  const int n = 2;
  CommSet set(n);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const size_t count = 1 << 20;
  std::vector<TypedBuffer> send, recv;
  for (int r = 0; r < n; ++r) {
    send.emplace_back(ncclFloat32, count);
    recv.emplace_back(ncclFloat32, count);
    send.back().fill(1);
    recv.back().fill(-3);
  }
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  MR_NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    MR_NCCL_OK(ncclAllReduce(send[size_t(r)].data(), recv[size_t(r)].data(), count, ncclFloat32,
                             ncclSum, set.comms[size_t(r)], nullptr));
  MR_NCCL_OK(ncclGroupSimulateEnd(&sim));
  EXPECT_GT(sim.estimatedTime, 0.0f);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(recv[size_t(r)].get(0), -3) << "simulated group ran on rank " << r;
    EXPECT_EQ(recv[size_t(r)].get(count - 1), -3) << "simulated group ran on rank " << r;
  }
  // The group is closed: a real one still works afterwards.
  MR_NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    MR_NCCL_OK(ncclAllReduce(send[size_t(r)].data(), recv[size_t(r)].data(), count, ncclFloat32,
                             ncclSum, set.comms[size_t(r)], nullptr));
  MR_NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) EXPECT_EQ(recv[size_t(r)].get(count - 1), 2);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "no group should be open any more";
}

}  // namespace
}  // namespace mr
