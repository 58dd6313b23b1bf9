// One fault-injection job: N ranks as forked processes over host memory run a loop of
// one large collective; one fault is injected (a rank SIGKILLed before, during or right
// after a call; a rank stopped with SIGSTOP, alive but silent; a rank's TCP connections
// reset; the job's /dev/shm segments removed; the braid-switch killed), and the outcome
// of every surviving rank is measured: did it return an error, how long after the
// fault, does the message name a rank, did it hang (no exit within 4x BRAID_TIMEOUT_MS
// of the fault: killed and counted), and were /dev/shm segments of the job left behind
// once every process was gone.
//
// The calling process never initialises the library itself (rank 0 makes the unique id
// after the fork), so it can run many jobs one after another.
#pragma once
#include <string>
#include <vector>

namespace fault {

struct FaultSpec {
  std::string kind;       ///< kill, stop (SIGSTOP), reset, unlink-setup, unlink-mid, switch
  std::string transport;  ///< shm or socket (switch: auto, two "nodes" of two)
  std::string coll;       ///< allreduce allgather reducescatter broadcast alltoall sendrecv
                          ///< (switch: collnet_chain or collnet_direct all-reduce)
  std::string phase;      ///< before, mid, after (a call of the loop), setup (the first
                          ///< call, making connections); setup/mid (unlink)
  int victim = 1;         ///< the rank killed or reset
  int nranks = 4;
  int timeoutMs = 5000;   ///< BRAID_TIMEOUT_MS of the job
  int bootstrapTimeoutMs = 5000;  ///< BRAID_BOOTSTRAP_TIMEOUT_MS (0: library default)
  std::string name() const;  ///< kind.transport.coll.phase[.rV]
};

struct JobResult {
  int survivors = 0;        ///< ranks that were not killed on purpose
  int failed = 0;           ///< survivors that returned an error
  int failedInTime = 0;     ///< ... within 2 x timeout of the fault
  int namedPeer = 0;        ///< ... whose message names another rank (or the switch)
  int namedVictim = 0;      ///< ... whose message names the victim rank
  int completed = 0;        ///< survivors that finished every iteration (right data)
  int wrong = 0;            ///< survivors that got a wrong result
  int hung = 0;             ///< ranks killed by the driver at the hard cap
  int leaked = 0;           ///< /dev/shm segments of the job left after it
  bool faultInjected = false;
  double maxErrorSeconds = 0;  ///< slowest survivor's error, seconds after the fault
  std::string sampleError;     ///< one survivor's error text
  std::string details;         ///< per survivor: state, seconds after the fault, message
  /// Whether the outcome is acceptable: no hang, no leak, no wrong data, every survivor
  /// failed in time (kill, reset), or either failed in time or completed (others).
  bool ok(const FaultSpec& f) const;
};

/// Runs one job. `switchBin`: the braid-switch program (kind "switch").
JobResult runJob(const FaultSpec& f, const std::string& switchBin);

}  // namespace fault
