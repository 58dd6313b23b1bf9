// Connector: makes the connections a batch's plans need that do not exist yet, for
// every communicator of the batch at once, in the three phases of src/exec/transport.h
// (so one thread can connect many ranks without deadlock). Used by both executors:
// host connections (Comm::sends/recvs) for the host executor, device connections
// (Comm::devSends/devRecvs, ConnectContext::device) for the CUDA executor.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"

namespace braid {

struct Comm;

class Connector {
 public:
  explicit Connector(bool device) : device_(device) {}
  /// Notes (once) the connections `plan` uses that `c` does not have yet.
  void note(Comm* c, const Plan& plan);
  /// Makes every noted connection; every rank must call this with the same notes
  /// (the same ops), as the ranks of a collective do.
  ncclResult_t connect();
  /// Drops the notes of comm `c` (its work failed before its connections were made).
  void forget(const Comm* c);
  /// Whether connections of comm `c` are noted (to be made by connect()).
  bool pending(const Comm* c) const;
  void clear() {
    missingSend_.clear();
    missingRecv_.clear();
  }

 private:
  bool device_;
  std::vector<std::pair<Comm*, uint64_t>> missingSend_, missingRecv_;  ///< connKey()s
};

}  // namespace braid
