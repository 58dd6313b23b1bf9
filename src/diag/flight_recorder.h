// FlightRecorder: a communicator's record of its last N operations (BRAID_FLIGHT_RECORDER
// entries), so that a hang or a failure explains itself. Each op gets an entry when it
// is issued (queued), is marked started when its plan runs (with the algorithm), done or
// failed at the end (with the error), and, while it stalls, with the rank it waits on.
//
// The record is written out (dump) on a timeout, a dead peer or any fatal error of the
// comm, on ncclCommAbort with work outstanding, on SIGUSR1 (every live comm of the
// process; `braid-info --dump PID`), and on braidCommDumpFlightRecord: one JSON file per
// comm and rank in BRAID_FLIGHT_RECORDER_DIR, and a summary in the WARN log. The
// braid-doctor command reads the files of all ranks and says who is behind and why.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "nccl.h"

namespace braid {

struct OpRecord;

enum class FrState : uint8_t {
  kQueued,    ///< issued, waiting for its turn (earlier work, a host stream)
  kStarted,   ///< its plan is running
  kLaunched,  ///< handed to its CUDA stream (completion is the stream's)
  kDone,
  kFailed,
};
const char* frStateName(FrState s);

/// "No peer" in FrEntry::waitingOn.
constexpr int kFrNoPeer = -1000;

struct FrEntry {
  uint64_t seq = 0;       ///< op number on this comm, in issue order (every op)
  int64_t collSeq = -1;   ///< collective number (-1: a send or receive)
  const char* call = "";  ///< API name
  uint8_t coll = 0;       ///< Coll
  uint8_t mem = 0;        ///< MemKind
  bool isSend = false;
  FrState state = FrState::kQueued;
  uint64_t count = 0;
  int32_t type = 0;
  int32_t op = 0;     ///< ncclRedOp_t (>= ncclNumOps: a PreMulSum op)
  int32_t root = 0;   ///< root, or the peer of a send/receive
  int32_t waitingOn = kFrNoPeer;  ///< while stalled: the rank waited on (-2: the switch)
  int64_t queuedUs = 0, startedUs = 0, endedUs = 0;  ///< frNowUs() (0: not yet)
  char algo[32] = {};
  char detail[224] = {};  ///< what it waits for, or the error
};

/// Who the record belongs to (set once the comm is initialised).
struct FrIdentity {
  int rank = -1;
  int nranks = 0;
  uint64_t commHash = 0;
  std::string commName;
  std::string host;
  int pid = 0;
  int timeoutMs = 0;
};

/// Where records go: BRAID_FLIGHT_RECORDER_DIR, else /tmp/braid-flight-recorder-<uid>,
/// the user's own (as PyTorch's per-user trace files): shared /tmp is no place for
/// another user to read or plant a job's records.
std::string flightRecorderDir();

/// Makes `dir` (one level, mode 0700) and, when `own` (the default directory: it sits in
/// a shared /tmp), checks that it is a real directory (not a link) owned by this user
/// and closed to others. False with *why otherwise.
bool prepareFlightRecorderDir(const std::string& dir, bool own, std::string* why);

class FlightRecorder {
 public:
  /// `capacity` entries (> 0). Registers itself for SIGUSR1 dumps.
  explicit FlightRecorder(size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  void setIdentity(const FrIdentity& id);

  /// Records an issued op (op->collSeq already set by the issuer): sets op->frSeq.
  void queued(OpRecord* op);
  /// queued() and started() at once (one lock, one clock read), for an op that runs as
  /// soon as it is issued.
  void queuedStarted(OpRecord* op, const char* algorithm);
  void started(uint64_t seq, const char* algorithm, bool launched = false);
  void finished(uint64_t seq, bool ok, const char* detail = nullptr);
  /// While an op stalls: the rank it waits on and what for.
  void waiting(uint64_t seq, int peer, const std::string& what);

  /// Whether some entry is queued or started (work an abort cuts short; a failure was
  /// written out when it happened).
  bool outstanding() const;
  /// The record as JSON (format "braid-flight-record" version 1; see braid-doctor).
  std::string toJson(const char* reason) const;
  /// Writes the JSON file (into `path`, or flightRecorderDir()/<hash>-rank<r>.json
  /// when empty) and the WARN summary. Returns the file written ("" on failure, with a
  /// WARN naming the path).
  std::string dump(const char* reason, const std::string& path = "") const;

  /// Dumps every live recorder of this process (the SIGUSR1 path).
  static void dumpAll(const char* reason);
  /// The file name a dump goes to by default.
  std::string defaultPath() const;

 private:
  /// queued(), and started() too when startedWith is not null.
  void record(OpRecord* op, const char* startedWith);
  FrEntry* find(uint64_t seq);  ///< under mu_; null if overwritten
  std::string summaryLocked(int64_t nowUs) const;

  mutable std::mutex mu_;
  mutable std::mutex dumpMu_;  ///< one dump at a time (abort, a failing executor, SIGUSR1)
  std::vector<FrEntry> ring_;
  uint64_t next_ = 0;         ///< seq of the next op issued
  int64_t nextColl_ = 0;      ///< collSeq of the next collective
  FrIdentity id_;
};

/// The wall clock in microseconds, at the kernel's coarse resolution (a few ms): the
/// recorder's time base.
int64_t frNowUs();

}  // namespace braid
