// The BraidSwitch collnet against in-process switches: every datatype and op of
// all-reduce (counts 0, 1, 7, 1000003; several in flight; in place), all-gather and
// reduce-scatter with full and partial windows over several parts, 2-4 members on one
// switch and 4 members on a two-level tree (leaves with interleaved ranks). Results
// are checked element-wise against references computed here, in the switch's order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "src/net/socket.h"
#include "src/tools/switch_server/switch_server.h"
#include "transports/collnet_switch/wire.h"
#include "tests/switch/harness.h"

namespace {

using namespace switchtest;

/// Checks that got == want (n bytes of elements of size ts); reports the first
/// difference. Returns whether they match.
bool sameBytes(const char* got, const char* want, size_t n, size_t ts, const std::string& what) {
  if (n == 0 || std::memcmp(got, want, n) == 0) return true;
  size_t i = 0;
  while (i < n && got[i] == want[i]) ++i;
  ADD_FAILURE() << what << ": first difference at element " << i / ts << " (byte " << i
                << " of " << n << ")";
  return false;
}

braid::SwitchOptions quietOptions() {
  braid::SwitchOptions o;
  o.timeoutMs = 20000;
  return o;
}

// ---- all-reduce: every type x op x count, one switch ------------------------------------

void allReduceMatrix(std::vector<Member>& m, const std::vector<std::vector<int>>& order,
                     const std::vector<size_t>& counts) {
  const int n = int(m.size());
  const size_t maxCount = *std::max_element(counts.begin(), counts.end());
  std::vector<std::vector<char>> ref(counts.size(), std::vector<char>(maxCount * 8));
  Barrier bar(n);
  runThreads(n, [&](int r) {
    std::vector<std::vector<char>> send(counts.size()), recv(counts.size());
    for (ncclDataType_t t : kAllTypes) {
      const size_t ts = braid::dataTypeSize(t);
      for (ncclRedOp_t op : kAllOps) {
        const std::string what = std::string(braid::dataTypeName(t)) + " " +
                                 braid::redOpName(op) + " rank " + std::to_string(r);
        // My slice of every reference.
        for (size_t c = 0; c < counts.size(); ++c) {
          const uint64_t seed = uint64_t(t) * 131 + uint64_t(op) * 17 + c;
          const size_t b = counts[c] * size_t(r) / size_t(n), e = counts[c] * size_t(r + 1) / size_t(n);
          reference(t, op, seed, order, b, e, ref[c].data() + b * ts);
        }
        // Post them all (several in flight), some in place.
        std::vector<void*> reqs(counts.size(), nullptr);
        std::vector<char*> out(counts.size());
        for (size_t c = 0; c < counts.size(); ++c) {
          const uint64_t seed = uint64_t(t) * 131 + uint64_t(op) * 17 + c;
          send[c].resize(counts[c] * ts + 1);
          fillInput(t, seed, r, send[c].data(), counts[c]);
          const bool inPlace = c == 2 || (c == 3 && (int(t) + int(op)) % 2 == 1);
          if (inPlace) {
            out[c] = send[c].data();
          } else {
            recv[c].assign(counts[c] * ts + 1, char(0xCD));
            out[c] = recv[c].data();
          }
          ASSERT_EQ(net()->iallreduce(m[size_t(r)].coll, send[c].data(), out[c], counts[c], t, op,
                                      nullptr, nullptr, &reqs[c]),
                    ncclSuccess) << what;
          ASSERT_NE(reqs[c], nullptr) << what;
        }
        for (size_t c = 0; c < counts.size(); ++c) {
          int size = -1;
          ASSERT_EQ(waitRequest(reqs[c], &size), ncclSuccess) << what << "\n" << allWarnings();
          EXPECT_EQ(size_t(size), counts[c] * ts) << what;
        }
        bar.wait();  // every slice of the references is there
        for (size_t c = 0; c < counts.size(); ++c) {
          sameBytes(out[c], ref[c].data(), counts[c] * ts, ts,
                    what + " count " + std::to_string(counts[c]));
          if (out[c] == recv[c].data()) {
            EXPECT_EQ(recv[c].back(), char(0xCD)) << what << ": overrun";
          }
        }
        bar.wait();  // nobody still reads the references
      }
    }
  });
}

class SwitchAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(SwitchAllReduce, EveryTypeOpCountInFlightAndInPlace) {
  const int n = GetParam();
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", quietOptions());
  ASSERT_FALSE(addr.empty()) << server.error();
  Watchdog wd(150, "allreduce matrix");
  auto m = prepare(std::vector<std::string>(size_t(n), addr), 1000 + uint64_t(n), 0x5eed);
  connectAll(m);
  ASSERT_EQ(server.groupCount(), 1);
  allReduceMatrix(m, flatOrder(n), {0, 1, 7, 1000003});
  closeAll(m);
  EXPECT_TRUE(pollUntil([&] { return server.groupCount() == 0; }, 5000))
      << server.groupCount() << " groups left after clean closes";
}

INSTANTIATE_TEST_SUITE_P(Members, SwitchAllReduce, ::testing::Values(2, 3, 4));

// ---- all-gather and reduce-scatter windows ----------------------------------------------

struct Window {
  size_t off, bytes;
};

/// Windows (in elements of `unit` bytes) over n blocks of bpr units: full, crossing
/// blocks, inside one block, the last unit, empty.
std::vector<Window> windowsFor(int n, size_t bpr) {
  const size_t total = size_t(n) * bpr;
  return {{0, total}, {bpr / 2, total - bpr}, {bpr + 5, 50}, {total - 1, 1}, {0, 0}};
}

/// Splits `bytes` into three uneven parts (one empty) at multiples of `unit`.
std::vector<size_t> splitParts(size_t bytes, size_t unit) {
  const size_t units = bytes / unit;
  const size_t a = units / 3 * unit, b = units / 4 * unit;
  return {a, 0, b, bytes - a - b};
}

void allGatherWindows(std::vector<Member>& m, const std::vector<size_t>& bprs) {
  const int n = int(m.size());
  runThreads(n, [&](int r) {
    for (size_t bpr : bprs) {
      const uint64_t seed = bpr * 7 + 3;
      std::vector<char> send(bpr);
      for (size_t j = 0; j < bpr; ++j) send[j] = char(agByte(seed, r, j));
      const std::vector<Window> ws = windowsFor(n, bpr);
      std::vector<std::vector<std::vector<char>>> parts(ws.size());
      std::vector<void*> reqs(ws.size());
      for (size_t w = 0; w < ws.size(); ++w) {
        std::vector<ncclNetSGE_v11_t> sges;
        for (size_t len : splitParts(ws[w].bytes, 1)) {
          parts[w].emplace_back(len + 1, char(0xAB));
          sges.push_back({nullptr, parts[w].back().data(), len});
        }
        ASSERT_EQ(net()->iallgather(m[size_t(r)].coll, send.data(), int(sges.size()), sges.data(),
                                    bpr, ws[w].off, ws[w].bytes, nullptr, &reqs[w]),
                  ncclSuccess);
        ASSERT_NE(reqs[w], nullptr);
      }
      for (size_t w = 0; w < ws.size(); ++w) {
        const std::string what = "allgather bpr " + std::to_string(bpr) + " window [" +
                                 std::to_string(ws[w].off) + ", +" + std::to_string(ws[w].bytes) +
                                 ") rank " + std::to_string(r);
        int size = -1;
        ASSERT_EQ(waitRequest(reqs[w], &size), ncclSuccess) << what << "\n" << allWarnings();
        EXPECT_EQ(size_t(size), ws[w].bytes) << what;
        size_t g = ws[w].off;
        for (const std::vector<char>& p : parts[w]) {
          std::vector<char> want(p.size() - 1);
          for (size_t k = 0; k < want.size(); ++k, ++g) want[k] = char(agByte(seed, int(g / bpr), g % bpr));
          sameBytes(p.data(), want.data(), want.size(), 1, what);
          EXPECT_EQ(p.back(), char(0xAB)) << what << ": overrun";
        }
      }
    }
  });
}

struct RsCase {
  ncclDataType_t type;
  ncclRedOp_t op;
};

void reduceScatterWindows(std::vector<Member>& m, const std::vector<std::vector<int>>& order,
                          const std::vector<size_t>& bprs) {
  const int n = int(m.size());
  const RsCase cases[] = {{ncclInt32, ncclSum}, {ncclFloat32, ncclSum}, {ncclBfloat16, ncclMax},
                          {ncclUint8, ncclProd}, {ncclFloat64, ncclMin}, {ncclFloat16, ncclSum}};
  runThreads(n, [&](int r) {
    for (const RsCase& k : cases) {
      const size_t ts = braid::dataTypeSize(k.type);
      for (size_t bpr : bprs) {  // elements per rank
        const uint64_t seed = uint64_t(k.type) * 11 + uint64_t(k.op) + bpr;
        std::vector<char> input(size_t(n) * bpr * ts);
        fillInput(k.type, seed, r, input.data(), size_t(n) * bpr);
        const std::vector<Window> ws = windowsFor(n, bpr);
        std::vector<std::vector<char>> recv(ws.size());
        std::vector<void*> reqs(ws.size());
        for (size_t w = 0; w < ws.size(); ++w) {
          std::vector<ncclNetSGE_v11_t> sges;
          size_t at = ws[w].off * ts;
          for (size_t len : splitParts(ws[w].bytes * ts, ts)) {
            sges.push_back({nullptr, input.data() + at, len});
            at += len;
          }
          recv[w].assign(bpr * ts + 1, char(0xEE));
          ASSERT_EQ(net()->ireducescatter(m[size_t(r)].coll, int(sges.size()), sges.data(),
                                          recv[w].data(), bpr * ts, ws[w].off * ts,
                                          ws[w].bytes * ts, k.type, k.op, nullptr, &reqs[w]),
                    ncclSuccess);
          ASSERT_NE(reqs[w], nullptr);
        }
        for (size_t w = 0; w < ws.size(); ++w) {
          const std::string what = std::string("reducescatter ") + braid::dataTypeName(k.type) +
                                   " " + braid::redOpName(k.op) + " bpr " + std::to_string(bpr) +
                                   " window [" + std::to_string(ws[w].off) + ", +" +
                                   std::to_string(ws[w].bytes) + ") rank " + std::to_string(r);
          int size = -1;
          ASSERT_EQ(waitRequest(reqs[w], &size), ncclSuccess) << what << "\n" << allWarnings();
          // My block is [r*bpr, (r+1)*bpr); the window's part of it is reduced, the
          // rest untouched.
          const size_t b0 = size_t(r) * bpr, b1 = b0 + bpr;
          const size_t g0 = std::max(b0, ws[w].off);
          const size_t g1 = std::min(b1, ws[w].off + ws[w].bytes);
          std::vector<char> want(bpr * ts + 1, char(0xEE));
          if (g1 > g0) reference(k.type, k.op, seed, order, g0, g1, want.data() + (g0 - b0) * ts);
          EXPECT_EQ(size_t(size), g1 > g0 ? (g1 - g0) * ts : 0) << what;
          sameBytes(recv[w].data(), want.data(), want.size(), ts, what);
        }
      }
    }
  });
}

TEST(SwitchCollNet, AllGatherAndReduceScatterWindows) {
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", quietOptions());
  ASSERT_FALSE(addr.empty()) << server.error();
  Watchdog wd(120, "window collectives");
  for (int n : {2, 3}) {
    auto m = prepare(std::vector<std::string>(size_t(n), addr), 2000 + uint64_t(n), 0x77);
    connectAll(m);
    allGatherWindows(m, {1000, 300001});
    reduceScatterWindows(m, flatOrder(n), {1000, 100003});
    closeAll(m);
  }
  EXPECT_TRUE(pollUntil([&] { return server.groupCount() == 0; }, 5000));
}

// ---- a two-level tree ---------------------------------------------------------------------

TEST(SwitchCollNet, TwoLevelTreeInterleavedRanks) {
  braid::SwitchServer root, leafA, leafB;
  braid::SwitchOptions o = quietOptions();
  const std::string rootAddr = root.start("127.0.0.1:0", o);
  ASSERT_FALSE(rootAddr.empty()) << root.error();
  o.parent = rootAddr;
  const std::string a = leafA.start("127.0.0.1:0", o);
  const std::string b = leafB.start("127.0.0.1:0", o);
  ASSERT_FALSE(a.empty() || b.empty());
  Watchdog wd(120, "two-level tree");
  // Ranks 0 and 2 use leaf A, 1 and 3 leaf B: A reduces (0, 2), B (1, 3), the root A, B.
  auto m = prepare({a, b, a, b}, 3000, 0x1234);
  connectAll(m);
  EXPECT_EQ(root.groupCount(), 1);
  EXPECT_EQ(leafA.groupCount(), 1);
  EXPECT_EQ(leafB.groupCount(), 1);
  const std::vector<std::vector<int>> tree = {{0, 2}, {1, 3}};
  allReduceMatrix(m, tree, {0, 1, 7, 100003});
  allGatherWindows(m, {1000, 300001});
  reduceScatterWindows(m, tree, {1000, 100003});
  closeAll(m);
  for (braid::SwitchServer* s : {&root, &leafA, &leafB})
    EXPECT_TRUE(pollUntil([&] { return s->groupCount() == 0; }, 5000))
        << s->address() << " still has " << s->groupCount() << " groups";
}

// ---- many requests in flight ---------------------------------------------------------------

// 64 requests outstanding per member (a 65th is refused with a null request, to be
// retried); they complete in posting order: once the last is done, every earlier one
// is done at its first test.
TEST(SwitchCollNet, SixtyFourRequestsInFlightCompleteInOrder) {
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", quietOptions());
  ASSERT_FALSE(addr.empty());
  Watchdog wd(60, "many in flight");
  auto m = prepare({addr, addr}, 2500, 9);
  connectAll(m);
  constexpr int kReqs = 64;
  runThreads(2, [&](int r) {
    std::vector<std::vector<int64_t>> send(kReqs), recv(kReqs);
    std::vector<void*> reqs(kReqs, nullptr);
    for (int k = 0; k < kReqs; ++k) {
      const size_t count = size_t(1 + k * 997 % 20000);
      send[size_t(k)].resize(count);
      recv[size_t(k)].assign(count, -1);
      fillInput(ncclInt64, uint64_t(k), r, send[size_t(k)].data(), count);
      ASSERT_EQ(net()->iallreduce(m[size_t(r)].coll, send[size_t(k)].data(), recv[size_t(k)].data(),
                                  count, ncclInt64, ncclMax, nullptr, nullptr, &reqs[size_t(k)]),
                ncclSuccess);
      ASSERT_NE(reqs[size_t(k)], nullptr) << "request " << k;
    }
    void* extra = &extra;
    int64_t x = 0;
    EXPECT_EQ(net()->iallreduce(m[size_t(r)].coll, &x, &x, 1, ncclInt64, ncclSum, nullptr, nullptr,
                                &extra),
              ncclSuccess);
    EXPECT_EQ(extra, nullptr) << "a 65th outstanding request should be refused (retry later)";
    int size = 0;
    ASSERT_EQ(waitRequest(reqs[kReqs - 1], &size), ncclSuccess) << allWarnings();
    for (int k = 0; k < kReqs - 1; ++k) {
      int done = 0;
      ASSERT_EQ(net()->test(reqs[size_t(k)], &done, &size), ncclSuccess);
      EXPECT_EQ(done, 1) << "request " << k << " is not done, but request " << kReqs - 1 << " is";
      EXPECT_EQ(size_t(size), send[size_t(k)].size() * 8);
    }
    for (int k = 0; k < kReqs; ++k) {
      std::vector<int64_t> want(send[size_t(k)].size());
      reference(ncclInt64, ncclMax, uint64_t(k), flatOrder(2), 0, want.size(), want.data());
      EXPECT_TRUE(recv[size_t(k)] == want) << "request " << k;
    }
  });
  closeAll(m);
}

// ---- streaming -----------------------------------------------------------------------------

// Two members (raw sockets speaking the wire protocol) send half of an all-reduce's
// input: the switch returns the reduced first half, piece by piece, before the rest is
// sent; then the rest and kDone.
TEST(SwitchServer, ReducesAndAnswersPieceByPiece) {
  braid::SwitchOptions o = quietOptions();
  o.pieceBytes = 4096;
  braid::SwitchServer server;
  const std::string addr = server.start("127.0.0.1:0", o);
  ASSERT_FALSE(addr.empty());
  Watchdog wd(30, "streaming");
  braid::SockAddr sa;
  ASSERT_TRUE(braid::SockAddr::parse(addr, &sa));
  braid::Socket s[2];
  constexpr size_t kCount = 4096, kHalf = kCount / 2;
  std::vector<int32_t> in[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(s[r].connect(sa, 5000, nullptr), ncclSuccess);
    braid::Hello h;
    h.msg.magic = braid::wire::kMagic;
    h.msg.version = braid::wire::kVersion;
    h.msg.groupId = 555;
    h.msg.nranks = 2;
    h.msg.rank = uint32_t(r);
    h.msg.nleaves = 1;
    h.leafOf = {0, 0};
    const std::string bytes = h.encode();
    ASSERT_EQ(s[r].sendAll(bytes.data(), bytes.size(), 5000, nullptr), ncclSuccess);
    in[r].resize(kCount);
    for (size_t i = 0; i < kCount; ++i) in[r][i] = int32_t(i * 3 + size_t(r) * 1000);
  }
  for (int r = 0; r < 2; ++r) {
    braid::wire::FrameHeader f{};
    ASSERT_EQ(s[r].recvAll(&f, sizeof f, 5000, nullptr), ncclSuccess);
    ASSERT_EQ(f.kind, braid::wire::kWelcome);
  }
  braid::wire::OpDesc d{};
  d.coll = braid::wire::kAllReduce;
  d.dtype = ncclInt32;
  d.redop = ncclSum;
  d.count = kCount;
  auto sendData = [&](int r, size_t from, size_t n) {
    std::string f = braid::encodeFrame(braid::wire::kData, 0, in[r].data() + from, n * 4);
    ASSERT_EQ(s[r].sendAll(f.data(), f.size(), 5000, nullptr), ncclSuccess);
  };
  // Reads result frames on member 0 until `n` elements from `from` came; checks them.
  auto expectResult = [&](size_t from, size_t n, bool thenDone) {
    size_t got = 0;
    std::vector<int32_t> out(n);
    while (got < n) {
      braid::wire::FrameHeader f{};
      ASSERT_EQ(s[0].recvAll(&f, sizeof f, 5000, nullptr), ncclSuccess) << "after " << got;
      ASSERT_EQ(f.kind, braid::wire::kData);
      ASSERT_LE(f.len, 4096u) << "pieces are at most pieceBytes";
      ASSERT_LE(got * 4 + f.len, n * 4);
      ASSERT_EQ(s[0].recvAll(reinterpret_cast<char*>(out.data()) + got * 4, f.len, 5000, nullptr),
                ncclSuccess);
      got += f.len / 4;
    }
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], in[0][from + i] + in[1][from + i]) << i;
    if (thenDone) {
      braid::wire::FrameHeader f{};
      ASSERT_EQ(s[0].recvAll(&f, sizeof f, 5000, nullptr), ncclSuccess);
      EXPECT_EQ(f.kind, braid::wire::kDone);
    }
  };
  for (int r = 0; r < 2; ++r) {
    const std::string op = braid::encodeFrame(braid::wire::kOp, 0, &d, sizeof d);
    ASSERT_EQ(s[r].sendAll(op.data(), op.size(), 5000, nullptr), ncclSuccess);
    sendData(r, 0, kHalf);
  }
  expectResult(0, kHalf, false);  // the first half, while the second is not yet sent
  for (int r = 0; r < 2; ++r) sendData(r, kHalf, kHalf);
  expectResult(kHalf, kHalf, true);
}

