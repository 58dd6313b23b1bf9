// The diagnosis behind braid-doctor (the braid_doctor_core library of the tools, not in
// libnccl): reads the flight records (JSON files written by src/diag/flight_recorder.cc) of the ranks of one or more communicators and says what
// went wrong: which ranks are behind, on which collective and call, who the stalled
// ranks wait on, which ranks called different collectives at one sequence number, which
// operations failed and why, and which ranks left no record.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace braid {

/// One rank's flight record, as read back.
struct FrRecord {
  struct Op {
    int64_t seq = 0, collSeq = -1;
    std::string call, type, op, state, algorithm, detail;
    int64_t count = 0;
    int root = -1, peer = -1;
    bool waiting = false;
    int waitingOn = 0;
    int64_t queuedUs = 0, startedUs = 0, endedUs = 0;
  };
  std::string file, reason, comm, commName, host;
  int rank = -1, nranks = 0, pid = 0;
  int64_t timeUs = 0, timeoutMs = 0, opsIssued = 0, collectivesIssued = 0;
  std::vector<Op> ops;  ///< in seq order (the last entries the ring kept)
};

/// Parses one file's text. False, with *error, if it is not a flight record.
bool parseFlightRecord(const std::string& text, FrRecord* out, std::string* error);

/// The diagnosis of all records (grouped by communicator), as lines of text.
std::string diagnose(const std::vector<FrRecord>& records);

/// "#42 ncclAllReduce(count 1024, float, sum)" for an op of a record (# the collective
/// number, or for a send/receive the op number)...
std::string describeOp(const FrRecord::Op& op);
/// ... and the call alone: "ncclAllReduce(count 1024, float, sum)".
std::string callText(const FrRecord::Op& op);

}  // namespace braid
