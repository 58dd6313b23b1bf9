// DevPlan::compile and DevPlanImage: byte offsets, connection de-duplication, limits
// and the image layout.
#include "src/device/dev_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "algorithms/patterns/program_writer.h"
#include "tests/device_emu/emu_harness.h"

namespace braid {
namespace {

Step step(StepKind k, int sendPeer, int recvPeer, Region src, Region dst, uint16_t channel = 0,
          uint8_t flags = 0) {
  Step s;
  s.kind = k;
  s.sendPeer = sendPeer;
  s.recvPeer = recvPeer;
  s.src = src;
  s.dst = dst;
  s.channel = channel;
  s.flags = flags;
  return s;
}

const Region kNoRegion{};

Plan twoPrograms() {
  Plan p;
  p.algorithm = "handmade";
  p.sliceBytes = 96;
  p.programs.resize(2);
  auto& a = p.programs[0].steps;
  a.push_back(step(StepKind::kSend, 1, -1, {Buf::kSend, 3, 10}, kNoRegion, 0, kPreOp));
  a.push_back(step(StepKind::kRecv, -1, 1, kNoRegion, {Buf::kRecv, 5, 10}));
  a.push_back(step(StepKind::kSend, 1, -1, {Buf::kRecv, 5, 10}, kNoRegion));  // same conn again
  a.push_back(step(StepKind::kRecvReduceSend, 1, 2, {Buf::kScratch, 7, 4}, kNoRegion, 1,
                   kPreOp | kPostOp));
  auto& b = p.programs[1].steps;
  b.push_back(step(StepKind::kCopy, -1, -1, {Buf::kSend, 0, 2}, {Buf::kRecv, 100, 2}));
  b.push_back(step(StepKind::kRecvCopySend, 2, 2, kNoRegion, {Buf::kRecv, 1, 6}));
  return p;
}

TEST(DevPlanCompile, ByteOffsetsAndKinds) {
  DevPlan dp;
  std::string why;
  ASSERT_TRUE(DevPlan::compile(twoPrograms(), 4, &dp, &why)) << why;
  EXPECT_EQ(dp.typeSize, 4u);
  EXPECT_EQ(dp.sliceBytes, 96u);
  ASSERT_EQ(dp.programs.size(), 2u);
  EXPECT_EQ(dp.programs[0].firstStep, 0u);
  EXPECT_EQ(dp.programs[0].nSteps, 4u);
  EXPECT_EQ(dp.programs[1].firstStep, 4u);
  EXPECT_EQ(dp.programs[1].nSteps, 2u);
  ASSERT_EQ(dp.steps.size(), 6u);
  const DevStep& s0 = dp.steps[0];
  EXPECT_EQ(s0.kind, uint8_t(StepKind::kSend));
  EXPECT_EQ(s0.flags, uint8_t(kPreOp));
  EXPECT_EQ(s0.srcOff, 12u);
  EXPECT_EQ(s0.bytes, 40u);
  EXPECT_EQ(s0.srcBuf, uint8_t(Buf::kSend));
  EXPECT_EQ(s0.dstBuf, uint8_t(Buf::kNone));
  EXPECT_EQ(s0.recvConn, kDevNoConn);
  const DevStep& s1 = dp.steps[1];
  EXPECT_EQ(s1.dstOff, 20u);
  EXPECT_EQ(s1.sendConn, kDevNoConn);
  const DevStep& s3 = dp.steps[3];
  EXPECT_EQ(s3.srcBuf, uint8_t(Buf::kScratch));
  EXPECT_EQ(s3.srcOff, 28u);
  EXPECT_EQ(s3.bytes, 16u);
  EXPECT_EQ(s3.flags, uint8_t(kPreOp | kPostOp));
  const DevStep& s4 = dp.steps[4];
  EXPECT_EQ(s4.kind, uint8_t(StepKind::kCopy));
  EXPECT_EQ(s4.dstOff, 400u);
  EXPECT_EQ(s4.sendConn, kDevNoConn);
  EXPECT_EQ(s4.recvConn, kDevNoConn);
}

TEST(DevPlanCompile, ConnectionsOnceEach) {
  DevPlan dp;
  std::string why;
  ASSERT_TRUE(DevPlan::compile(twoPrograms(), 8, &dp, &why)) << why;
  // send 1/ch0, recv 1/ch0, send 1/ch1, recv 2/ch1, send 2/ch0, recv 2/ch0
  ASSERT_EQ(dp.conns.size(), 6u);
  auto ref = [&](uint16_t i) { return dp.conns.at(i); };
  EXPECT_EQ(dp.steps[0].sendConn, dp.steps[2].sendConn);  // de-duplicated
  EXPECT_EQ(ref(dp.steps[0].sendConn).peer, 1);
  EXPECT_EQ(ref(dp.steps[0].sendConn).isSend, 1);
  EXPECT_EQ(ref(dp.steps[1].recvConn).peer, 1);
  EXPECT_EQ(ref(dp.steps[1].recvConn).isSend, 0);
  EXPECT_NE(dp.steps[3].sendConn, dp.steps[0].sendConn);  // other channel
  EXPECT_EQ(ref(dp.steps[3].sendConn).channel, 1);
  EXPECT_EQ(ref(dp.steps[3].recvConn).peer, 2);
  EXPECT_EQ(ref(dp.steps[5].sendConn).peer, 2);
  EXPECT_EQ(ref(dp.steps[5].sendConn).channel, 0);
  EXPECT_NE(dp.steps[5].sendConn, dp.steps[5].recvConn);
  EXPECT_EQ(dp.steps[0].bytes, 80u);
}

TEST(DevPlanCompile, DirectAccessSteps) {
  // The ranks of direct-access steps go into the connection fields, kAllPeers as
  // kDevAllPeers; no connection is made for them.
  Plan p;
  patterns::ProgramWriter w(&p, 0);
  w.barrier();
  w.peerCopy(2, Region{Buf::kSend, 1, 3}, Region{Buf::kRecv, 4, 3});
  w.peerReduce(Region{Buf::kSend, 0, 2}, Region{Buf::kRecv, 0, 2}, kPostOp, kAllPeers);
  w.peerPut(1, Region{Buf::kSend, 0, 2}, Region{Buf::kRecv, 2, 2});
  w.wait(3);
  DevPlan dp;
  std::string why;
  ASSERT_TRUE(DevPlan::compile(p, 8, &dp, &why)) << why;
  EXPECT_TRUE(dp.direct);
  EXPECT_TRUE(dp.conns.empty());
  ASSERT_EQ(dp.steps.size(), 6u);
  EXPECT_EQ(dp.steps[1].recvConn, kDevAllPeers);  // the barrier's wait
  EXPECT_EQ(dp.steps[2].recvConn, 2);
  EXPECT_EQ(dp.steps[2].srcOff, 8u);
  EXPECT_EQ(dp.steps[2].dstOff, 32u);
  EXPECT_EQ(dp.steps[2].bytes, 24u);
  EXPECT_EQ(dp.steps[3].sendConn, kDevAllPeers);
  EXPECT_EQ(dp.steps[3].flags, uint8_t(kPostOp));
  EXPECT_EQ(dp.steps[4].sendConn, 1);
  EXPECT_EQ(dp.steps[5].recvConn, 3);
  // A data step before the first wait for every rank (the kernel would not know the
  // peers' buffers yet), and a rank beyond what a block's table holds, are refused.
  Plan early;
  patterns::ProgramWriter e(&early, 0);
  e.signal();
  e.peerCopy(1, Region{Buf::kSend, 0, 1}, Region{Buf::kRecv, 0, 1});
  EXPECT_FALSE(DevPlan::compile(early, 4, &dp, &why));
  EXPECT_NE(why.find("first wait for every rank"), std::string::npos) << why;
  Plan far;
  patterns::ProgramWriter f(&far, 0);
  f.barrier();
  f.peerCopy(kDevMaxDirectRanks, Region{Buf::kSend, 0, 1}, Region{Buf::kRecv, 0, 1});
  EXPECT_FALSE(DevPlan::compile(far, 4, &dp, &why));
  EXPECT_NE(why.find("direct access on the GPU reaches"), std::string::npos) << why;
}

TEST(DevPlanCompile, Refusals) {
  DevPlan dp;
  std::string why;
  // Two programs on one (peer, channel, direction).
  Plan p = twoPrograms();
  p.programs[1].steps.push_back(step(StepKind::kRecv, -1, 1, kNoRegion, {Buf::kRecv, 0, 1}));
  EXPECT_FALSE(DevPlan::compile(p, 4, &dp, &why));
  EXPECT_NE(why.find("both receive from rank 1"), std::string::npos) << why;
  // Too many programs for one launch.
  Plan many;
  many.programs.resize(65);
  for (auto& prog : many.programs) prog.steps.push_back(step(StepKind::kCopy, -1, -1, {Buf::kSend, 0, 1}, {Buf::kRecv, 0, 1}));
  EXPECT_FALSE(DevPlan::compile(many, 4, &dp, &why));
  EXPECT_NE(why.find("at most 64"), std::string::npos) << why;
  many.programs.resize(64);
  EXPECT_TRUE(DevPlan::compile(many, 4, &dp, &why)) << why;
  // Element sizes, regions, peers, overflow.
  EXPECT_FALSE(DevPlan::compile(twoPrograms(), 3, &dp, &why));
  Plan bad;
  bad.programs.resize(1);
  bad.programs[0].steps.push_back(step(StepKind::kSend, 1, -1, kNoRegion, kNoRegion));
  EXPECT_FALSE(DevPlan::compile(bad, 4, &dp, &why));
  bad.programs[0].steps[0] = step(StepKind::kSend, -1, -1, {Buf::kSend, 0, 1}, kNoRegion);
  EXPECT_FALSE(DevPlan::compile(bad, 4, &dp, &why));
  EXPECT_NE(why.find("no send peer"), std::string::npos) << why;
  bad.programs[0].steps[0] = step(StepKind::kSend, 1, -1, {Buf::kSend, 0, UINT64_MAX / 2}, kNoRegion);
  EXPECT_FALSE(DevPlan::compile(bad, 4, &dp, &why));
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
  // The empty plan is fine.
  EXPECT_TRUE(DevPlan::compile(Plan(), 2, &dp, &why));
  EXPECT_TRUE(dp.programs.empty() && dp.steps.empty() && dp.conns.empty());
}

TEST(DevPlanImage, LayoutAndDevicePointers) {
  DevPlan dp;
  std::string why;
  ASSERT_TRUE(DevPlan::compile(twoPrograms(), 2, &dp, &why)) << why;
  std::vector<DevConn> conns(dp.conns.size());
  for (size_t i = 0; i < conns.size(); ++i) {
    conns[i].nslots = uint32_t(i + 1);
    conns[i].slotBytes = 64 * (i + 1);
    conns[i].tail = reinterpret_cast<uint64_t*>(0x1000 + 64 * i);
  }
  const size_t bytes = DevPlanImage::bytesFor(dp);
  const size_t expect = ((sizeof(DevPlanImage) + 15) & ~size_t(15)) +
                        ((2 * sizeof(DevProgram) + 15) & ~size_t(15)) +
                        ((6 * sizeof(DevStep) + 15) & ~size_t(15)) + 6 * sizeof(DevConn);
  EXPECT_EQ(bytes, expect);
  emutest::AlignedBytes host(bytes + 64);
  std::memset(host.data(), 0xCC, bytes + 64);
  char* fakeDev = reinterpret_cast<char*>(uintptr_t(0x7f0000000000ull));
  const DevPlanImage* img = DevPlanImage::write(dp, conns.data(), DevPeerTable(), host.data(), fakeDev);
  ASSERT_EQ(static_cast<const void*>(img), static_cast<const void*>(host.data()));
  EXPECT_EQ(img->nPrograms, 2u);
  EXPECT_EQ(img->nSteps, 6u);
  EXPECT_EQ(img->nConns, 6u);
  EXPECT_EQ(img->typeSize, 2u);
  EXPECT_EQ(img->sliceBytes, 96u);
  // Pointers are device addresses; the same offsets in the host copy hold the arrays.
  const size_t progOff = reinterpret_cast<const char*>(img->programs) - fakeDev;
  const size_t stepOff = reinterpret_cast<const char*>(img->steps) - fakeDev;
  const size_t connOff = reinterpret_cast<const char*>(img->conns) - fakeDev;
  EXPECT_EQ(progOff % 16, 0u);
  EXPECT_EQ(stepOff % 16, 0u);
  EXPECT_EQ(connOff % 16, 0u);
  EXPECT_LT(progOff, stepOff);
  EXPECT_LT(stepOff, connOff);
  EXPECT_EQ(connOff + 6 * sizeof(DevConn), bytes);
  EXPECT_EQ(0, std::memcmp(host.data() + progOff, dp.programs.data(), 2 * sizeof(DevProgram)));
  EXPECT_EQ(0, std::memcmp(host.data() + stepOff, dp.steps.data(), 6 * sizeof(DevStep)));
  const auto* c = reinterpret_cast<const DevConn*>(host.data() + connOff);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(c[i].nslots, i + 1);
    EXPECT_EQ(c[i].slotBytes, 64 * (i + 1));
    EXPECT_EQ(c[i].tail, conns[i].tail);
  }
  for (size_t i = bytes; i < bytes + 64; ++i) ASSERT_EQ(uint8_t(host.data()[i]), 0xCC) << "wrote past bytesFor";
  // The emulation's case: device address == host address.
  const DevPlanImage* same = DevPlanImage::write(dp, conns.data(), DevPeerTable(), host.data(), host.data());
  EXPECT_EQ(reinterpret_cast<const char*>(same->steps), host.data() + stepOff);
}

TEST(DevConnView, MatchesFifoLayout) {
  emutest::AlignedBytes mem(FifoLayout::bytesFor(3, 128));
  FifoHeader* h = FifoLayout::init(mem.data(), 3, 128);
  const DevConn c = DevConn::at(mem.data(), 3, 128, true);
  EXPECT_EQ(static_cast<void*>(c.tail), static_cast<void*>(&h->tail));
  EXPECT_EQ(static_cast<void*>(c.head), static_cast<void*>(&h->head));
  EXPECT_EQ(static_cast<void*>(c.closed), static_cast<void*>(&h->closed));
  EXPECT_EQ(c.data, mem.data() + FifoLayout::dataOffset(3));
  EXPECT_EQ(c.hostMem, 1u);
}

}  // namespace
}  // namespace braid
