// Helpers for the device-mode transport tests: GPU peers, and the CUDA executor's FIFO
// protocol played from the host with synchronous copies through the DevConn addresses
// (what a kernel would read and write), so transports are tested without kernels.
#pragma once
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "src/os/cuda_rt.h"
#include "tests/transports/transport_test_util.h"
#include "src/exec/transport.h"

namespace braid {
namespace devtest {

/// "" when CUDA is usable here, else why not (for GTEST_SKIP).
inline std::string noCudaReason() {
  if (cudart::available()) return "";
  std::string why = cudart::unavailableReason();
  return why.empty() ? std::string("no driver or no device") : why;
}

/// A rank on GPU `dev` of this machine (bus id filled when CUDA knows it).
inline PeerInfo gpuPeer(int rank, int dev, uint64_t process = 1) {
  PeerInfo p = testing_util::makePeer(rank, /*host=*/1, process);
  p.machineHash = 1;
  p.cudaDev = dev;
  std::string bus = cudart::deviceBusId(dev);
  std::snprintf(p.busId, sizeof p.busId, "%s", bus.c_str());
  return p;
}

inline ConnectContext devCtx(const PeerInfo* self, const PeerInfo* peer, uint32_t nslots,
                             uint64_t slotBytes, int timeoutMs = 10000) {
  ConnectContext c = testing_util::makeCtx(self, peer, nslots, slotBytes, timeoutMs);
  c.device = true;
  return c;
}

inline bool readU64(const uint64_t* devAddr, uint64_t* v) {
  return cudart::copyFromDevice(v, devAddr, sizeof *v) == ncclSuccess;
}

/// Sends the messages through a device FIFO as the sending kernel would: slot bytes,
/// SlotInfo, then tail; waits for the receiver to release everything. "" or the error.
inline std::string devProduce(const DevConn& c, const std::vector<uint64_t>& sizes,
                              int timeoutMs = 20000) {
  using testing_util::Clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  uint64_t tail = 0, head = 0, pos = 0;
  std::vector<char> buf(c.slotBytes);
  for (uint64_t size : sizes) {
    for (uint64_t left = size; left > 0;) {
      while (tail - head >= c.nslots) {
        if (!readU64(c.head, &head)) return "sender: reading head failed";
        if (Clock::now() > deadline) return "sender: timed out waiting for space";
        std::this_thread::yield();
      }
      const uint64_t n = std::min(left, c.slotBytes);
      for (uint64_t i = 0; i < n; ++i) buf[i] = char(testing_util::patternByte(pos + i));
      const uint64_t slot = tail % c.nslots;
      SlotInfo si{n, 0, CallTag()};
      if (cudart::copyToDevice(c.data + slot * c.slotBytes, buf.data(), n) != ncclSuccess ||
          cudart::copyToDevice(c.slots + slot, &si, sizeof si) != ncclSuccess)
        return "sender: writing slot " + std::to_string(tail) + " failed: " + cudart::lastError();
      ++tail;
      if (cudart::copyToDevice(c.tail, &tail, sizeof tail) != ncclSuccess)
        return "sender: publishing tail failed";
      pos += n;
      left -= n;
    }
  }
  while (head != tail) {
    if (!readU64(c.head, &head)) return "sender: reading head failed";
    if (Clock::now() > deadline) return "sender: timed out waiting for the drain";
    std::this_thread::yield();
  }
  return "";
}

/// Receives `total` bytes from a device FIFO as the receiving kernel would, checking
/// every byte; releases each slot by publishing head. "" or the error.
inline std::string devConsume(const DevConn& c, uint64_t total, int timeoutMs = 20000) {
  using testing_util::Clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  uint64_t head = 0, tail = 0, pos = 0;
  std::vector<char> buf(c.slotBytes);
  while (pos < total) {
    while (tail == head) {
      if (!readU64(c.tail, &tail)) return "receiver: reading tail failed";
      if (Clock::now() > deadline)
        return "receiver: timed out at byte " + std::to_string(pos) + " of " +
               std::to_string(total);
      std::this_thread::yield();
    }
    const uint64_t slot = head % c.nslots;
    SlotInfo si{0, 0, CallTag()};
    if (cudart::copyFromDevice(&si, c.slots + slot, sizeof si) != ncclSuccess)
      return "receiver: reading SlotInfo failed";
    if (si.direct != 0) return "receiver: a direct entry on a device FIFO";
    if (si.bytes > c.slotBytes || pos + si.bytes > total) return "receiver: bad slot size";
    if (cudart::copyFromDevice(buf.data(), c.data + slot * c.slotBytes, si.bytes) != ncclSuccess)
      return "receiver: reading slot data failed";
    for (uint64_t i = 0; i < si.bytes; ++i)
      if (uint8_t(buf[i]) != testing_util::patternByte(pos + i))
        return "receiver: byte " + std::to_string(pos + i) + " is wrong";
    pos += si.bytes;
    ++head;
    if (cudart::copyToDevice(c.head, &head, sizeof head) != ncclSuccess)
      return "receiver: publishing head failed";
  }
  return "";
}

}  // namespace devtest
}  // namespace braid
