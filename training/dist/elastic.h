// Elastic membership: after a rank dies, the survivors agree on WHO failed, so every
// one of them can pass the same exclude list to ncclCommShrink.
//
// Why not the error text: when a collective fails, Braid closes that rank's connections
// (so its peers fail fast instead of waiting for BRAID_TIMEOUT_MS), and the next rank's
// error then names the survivor that closed them ("connection closed: the sending side
// aborted"), not the dead rank. Errors cascade; only some survivors see the culprit.
//
// The side channel is a directory every rank can read and write (the checkpoint
// directory: elastic training needs a shared one anyway, to reload the shards), under
// DIR/.elastic/<job token>/ (the token is rank 0's, broadcast at start, so files of an
// earlier job in the same directory are never read):
//   hb-<r>          rank r's heartbeat, rewritten (tmp + rename) every heartbeatMs by a
//                   thread of its own: machine id (boot id + pid namespace), pid, process
//                   start time, a counter and the wall-clock time of the beat
//   e<E>/alive-<r>  written by rank r when it enters recovery epoch E (1, 2, ...)
//   e<E>/decision   the agreed outcome of epoch E: failed ranks and survivors
// Ranks are named by their ORIGINAL world rank throughout (stable across shrinks).
//
// agree(), on every survivor: write alive-<me>, then poll. A member is
//   alive   once its alive file exists;
//   dead    if its process is gone (same machine: /proc/<pid> missing, a zombie, or
//           another process with its pid), or its heartbeat has not changed for
//           deadAfterMs (other machines: heartbeats come from a thread, so a live rank
//           busy computing still beats), or it neither reported nor died within
//           agreeTimeoutMs (hung);
// The coordinator, the first member in communicator order not known dead, waits until
// every member is alive or dead and writes the decision with link(2), which fails if
// the file exists: the first decision of an epoch wins and every survivor reads that
// same file. Everyone else waits for it. A rank that finds itself among the failed (a
// false "dead": its heartbeat stalled longer than deadAfterMs) stops with an error
// instead of joining. So all survivors hold the same exclude list by construction.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "training/dist/process_group.h"

namespace braid {
namespace train {

struct ElasticConfig {
  std::string dir;               ///< shared directory (e.g. the checkpoint directory)
  int heartbeatMs = 100;         ///< heartbeat period
  int deadAfterMs = 3000;        ///< a heartbeat unchanged this long: the rank is dead
  int agreeTimeoutMs = 120000;   ///< a rank silent this long after recovery began: failed
};

/// The outcome of one recovery epoch (identical on every survivor).
struct ElasticDecision {
  int epoch = 0;
  std::vector<int> failed;          ///< original ranks
  std::vector<int> survivors;       ///< original ranks, in the new communicator's order
  std::vector<int> excludeCurrent;  ///< the failed ranks numbered in the current communicator
  std::map<int, std::string> why;   ///< per failed rank: how it was found dead
  std::map<int, double> lastBeatMs; ///< per failed rank: wall-clock ms of its last heartbeat
  bool coordinator = false;         ///< this rank wrote the decision
  double seconds = 0;               ///< time agree() took on this rank
};

/// Wall-clock milliseconds since the Unix epoch (system_clock): comparable across
/// processes of one machine, and across machines as far as their clocks agree.
double wallMs();

class ElasticMembership {
 public:
  /// Collective over `world` (rank 0's job token is broadcast, then a barrier once every
  /// rank's first heartbeat is on disk). Starts the heartbeat thread.
  ElasticMembership(const ElasticConfig& config, ProcessGroup& world);
  ~ElasticMembership();
  ElasticMembership(const ElasticMembership&) = delete;
  ElasticMembership& operator=(const ElasticMembership&) = delete;

  int originalRank() const { return me_; }
  /// Original ranks of the current communicator, in its rank order.
  const std::vector<int>& members() const { return members_; }
  const std::string& jobDir() const { return jobDir_; }

  /// After a failure (local to each survivor, no communication): reports this rank
  /// alive and returns the epoch's decision. Throws std::runtime_error if this rank is
  /// among the failed or no decision came within agreeTimeoutMs + deadAfterMs.
  ElasticDecision agree();
  /// The shrink succeeded: the members are now decision.survivors.
  void adopt(const ElasticDecision& d) { members_ = d.survivors; }

 private:
  void beat();
  void heartbeatLoop();

  ElasticConfig cfg_;
  std::string jobDir_;
  int me_ = 0;
  int epoch_ = 0;
  std::vector<int> members_;
  std::string machine_;
  int64_t startTime_ = 0;
  int64_t counter_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace train
}  // namespace braid
