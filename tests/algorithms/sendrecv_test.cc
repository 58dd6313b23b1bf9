// Grouped send/recv (the p2p builder) in the simulator: random groups where every
// rank issues its sends and receives in a random order across peers (only the order
// per peer and direction is kept, as NCCL requires), self sends, zero counts,
// messages much larger than a FIFO, and sends from / receives into either buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "tests/sim/simulator.h"
#include "src/reduce/reducer.h"
#include "tests/algorithms/sim_case.h"

namespace braid {
namespace algotest {
namespace {

struct Message {
  int src, dst;
  uint64_t count;
  Buf srcBuf, dstBuf;
  uint64_t srcOff = 0, dstOff = 0;  // assigned when laying out buffers
};

/// Lays out, runs and checks one group of messages. Returns "" on success.
std::string runGroup(int n, std::vector<Message> msgs, const Setup& setup, uint32_t seed,
                     bool direct) {
  const size_t ts = 4;  // int32 elements: value = message id * 65536 + index
  std::mt19937 rng(seed);
  // Each rank's two buffers: [send, recv] element counts, filled by layout.
  std::vector<std::array<uint64_t, 2>> used(n, {0, 0});
  for (Message& m : msgs) {
    m.srcOff = used[m.src][int(m.srcBuf)];
    used[m.src][int(m.srcBuf)] += m.count;
    m.dstOff = used[m.dst][int(m.dstBuf)];
    used[m.dst][int(m.dstBuf)] += m.count;
  }
  // Memory (with a canary everywhere not written by a message's source data).
  std::vector<std::array<std::vector<int32_t>, 2>> bufs(n), expect(n);
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < 2; ++b)
      bufs[r][b].assign(used[r][b] + 1, int32_t(0x7A7A0000 + r * 16 + b));
  for (size_t id = 0; id < msgs.size(); ++id)
    for (uint64_t i = 0; i < msgs[id].count; ++i)
      bufs[msgs[id].src][int(msgs[id].srcBuf)][msgs[id].srcOff + i] = int32_t(id * 65536 + i);
  expect = bufs;
  for (size_t id = 0; id < msgs.size(); ++id)
    for (uint64_t i = 0; i < msgs[id].count; ++i)
      expect[msgs[id].dst][int(msgs[id].dstBuf)][msgs[id].dstOff + i] = int32_t(id * 65536 + i);

