// CallTag: one rank's call (collective, count, type, op, root, collective number; or a
// send/receive and its bytes) in 16 bytes, carried with the data it moves so that the
// receiving rank can compare it with its own call before using a byte: the free,
// always-on collective mismatch check (docs/reliability.md). Every FIFO slot carries
// the tag of the call that wrote it (SlotInfo, src/exec/fifo.h; across networks in a
// trailer after the payload); every phase a rank publishes on the flag board carries
// it too (src/exec/board.h).
//
// Plain data, so that FIFOs and the board can hold it: the encoding and the message
// text live in call_tag.cc.
#pragma once
#include <cstdint>
#include <string>

namespace braid {

struct OpRecord;
struct CollFingerprint;

struct CallTag {
  uint64_t count = 0;  ///< elements (collectives) or bytes (send/receive)
  /// Bit 63 set for a tagged call; the call's kind, type, op, root and the low 24
  /// bits of its collective number below (call_tag.cc). 0: untagged (nothing is
  /// compared: the check is off, or the writer does not tag, like the CUDA executor).
  uint64_t desc = 0;

  bool tagged() const { return desc != 0; }
  bool operator==(const CallTag& o) const { return count == o.count && desc == o.desc; }
  bool operator!=(const CallTag& o) const { return !(*this == o); }
};

/// The tag of `op`: a collective's full call and number; a send's or a receive's bytes
/// only (a program may send floats that its peer receives as bytes, as with NCCL).
CallTag makeCallTag(const OpRecord& op);

/// A single call's tag as a fingerprint of one call (what fingerprints are compared
/// with, the collective number cut to the 24 bits the tag carries).
CollFingerprint fingerprintOfTag(const CallTag& t);

/// "collective #5 ncclAllReduce(count 1000, float, sum)", "ncclSend/ncclRecv of 4096
/// bytes", for messages.
std::string describeCallTag(const CallTag& t);

/// The message for a receiver that found `theirs` (from rank `peer`) on data it was
/// about to use for `mine`: names both calls.
std::string tagMismatchMessage(const CallTag& mine, int peer, const CallTag& theirs);

/// Compares the tags every rank published for one call (index = rank): "" when they
/// agree, else the message naming the ranks on each side and both calls (the same
/// on every rank, as BRAID_CHECK's).
std::string compareCallTags(const CallTag* all, int nranks);

}  // namespace braid
