// Collective fingerprints (BRAID_CHECK): before a group's collectives run, every rank
// of a communicator all-gathers a fixed-size summary of what it is about to run (how
// many collectives, the first one's sequence number, the first few calls in full and a
// hash of all of them) and compares. A rank that called another collective, count,
// type, op or root than the others is then named with both calls, on every rank,
// instead of hanging or corrupting data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/exec/op.h"

namespace braid {

struct CollFingerprint {
  static constexpr uint32_t kMagic = 0x46505242u;  // "BRPF"
  static constexpr int kShown = 4;  ///< calls carried in full
  struct Call {
    uint8_t coll = 0;  ///< Coll
    uint8_t type = 0;  ///< ncclDataType_t
    uint8_t op = 0;    ///< ncclRedOp_t; kPreMulSum for a user op; 0 where none applies
    uint8_t pad = 0;
    int32_t root = 0;  ///< 0 where none applies
    uint64_t count = 0;
  };
  static constexpr uint8_t kPreMulSum = 0xfe;
  uint32_t magic = kMagic;
  uint32_t nColl = 0;    ///< collectives of this communicator in the group
  int64_t collSeq = -1;  ///< the first one's number on the communicator
  uint64_t hash = 0;     ///< of every Call, in order
  Call calls[kShown];
};
static_assert(sizeof(CollFingerprint) == 24 + 16 * CollFingerprint::kShown,
              "fingerprints travel as bytes");

/// One collective's entry (what is compared of it).
CollFingerprint::Call callOf(const OpRecord& op);

/// The fingerprint of `n` calls, the first one numbered `collSeq`.
CollFingerprint fingerprintOfCalls(int64_t collSeq, const CollFingerprint::Call* calls, size_t n);

/// The fingerprint of `ops` (the collectives of one communicator in one group, in call
/// order; sends and receives are left out: they need not be matched by every rank).
CollFingerprint makeFingerprint(const std::vector<const OpRecord*>& ops);

/// "rank 3", "ranks 0-2,5" (ranks sorted ascending), for messages.
std::string rankList(const std::vector<int>& ranks);

/// "ncclAllReduce(count 1024, float, sum)".
std::string describeCall(const CollFingerprint::Call& c);

/// Compares the fingerprints of all ranks (index = rank). Returns "" when they agree,
/// else a message naming the ranks on each side and both calls, the same on every rank.
/// `what` opens the message.
std::string compareFingerprints(const std::vector<CollFingerprint>& all,
                                const char* what = "collective mismatch (BRAID_CHECK)");

}  // namespace braid