  // Per-rank op lists: messages in global order, then shuffled across (peer, direction)
  // keeping each (peer, direction)'s own order.
  std::vector<Plan> plans(n);
  std::vector<SimRank> ranks(n);
  for (int r = 0; r < n; ++r) {
    std::vector<P2pOp> ops;
    for (const Message& m : msgs) {
      if (m.src == r) ops.push_back(P2pOp{true, m.dst, m.srcBuf, m.srcOff, m.count});
      if (m.dst == r) ops.push_back(P2pOp{false, m.src, m.dstBuf, m.dstOff, m.count});
    }
    // Interleave: repeatedly take the head of a random non-empty (peer, dir) queue.
    std::vector<std::vector<P2pOp>> queues;
    std::vector<std::pair<int, bool>> keys;
    for (const P2pOp& op : ops) {
      auto key = std::make_pair(op.peer, op.isSend);
      size_t q = std::find(keys.begin(), keys.end(), key) - keys.begin();
      if (q == keys.size()) {
        keys.push_back(key);
        queues.emplace_back();
      }
      queues[q].push_back(op);
    }
    std::vector<size_t> heads(queues.size(), 0);
    PlanArgs args;
    args.coll = Coll::kSendRecv;
    args.nranks = n;
    args.rank = r;
    args.typeSize = ts;
    for (size_t left = ops.size(); left > 0; --left) {
      size_t q;
      do q = rng() % queues.size(); while (heads[q] == queues[q].size());
      args.p2p.push_back(queues[q][heads[q]++]);
    }
    if (buildPlan(args, setup.params, findAlgorithm(Coll::kSendRecv, "p2p"), &plans[r]) !=
        ncclSuccess)
      return "buildPlan failed on rank " + std::to_string(r);
    ranks[r].plan = &plans[r];
    ranks[r].bufs.send = bufs[r][0].data();
    ranks[r].bufs.recv = bufs[r][1].data();
    ranks[r].sendElems = used[r][0];
    ranks[r].recvElems = used[r][1];
    ranks[r].reducer = Reducer(ncclInt32, ncclSum, n);
    // Zero-copy only when no message writes this rank's send buffer.
    ranks[r].allowDirect = direct;
    for (const Message& m : msgs)
      if (m.dst == r && m.dstBuf == Buf::kSend) ranks[r].allowDirect = false;
  }
  std::string bad = checkPlans(ranks, setup.params.nChannels, ts, setup.params.chunkBytes);
  if (!bad.empty()) return "plan check: " + bad;
  SimGeometry geo = setup.geo;
  geo.direct = direct;
  Simulator sim(n, setup.params.nChannels, geo);
  SimResult res = sim.run(ranks);
  if (!res.ok) return res.error;
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < 2; ++b)
      for (size_t i = 0; i < bufs[r][b].size(); ++i)
        if (bufs[r][b][i] != expect[r][b][i])
          return "rank " + std::to_string(r) + (b ? " recv" : " send") + " element " +
                 std::to_string(i) + ": got " + std::to_string(bufs[r][b][i]) + ", expected " +
                 std::to_string(expect[r][b][i]);
  return "";
}

TEST(SendRecv, RandomGroupsEveryRankCount) {
  uint32_t seed = 1;
  for (int n = 1; n <= 16; ++n) {
    for (int trial = 0; trial < 6; ++trial, ++seed) {
      std::mt19937 rng(seed);
      std::vector<Message> msgs;
      const int nmsgs = 1 + int(rng() % uint32_t(3 * n));
      const uint64_t sizes[] = {0, 1, 7, 33, 100, 257, 1000};
      for (int i = 0; i < nmsgs; ++i) {
        Message m;
        m.src = int(rng() % uint32_t(n));
        m.dst = int(rng() % uint32_t(n));
        m.count = sizes[rng() % 7];
        m.srcBuf = rng() % 4 == 0 ? Buf::kRecv : Buf::kSend;
        m.dstBuf = rng() % 4 == 0 ? Buf::kSend : Buf::kRecv;
        msgs.push_back(m);
      }
      const int setup = trial % 2 == 0 ? 0 : 1 + trial / 2;  // 0, 1, 0, 2, 0, 3
      const std::string err = runGroup(n, msgs, setupAt(setup), seed, trial == 5);
      ASSERT_EQ(err, "") << "nranks " << n << " seed " << seed << " setup "
                         << setupAt(setup).name;
    }
  }
}

TEST(SendRecv, AllToAllAsSendsThenRecvsBeyondFifoCapacity) {
  // Every rank posts all its sends before all its receives, each message 16x a FIFO.
  for (int n : {2, 3, 8}) {
    std::vector<Message> msgs;
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) msgs.push_back(Message{s, d, 1024, Buf::kSend, Buf::kRecv});
    ASSERT_EQ(runGroup(n, msgs, setupAt(0), 7, false), "") << "nranks " << n;
  }
}

TEST(SendRecv, SeveralMessagesToOnePeerKeepTheirOrder) {
  std::vector<Message> msgs;
  for (int i = 0; i < 5; ++i) {
    msgs.push_back(Message{0, 1, uint64_t(10 + i * 50), Buf::kSend, Buf::kRecv});
    msgs.push_back(Message{1, 0, uint64_t(200 - i * 30), Buf::kSend, Buf::kRecv});
    msgs.push_back(Message{1, 1, uint64_t(3 + i), Buf::kSend, Buf::kRecv});  // self
  }
  ASSERT_EQ(runGroup(2, msgs, setupAt(1), 3, true), "");
}

TEST(SendRecv, EmptyGroupAndZeroCounts) {
  EXPECT_EQ(runGroup(3, {}, setupAt(0), 1, false), "");
  EXPECT_EQ(runGroup(3, {Message{0, 2, 0, Buf::kSend, Buf::kRecv}}, setupAt(0), 1, false), "");
  PlanArgs args;
  args.coll = Coll::kSendRecv;
  args.nranks = 3;
  args.p2p.push_back(P2pOp{true, 2, Buf::kSend, 0, 0});
  Plan plan;
  ASSERT_EQ(buildPlan(args, PlanParams{}, nullptr, &plan), ncclSuccess);
  EXPECT_EQ(plan.programs.size(), 0u) << plan.toString();
}

}  // namespace
}  // namespace algotest
}  // namespace braid
