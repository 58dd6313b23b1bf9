// The p2p transport's rule (which rank pairs may share device memory) and its
// descriptor, with device facts supplied by the test: no GPU needed.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "tests/transports/transport_test_util.h"
#include "transports/p2p/p2p_transport.h"

namespace braid {
namespace {

/// A machine with GPUs at the given bus ids (index = position); peer access as listed.
struct FakeMachine {
  std::vector<std::string> visible;
  std::map<std::pair<int, int>, bool> access;  ///< missing: no access
  P2pDeviceQuery query() const {
    P2pDeviceQuery q;
    q.deviceOf = [this](const char* bus) {
      for (size_t i = 0; i < visible.size(); ++i)
        if (sameBusId(visible[i].c_str(), bus)) return int(i);
      return -1;
    };
    q.canAccessPeer = [this](int a, int b) {
      if (a == b) return true;
      auto it = access.find({a, b});
      return it != access.end() && it->second;
    };
    return q;
  }
};

PeerInfo gpuRank(int rank, int dev, const char* bus, uint64_t process, uint64_t host = 1,
                 uint64_t machine = 1) {
  PeerInfo p = testing_util::makePeer(rank, host, process);
  p.machineHash = machine;
  p.cudaDev = dev;
  std::snprintf(p.busId, sizeof p.busId, "%s", bus);
  return p;
}

struct Row {
  const char* what;
  PeerInfo a, b;
  bool expect;
};

TEST(P2pRule, TruthTable) {
  FakeMachine m;
  m.visible = {"0000:1b:00.0", "0000:3B:00.0", "0000:5e:00.0"};
  m.access[{0, 1}] = m.access[{1, 0}] = true;
  m.access[{0, 2}] = true;  // one direction only
  const P2pDeviceQuery q = m.query();
  const char* g0 = "0000:1b:00.0";
  const char* g1 = "000000:3b:00.0";  // another spelling of visible[1]
  const char* g2 = "0000:5e:00.0";
  const char* hidden = "0000:af:00.0";  // a GPU this process cannot see
  const std::vector<Row> rows = {
      {"same process, same GPU", gpuRank(0, 0, g0, 7), gpuRank(1, 0, g0, 7), true},
      {"other processes, same GPU", gpuRank(0, 0, g0, 7), gpuRank(1, 0, g0, 8), true},
      {"same GPU, different indices (CUDA_VISIBLE_DEVICES)", gpuRank(0, 0, g1, 7),
       gpuRank(1, 1, g1, 8), true},
      {"other processes, GPUs with peer access", gpuRank(0, 0, g0, 7), gpuRank(1, 1, g1, 8),
       true},
      {"other processes, one-way peer access", gpuRank(0, 0, g0, 7), gpuRank(1, 2, g2, 8),
       false},
      {"other processes, no peer access", gpuRank(0, 1, g1, 7), gpuRank(1, 2, g2, 8), false},
      {"peer GPU not visible here", gpuRank(0, 0, g0, 7), gpuRank(1, 0, hidden, 8), false},
      {"same process, two GPUs (needs peer access enabled)", gpuRank(0, 0, g0, 7),
       gpuRank(1, 1, g1, 7), false},
      {"same process, bus ids unknown, same index", gpuRank(0, 0, "", 7), gpuRank(1, 0, "", 7),
       true},
      {"same process, bus ids unknown, other index", gpuRank(0, 0, "", 7),
       gpuRank(1, 1, "", 7), false},
      {"other processes, bus ids unknown", gpuRank(0, 0, "", 7), gpuRank(1, 0, "", 8), false},
      {"no GPU here", gpuRank(0, -1, "", 7), gpuRank(1, 0, g0, 7), false},
      {"no GPU there", gpuRank(0, 0, g0, 7), gpuRank(1, -1, "", 8), false},
      {"other host", gpuRank(0, 0, g0, 7, 1, 1), gpuRank(1, 0, g0, 8, 2, 2), false},
      {"same NCCL_HOSTID, other machine", gpuRank(0, 0, g0, 7, 1, 1),
       gpuRank(1, 0, g0, 8, 1, 2), false},
      {"same machine, other NCCL_HOSTID", gpuRank(0, 0, g0, 7, 1, 1),
       gpuRank(1, 0, g0, 8, 2, 1), false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(p2pCanConnect(r.a, r.b, q), r.expect) << r.what;
    EXPECT_EQ(p2pCanConnect(r.b, r.a, q), r.expect) << r.what << " (reversed)";
  }
  // Without device queries only the one-GPU cases remain.
  P2pDeviceQuery none;
  EXPECT_TRUE(p2pCanConnect(gpuRank(0, 0, g0, 7), gpuRank(1, 3, g0, 8), none));
  EXPECT_FALSE(p2pCanConnect(gpuRank(0, 0, g0, 7), gpuRank(1, 1, g1, 8), none));
}

TEST(P2pRule, TransportUsesTheRuleAndIsCalledP2p) {
  Transport& t = p2pTransport();
  EXPECT_EQ(t.id(), TransportId::kP2p);
  EXPECT_STREQ(t.name(), "p2p");
  // One GPU needs no CUDA query; host ranks never connect.
  EXPECT_TRUE(t.canConnect(gpuRank(0, 0, "0000:1b:00.0", 7), gpuRank(1, 0, "0000:1b:00.0", 8)));
  EXPECT_FALSE(t.canConnect(testing_util::makePeer(0), testing_util::makePeer(1)));
}

TEST(P2pRule, BusIdsCompareByValue) {
  EXPECT_TRUE(sameBusId("0000:3b:00.0", "0000:3B:00.0"));
  EXPECT_TRUE(sameBusId("00000000:3b:00.0", "0000:3b:00.0"));
  EXPECT_TRUE(sameBusId("3b:00.0", "0000:3b:00.0"));
  EXPECT_FALSE(sameBusId("0000:3b:00.0", "0000:3b:00.1"));
  EXPECT_FALSE(sameBusId("0001:3b:00.0", "0000:3b:00.0"));
  EXPECT_FALSE(sameBusId("", ""));
  EXPECT_FALSE(sameBusId("gpu0", "gpu0"));
  EXPECT_FALSE(sameBusId("0000:3b:00", "0000:3b:00"));
}

P2pDescriptor sampleDescriptor() {
  P2pDescriptor d;
  d.magic = P2pDescriptor::kMagic;
  d.processHash = 0x1122334455667788ull;
  d.devPtr = 0x7f0000123400ull;
  d.ipcOffset = 4096;
  d.slotBytes = 512 << 10;
  d.creatorStart = 987654;
  d.creatorPidNs = 4026531836ull;
  d.creatorPid = 4242;
  d.creatorRank = 3;
  d.nslots = 8;
  d.cudaDev = 1;
  d.ipcValid = 1;
  std::snprintf(d.busId, sizeof d.busId, "0000:3b:00.0");
  for (size_t i = 0; i < sizeof d.ipcHandle; ++i) d.ipcHandle[i] = (unsigned char)(i * 7 + 1);
  return d;
}

TEST(P2pDescriptorCodec, RoundTrip) {
  const P2pDescriptor d = sampleDescriptor();
  ConnDescriptor wire;
  encodeP2pDescriptor(d, &wire);
  EXPECT_EQ(wire.transport, uint32_t(TransportId::kP2p));
  P2pDescriptor back;
  ASSERT_EQ(decodeP2pDescriptor(wire, 3, &back), ncclSuccess);
  EXPECT_EQ(back.processHash, d.processHash);
  EXPECT_EQ(back.devPtr, d.devPtr);
  EXPECT_EQ(back.ipcOffset, d.ipcOffset);
  EXPECT_EQ(back.slotBytes, d.slotBytes);
  EXPECT_EQ(back.nslots, d.nslots);
  EXPECT_EQ(back.creatorPid, d.creatorPid);
  EXPECT_EQ(back.creatorStart, d.creatorStart);
  EXPECT_EQ(back.creatorPidNs, d.creatorPidNs);
  EXPECT_EQ(back.creatorRank, d.creatorRank);
  EXPECT_EQ(back.cudaDev, d.cudaDev);
  EXPECT_EQ(back.ipcValid, d.ipcValid);
  EXPECT_STREQ(back.busId, d.busId);
  EXPECT_EQ(std::memcmp(back.ipcHandle, d.ipcHandle, sizeof d.ipcHandle), 0);
}

TEST(P2pDescriptorCodec, RejectsForeignOrEmptyDescriptors) {
  ConnDescriptor wire;
  encodeP2pDescriptor(sampleDescriptor(), &wire);
  P2pDescriptor out;
  ConnDescriptor other = wire;
  other.transport = uint32_t(TransportId::kShm);
  EXPECT_EQ(decodeP2pDescriptor(other, 5, &out), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("rank 5"), std::string::npos)
      << ncclGetLastError(nullptr);
  other = wire;
  other.data[0] ^= 1;  // magic
  EXPECT_EQ(decodeP2pDescriptor(other, 5, &out), ncclInternalError);
  P2pDescriptor empty = sampleDescriptor();
  empty.nslots = 0;
  encodeP2pDescriptor(empty, &other);
  EXPECT_EQ(decodeP2pDescriptor(other, 5, &out), ncclInternalError);
  // An unterminated bus id is cut, not read past.
  P2pDescriptor longBus = sampleDescriptor();
  std::memset(longBus.busId, 'a', sizeof longBus.busId);
  encodeP2pDescriptor(longBus, &other);
  ASSERT_EQ(decodeP2pDescriptor(other, 5, &out), ncclSuccess);
  EXPECT_EQ(std::strlen(out.busId), sizeof out.busId - 1);
}

}  // namespace
}  // namespace braid
