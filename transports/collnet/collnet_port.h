// CollNetPort: one rank's connection to an aggregation switch (in-network reduction)
// on one channel, through any ncclCollNet_v11_t (include/braid/net_plugin.h): Braid's
// braid-switch client, an external SHARP plugin, or the in-process collnet the
// simulator uses.
//
// To the executor it is a pair of FIFOs like any connection to a peer: plan steps send
// to kSwitchPeer and receive from it (algorithms/plan.h). Every step that sends to the
// switch first announces its message (bytes, what the switch does, datatype and op);
// the port's progress() (a proxy thread) then
//   1. copies the message's bytes out of the send FIFO into a staging buffer,
//   2. posts it as one collective on the collComm (iallreduce, iallgather or
//      ireducescatter of the whole message; up to `inflight` messages at once),
//   3. when the collective completes, applies Avg's division (the switch only sums)
//      and streams the result into the receive FIFO.
// Messages complete in order; all members of a switch group announce the same
// sequence (the plans are symmetric), so the collectives match across members.
//
// A failed collective closes both FIFOs (the executor fails at once) and keeps the
// reason for checkPeer().
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "braid/net_plugin.h"
#include "src/exec/engine.h"
#include "src/exec/fifo.h"
#include "src/reduce/reducer.h"
#include "src/exec/transport.h"

namespace braid {

struct CollNetPortConfig {
  const ncclCollNet_v11_t* coll = nullptr;
  void* collComm = nullptr;  ///< connected; the owner closes it after the port is gone
  int groupSize = 1;         ///< members of the switch group
  int groupRank = 0;         ///< this rank's index in it
  int commRanks = 1;         ///< ranks of the communicator (Avg divides by this)
  FifoGeometry geometry;     ///< of both FIFOs
  int inflight = 4;          ///< collectives posted at once (2 .. kMaxInflight)
  std::string name;          ///< "switch group 1 channel 0 (BraidSwitch)", for messages
};

class CollNetPort {
 public:
  static constexpr int kMaxInflight = 8;
  static constexpr uint64_t kQueueSlots = 64;  ///< announced messages not yet posted

  explicit CollNetPort(const CollNetPortConfig& cfg);
  ~CollNetPort();
  CollNetPort(const CollNetPort&) = delete;
  CollNetPort& operator=(const CollNetPort&) = delete;

  /// The executor's ends: it writes messages into sendFifo() and reads results from
  /// recvFifo() (attach a FifoSender / FifoReceiver).
  void* sendFifo() const { return sendMem_; }
  void* recvFifo() const { return recvMem_; }
  const std::string& name() const { return cfg_.name; }

  /// Executor: a message of `bytes` bytes follows in the send FIFO.
  ConnTable::Announce announce(SwitchOp op, uint64_t bytes, const Reducer& red);

  /// Proxy: moves what it can; true if anything happened. One thread at a time.
  bool progress();
  /// Every announced message delivered (or the port failed).
  bool drained() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  /// Fails the port from outside (its collComm was closed; the proxy no longer runs it).
  void abandon(const std::string& why) { fail(why); }
  /// Operations posted to the collnet and not completed yet (proxy thread).
  bool waitingOnNet() const { return completed_ < posted_; }
  /// Why it failed (valid once failed()).
  std::string reason() const;

 private:
  struct Msg {
    SwitchOp op;
    ncclDataType_t type;
    ncclRedOp_t redop;
    bool avg;
    uint64_t bytes;
  };
  struct Buffer {
    char* ptr = nullptr;
    size_t cap = 0;
    void* mhandle = nullptr;
  };
  struct Flight {
    Msg msg{};
    Buffer in, out;
    uint64_t got = 0;        ///< bytes of the message copied in
    uint64_t outBytes = 0;   ///< bytes of the result
    uint64_t delivered = 0;  ///< result bytes written to the receive FIFO
    void* req = nullptr;
  };
  bool fill();
  bool post(Flight& f);
  bool complete();
  bool deliver();
  bool ensure(Buffer& b, size_t bytes);
  void release(Buffer& b);
  void fail(const std::string& why);

  CollNetPortConfig cfg_;
  void* sendMem_ = nullptr;
  void* recvMem_ = nullptr;
  FifoReceiver fromExec_;  ///< the send FIFO, read by the proxy
  FifoSender toExec_;      ///< the receive FIFO, written by the proxy
  Msg queue_[kQueueSlots];
  std::atomic<uint64_t> qTail_{0};  ///< announced (executor)
  std::atomic<uint64_t> qHead_{0};  ///< taken by the proxy
  Flight flights_[kMaxInflight];
  uint64_t filling_ = 0;    ///< message being filled (== qHead_ while one is)
  bool fillActive_ = false;
  uint64_t posted_ = 0;     ///< messages posted
  uint64_t completed_ = 0;  ///< messages whose collective completed
  std::atomic<uint64_t> delivered_{0};  ///< messages fully delivered
  std::atomic<bool> failed_{false};
  mutable std::mutex reasonMu_;
  std::string reason_;
};

}  // namespace braid
