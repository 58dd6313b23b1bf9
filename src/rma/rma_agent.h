// The one-sided progress agent: per process, a listening socket and one thread per
// incoming connection that applies other ranks' puts to this process's windows and
// raises the signal counters. Used where the origin cannot write into the target's
// memory itself (another host, BRAID_TRANSPORT=socket, no ptrace permission, device
// windows without CUDA IPC).
//
// Wire: an origin connects once per (communicator, target rank) and sends AgentHello;
// then AgentFrames in program order, a put's payload right after its frame. The agent
// validates every put against the target's live windows (a frame naming memory that is
// not inside one of them is refused and the connection dropped), writes the payload,
// then increments counter[origin]: a put and its signal are applied in order, and the
// data is in place before the signal is visible.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "nccl.h"

namespace braid {

struct Comm;

/// The part of a communicator's RMA state the agent touches (shared, so that a frame in
/// flight never touches freed memory; `alive` turns false under `mu` at destruction).
struct AgentTarget {
  std::mutex mu;
  bool alive = true;        ///< under mu
  Comm* comm = nullptr;     ///< valid while alive
  uint64_t secret = 0;      ///< the job secret every hello must present
  void* sigBase = nullptr;  ///< the counters (one per origin, 64 bytes apart)
  int nranks = 0;
  /// dead[origin]: the connection from that rank broke (its waits fail fast).
  std::unique_ptr<std::atomic<bool>[]> dead;
};

struct AgentHello {
  static constexpr uint64_t kMagic = 0x4252414944524d41ull;  // "BRAIDRMA"
  uint64_t magic = 0;
  uint64_t secret = 0;
  uint64_t token = 0;  ///< the target's RMA state
  int32_t origin = -1;
  int32_t pad = 0;
};

struct AgentFrame {
  static constexpr uint32_t kPut = 1;     ///< payload follows; then the signal
  static constexpr uint32_t kSignal = 2;  ///< no payload
  uint32_t kind = 0;
  uint32_t pad = 0;
  uint64_t addr = 0;   ///< destination in the target's process
  uint64_t bytes = 0;  ///< payload bytes
};

/// Makes sure this process's agent listens on `ip` and serves `token`; *addr gets the
/// "ip:port" origins connect to.
ncclResult_t agentServe(const char* ip, uint64_t token, std::shared_ptr<AgentTarget> target,
                        std::string* addr);
/// Stops serving `token` (frames naming it are refused from now on).
void agentForget(uint64_t token);

}  // namespace braid
