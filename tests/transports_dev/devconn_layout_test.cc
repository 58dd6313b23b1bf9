// DevConn (the kernels' view of a FIFO) against the host FIFO classes, on a host-mode
// shm connection: the same region seen through two mappings, one per process side.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "src/exec/dev_conn.h"
#include "tests/transports/transport_test_util.h"

namespace braid {
namespace {

using namespace testing_util;

constexpr uint32_t kSlots = 4;
constexpr uint64_t kSlotBytes = 4096;

struct ShmPair {
  PeerInfo r0 = makePeer(0), r1 = makePeer(1);
  RecvSide recv;
  SendSide send;
  void connect() {
    ConnDescriptor d;
    ConnectContext rctx = makeCtx(&r1, &r0, kSlots, kSlotBytes);
    ASSERT_EQ(shmTransport().setupRecv(rctx, &recv, &d), ncclSuccess);
    ASSERT_EQ(shmTransport().connectSend(makeCtx(&r0, &r1, kSlots, kSlotBytes), d, &send),
              ncclSuccess);
    ASSERT_EQ(shmTransport().finishRecv(rctx, &recv), ncclSuccess);
  }
};

TEST(DevConnLayout, MatchesTheFifoTheHostClassesWrite) {
  ShmPair p;
  ASSERT_NO_FATAL_FAILURE(p.connect());
  // The sender's mapping: an empty FIFO's first free slot is the data area's start.
  char* slot0 = p.send.fifo.acquire();
  ASSERT_NE(slot0, nullptr);
  char* sbase = slot0 - FifoLayout::dataOffset(kSlots);
  for (int i = 0; i < 100; ++i) slot0[i] = char(patternByte(i));
  p.send.fifo.commit(100);
  // The receiver's mapping (another address): where its first readable byte is.
  const char* front = nullptr;
  ASSERT_EQ(p.recv.fifo.peek(&front), 100u);
  char* rbase = const_cast<char*>(front) - FifoLayout::dataOffset(kSlots);
  ASSERT_NE(sbase, rbase) << "the two ends should map the segment separately";

  const DevConn s = DevConn::at(sbase, kSlots, kSlotBytes, /*hostMem=*/true);
  const DevConn r = DevConn::at(rbase, kSlots, kSlotBytes, /*hostMem=*/true);
  auto* h = reinterpret_cast<FifoHeader*>(sbase);
  EXPECT_EQ(static_cast<void*>(s.tail), static_cast<void*>(&h->tail));
  EXPECT_EQ(static_cast<void*>(s.head), static_cast<void*>(&h->head));
  EXPECT_EQ(static_cast<void*>(s.closed), static_cast<void*>(&h->closed));
  EXPECT_EQ(static_cast<void*>(s.slots), static_cast<void*>(h + 1));
  EXPECT_EQ(s.data, slot0);
  EXPECT_EQ(s.nslots, kSlots);
  EXPECT_EQ(s.slotBytes, kSlotBytes);
  EXPECT_EQ(s.hostMem, 1u);
  EXPECT_EQ(h->nslots, kSlots);
  EXPECT_EQ(h->slotBytes, kSlotBytes);

  // What FifoSender wrote, read through the receiver mapping's DevConn.
  EXPECT_EQ(*r.tail, 1u);
  EXPECT_EQ(*r.head, 0u);
  EXPECT_EQ(r.slots[0].bytes, 100u);
  EXPECT_EQ(r.slots[0].direct, 0u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(uint8_t(r.data[i]), patternByte(i)) << i;
  // More slots, wrapping around the ring.
  uint64_t pos = 100;
  p.recv.fifo.release(100);
  EXPECT_EQ(*s.head, 1u);
  for (uint64_t k = 1; k < 2 * kSlots + 1; ++k) {
    char* slot = p.send.fifo.acquire();
    ASSERT_NE(slot, nullptr);
    ASSERT_EQ(slot, s.data + (k % kSlots) * kSlotBytes) << "slot " << k;
    const uint64_t n = 64 * k;
    for (uint64_t i = 0; i < n; ++i) slot[i] = char(patternByte(pos + i));
    p.send.fifo.commit(n);
    EXPECT_EQ(*r.tail, k + 1);
    EXPECT_EQ(r.slots[k % kSlots].bytes, n);
    const char* rs = r.data + (k % kSlots) * kSlotBytes;
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(uint8_t(rs[i]), patternByte(pos + i));
    const char* q = nullptr;
    ASSERT_EQ(p.recv.fifo.peek(&q), n);
    EXPECT_EQ(q, rs);
    p.recv.fifo.release(n);
    EXPECT_EQ(*s.head, k + 1);
    pos += n;
  }
  // Closing one end shows in the other's view.
  p.recv.fifo.close(kFifoReceiverAborted);
  EXPECT_EQ(*s.closed, uint32_t(kFifoReceiverAborted));
}

TEST(DevConnLayout, AKernelStyleWriterFeedsFifoReceiver) {
  ShmPair p;
  ASSERT_NO_FATAL_FAILURE(p.connect());
  char* sbase = p.send.fifo.acquire() - FifoLayout::dataOffset(kSlots);
  const DevConn c = DevConn::at(sbase, kSlots, kSlotBytes, /*hostMem=*/true);
  const std::vector<uint64_t> sizes = {1, 7, kSlotBytes, 100, kSlotBytes - 1, 3000, 64, 5, 4096,
                                       17, 2000};
  std::string err;
  // Plays the sending kernel: data and SlotInfo, then tail (release); waits on head.
  std::thread writer([&] {
    uint64_t tail = 0, pos = 0;
    for (uint64_t n : sizes) {
      auto deadline = Clock::now() + std::chrono::seconds(20);
      while (tail - __atomic_load_n(c.head, __ATOMIC_ACQUIRE) >= c.nslots) {
        if (Clock::now() > deadline) { err = "writer: timed out"; return; }
        std::this_thread::yield();
      }
      char* dst = c.data + (tail % c.nslots) * c.slotBytes;
      for (uint64_t i = 0; i < n; ++i) dst[i] = char(patternByte(pos + i));
      c.slots[tail % c.nslots].bytes = n;
      c.slots[tail % c.nslots].direct = 0;
      __atomic_store_n(c.tail, ++tail, __ATOMIC_RELEASE);
      pos += n;
    }
  });
  EXPECT_EQ(consume(p.recv.fifo, totalOf(sizes), nullptr, 20000), "");
  writer.join();
  EXPECT_EQ(err, "");
  EXPECT_EQ(*c.head, sizes.size());
}

}  // namespace
}  // namespace braid
