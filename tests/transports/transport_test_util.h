// Helpers for the transport tests: peer descriptions, connect contexts, and a checked
// byte stream pushed through a FifoSender and pulled from a FifoReceiver.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/exec/transport.h"

namespace braid {
namespace testing_util {

inline PeerInfo makePeer(int rank, uint64_t host = 1, uint64_t process = 1, int pid = 0) {
  PeerInfo p;
  p.rank = rank;
  p.pid = pid ? pid : int(getpid());
  p.hostHash = host;
  p.processHash = process;
  std::snprintf(p.hostname, sizeof p.hostname, "testhost");
  std::snprintf(p.netAddr, sizeof p.netAddr, "127.0.0.1");
  return p;
}

inline ConnectContext makeCtx(const PeerInfo* self, const PeerInfo* peer, uint32_t nslots,
                              uint64_t slotBytes, int timeoutMs = 10000, uint64_t secret = 42) {
  ConnectContext c;
  c.self = self;
  c.peer = peer;
  c.channel = 0;
  c.geometry.nslots = nslots;
  c.geometry.slotBytes = slotBytes;
  c.secret = secret;
  c.commHash = 0xabcdef;
  c.timeoutMs = timeoutMs;
  return c;
}

/// Byte `i` of the test stream.
inline uint8_t patternByte(uint64_t i) {
  return uint8_t((i * 2654435761ull) >> 7) ^ uint8_t(i >> 13);
}

/// The messages every stream test sends: 0 .. several MiB, mostly not slot multiples.
inline std::vector<uint64_t> streamSizes(uint64_t slot) {
  return {0, 1, 7, 63, 64, 1000, slot - 1, slot, slot + 1, 3 * slot + 5, 12345,
          (2u << 20) + 3, 0, 17, (5u << 20) + 11, 9};
}

using Clock = std::chrono::steady_clock;

/// Writes the messages into the FIFO slot by slot; returns "" or what went wrong.
/// `slotSizes` (optional) records the size of every committed slot.
inline std::string produce(FifoSender& s, const std::vector<uint64_t>& sizes,
                           std::vector<uint64_t>* slotSizes = nullptr, int timeoutMs = 60000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  uint64_t pos = 0;
  for (uint64_t size : sizes) {
    uint64_t left = size;
    while (left > 0) {
      char* slot = s.acquire();
      if (!slot) {
        if (s.closed()) return "sender: FIFO closed (" + std::to_string(s.closed()) + ")";
        if (Clock::now() > deadline) return "sender: timed out at byte " + std::to_string(pos);
        std::this_thread::yield();
        continue;
      }
      uint64_t n = std::min(left, s.slotBytes());
      for (uint64_t i = 0; i < n; ++i) slot[i] = char(patternByte(pos + i));
      s.commit(n);
      if (slotSizes) slotSizes->push_back(n);
      pos += n;
      left -= n;
    }
  }
  // Wait until the receiver (or the proxy) took everything.
  while (!s.drained()) {
    if (s.closed()) return "sender: FIFO closed before drained";
    if (Clock::now() > deadline) return "sender: timed out waiting for drain";
    std::this_thread::yield();
  }
  return "";
}

/// Reads `total` bytes whole slot by whole slot, checking every byte; returns "" or
/// what went wrong. `slotSizes` (optional) records the size of every slot seen.
inline std::string consume(FifoReceiver& r, uint64_t total,
                           std::vector<uint64_t>* slotSizes = nullptr, int timeoutMs = 60000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  uint64_t pos = 0;
  while (pos < total) {
    const char* p = nullptr;
    uint64_t n = r.peek(&p);
    if (n == 0) {
      if (r.closed()) return "receiver: FIFO closed (" + std::to_string(r.closed()) + ")";
      if (Clock::now() > deadline)
        return "receiver: timed out at byte " + std::to_string(pos) + " of " +
               std::to_string(total);
      std::this_thread::yield();
      continue;
    }
    if (pos + n > total) return "receiver: more bytes than sent";
    for (uint64_t i = 0; i < n; ++i)
      if (uint8_t(p[i]) != patternByte(pos + i))
        return "receiver: byte " + std::to_string(pos + i) + " is wrong";
    if (slotSizes) slotSizes->push_back(n);
    r.release(n);
    pos += n;
  }
  return "";
}

inline uint64_t totalOf(const std::vector<uint64_t>& sizes) {
  uint64_t t = 0;
  for (uint64_t s : sizes) t += s;
  return t;
}

/// Runs fn in a forked child; returns the child's pid. fn's return value is the exit
/// code (0: success). The child never returns into the test framework.
template <class Fn>
pid_t forkChild(Fn fn) {
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = fn();
    } catch (...) {
      rc = 99;
    }
    _exit(rc);
  }
  return pid;
}

/// Waits for a child (bounded); returns its exit code, or -1.
inline int waitChild(pid_t pid, int timeoutMs = 60000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

/// Polls res->checkPeer until it reports an error or timeoutMs passes.
inline ncclResult_t waitPeerFailure(ConnResource* res, std::string* why, int timeoutMs) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    ncclResult_t rc = res->checkPeer(why);
    if (rc != ncclSuccess || Clock::now() > deadline) return rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// Whole-buffer write/read on a pipe (for passing descriptors between processes).
inline bool writeFull(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}
inline bool readFull(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t k = read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

}  // namespace testing_util
}  // namespace braid