// ---- table basics -------------------------------------------------------------------------

TEST(SwitchCollNet, TableBasics) {
  const ncclCollNet_v11_t* t = net();
  ASSERT_NE(t, nullptr);
  EXPECT_STREQ(t->name, "BraidSwitch");
  unsetenv("BRAID_SWITCH");
  int ndev = -1;
  EXPECT_EQ(t->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 0);
  setenv("BRAID_SWITCH", "127.0.0.1:5999", 1);
  EXPECT_EQ(t->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 1);
  ncclNetProperties_v11_t p{};
  ASSERT_EQ(t->getProperties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "braid-switch@127.0.0.1:5999");
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.speed, 10000);
  for (ncclDataType_t type : kAllTypes)
    for (int op = 0; op < int(ncclNumOps); ++op) {
      int ok = -1;
      EXPECT_EQ(t->reduceSupport(type, ncclRedOp_t(op), &ok), ncclSuccess);
      EXPECT_EQ(ok, op == ncclAvg ? 0 : 1) << braid::dataTypeName(type) << " op " << op;
    }
  int ok = -1;
  EXPECT_EQ(t->reduceSupport(ncclFloat32, ncclRedOp_t(int(ncclNumOps) + 3), &ok), ncclSuccess);
  EXPECT_EQ(ok, 0);
  void* mh = nullptr;
  EXPECT_EQ(t->regMr(nullptr, &ok, sizeof ok, NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_NE(mh, nullptr);
  EXPECT_EQ(t->deregMr(nullptr, mh), ncclSuccess);
  EXPECT_NE(t->regMr(nullptr, &ok, sizeof ok, NCCL_PTR_CUDA, &mh), ncclSuccess);
  EXPECT_NE(t->regMrDmaBuf(nullptr, &ok, sizeof ok, NCCL_PTR_DMABUF, 0, 3, &mh), ncclSuccess);
  void* req = nullptr;
  int done = 0, size = -1;
  EXPECT_EQ(t->iflush(nullptr, &ok, sizeof ok, nullptr, &req), ncclSuccess);
  EXPECT_EQ(t->test(req, &done, &size), ncclSuccess);
  EXPECT_EQ(done, 1);
}

}  // namespace
